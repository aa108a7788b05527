"""Zhejiang hourly CSVs: China-local 上午/下午 times, header quirks, quarantine, round trips of
generated files (CSV and the <hour>.xlsx variant), and the derived silver tables."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS
from tracelake.run.bronze import ingest_table
from tracelake.run.context import Run
from tracelake.run.derived import rebuild_derived
from tracelake.run.pipeline import run_ingest
from tracelake.schema import load_schema
from tracelake.sources.zhejiang import hourly
from tracelake.sources.zhejiang.clock import cst_hour, cst_to_utc, format_cst
from tracelake.sources.zhejiang.synth.cluster import load_cluster
from tracelake.sources.zhejiang.synth.hourly import HourlyWriter
from tracelake.sources.zhejiang.synth.world import World

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "hourly"
UTC = UTC


def _utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def _naive(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


def _parse(spark, raw_dir: Path, staging: Path) -> dict:
    """The exact parse (line by line) of every table (an ingest takes the fast one first)."""
    return {item.table: item.parser.exact(spark, item.files, load_schema(item.table))
            for item in hourly.plan(raw_dir, staging)}


@pytest.mark.portable
def test_every_am_pm_form_parses_to_its_utc_instant(spark):
    instants = [
        _utc(2024, 5, 23, 16, 0, 0),    # 00:00 CST: 上午12:00:00 and 上午00:00:00
        _utc(2024, 5, 23, 16, 30, 5),   # 00:30:05 CST
        _utc(2024, 5, 24, 3, 59, 59),   # 11:59:59 CST
        _utc(2024, 5, 24, 4, 0, 0),     # noon: 下午12:00:00
        _utc(2024, 5, 24, 5, 5, 9),     # 13:05:09: 下午1:05:09 and 下午13:05:09
        _utc(2024, 5, 24, 15, 59, 59),  # 23:59:59 CST
    ]
    texts = [(format_cst(t.timestamp(), style), t) for t in instants for style in ("12h", "24h")]
    assert [t for t, _ in texts[:2]] == ["2024/5/24 上午12:00:00", "2024/5/24 上午00:00:00"]
    assert texts[6][0] == "2024/5/24 下午12:00:00" and texts[8][0] == "2024/5/24 下午1:05:09"
    assert texts[9][0] == "2024/5/24 下午13:05:09"
    others = [("2024/5/24 0:00:04", _utc(2024, 5, 23, 16, 0, 4)),           # re-saved, 24-hour
              ("2024-05-24T01:02:03.5", _utc(2024, 5, 23, 17, 2, 3, 500000)),  # ISO
              (" 2024/5/24 下午 1:05 ", _utc(2024, 5, 24, 5, 5, 0))]           # padding, no seconds
    bad = ["2024/5/24 上午13:00:00", "2024/2/30 上午1:00:00", "24/5/2024 1:00", "",
           # the pattern's groups joined as the conversion joins them: still not a time
           "2024|5|24||1|05|09|", "2024|5|24|上午|1|05|09|5"]
    rows = [(text, _naive(t)) for text, t in texts + others] + [(b, None) for b in bad]
    df = spark.createDataFrame(rows, "text string, expected timestamp")
    got = df.select("text", cst_to_utc(F.col("text")).alias("expected"))
    assert_same_rows(got, df)


@pytest.mark.portable
def test_the_cst_hour_folder_of_an_instant_does_not_follow_the_session_time_zone(spark):
    """cst_hour names the evidence tables' hour_cst partitions: the same folder whatever
    zone a session (a notebook, a cluster) formats timestamps in."""
    instants = [_utc(2024, 5, 23, 16, 0, 0), _utc(2024, 5, 23, 16, 59, 59, 999999),  # 00:00, 00:59:59.999999 CST
                _utc(2024, 5, 24, 15, 59, 59), _utc(2024, 5, 24, 16, 0, 0),           # last hour of the day, next day
                _utc(2024, 2, 28, 16, 30, 0)]                                         # 2024-02-29 00:30 CST
    df = spark.createDataFrame([(_naive(t),) for t in instants], "ts timestamp")
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        for session_zone in ("UTC", "America/Los_Angeles", "Asia/Shanghai"):
            spark.conf.set("spark.sql.session.timeZone", session_zone)
            got = [r.h for r in df.select(cst_hour(F.col("ts")).alias("h")).collect()]
            assert got == ["2024052400", "2024052400", "2024052423", "2024052500", "2024022900"], session_zone
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.portable
def test_fixture_rows_parse_or_carry_their_reasons(spark, tmp_path):
    frames = _parse(spark, FIXTURE, tmp_path)
    assert sorted(frames) == ["bronze.zj_flow", "bronze.zj_link", "bronze.zj_nic", "bronze.zj_port_minute"]
    flow = frames["bronze.zj_flow"]
    errors = flow.filter(F.size(PARSE_ERRORS) > 0).select(F.col("time"), PARSE_ERRORS)
    assert_same_rows(errors, spark.createDataFrame([
        (None, ["expected 14 fields, found 9"]),
        (datetime(2024, 5, 24, 4, 3), ["rtt_ns: 'fast' is not a valid bigint"]),
        (None, ["time: '2024/5/24 上午13:04:00' is not a valid timestamp"]),
        (datetime(2024, 5, 24, 4, 5), ["dest_ip: missing value"]),
    ], f"time timestamp, {PARSE_ERRORS} array<string>"))
    padded = flow.filter(F.col("source_qp") == 9663).first()  # every field was padded
    assert (padded.source_server, padded.time, padded.rtt_ns, padded.nak_pkts) == (
        "NH-DC-NM129-B01-28U-GPU-31", datetime(2024, 5, 24, 4, 59), 6001, 2)
    # nic: BOM, CRLF, lower-case and corrected spellings, Ip and PortName swapped
    nic = frames["bronze.zj_nic"].orderBy("save_time").collect()
    assert [r.save_time for r in nic] == [datetime(2024, 5, 24, 4, 0, 4), datetime(2024, 5, 24, 4, 1, 5),
                                          datetime(2024, 5, 24, 4, 2, 4)]
    assert (nic[0].ip, nic[0].port_name, nic[0].received_packets_by_unicast) == ("10.107.254.31", "mlx5_2", 496472930239.0)
    assert nic[0].received_bytes == 1.826184052268872e16 and not any(r[PARSE_ERRORS] for r in nic)
    link = frames["bronze.zj_link"].orderBy("device_name", "if_abbreviated_name").collect()
    assert [(r.dst_port, r.ecn_marked_count, r.out_brdcast_pkts, r.out_brdcast_pkts_2) for r in link] == [
        (None, 0, 0, 0), ("FourHundredGigE1/0/8", 12, 0, 0), ("FourHundredGigE1/0/58", 0, 21701613, 0)]
    assert link[2].in_speed == 435554397 and link[0].dst_device == "NH-DC-NM129-B02-28U-GPU-33"
    port = frames["bronze.zj_port_minute"].orderBy("time").collect()  # GB18030 file
    assert [r.port_name for r in port][-1] == "四百G端口1/0/48"
    assert (port[0].in_bytes, port[0].in_use_ratio, port[0].in_pkts_loss) == (99356705029, 3.33, 38)


def test_fixture_ingest_keeps_or_quarantines_every_row(engine, spark, config, tmp_path):
    run = Run.new(config)
    stats = {i.table: ingest_table(spark, config, run, i.table, i.files, i.parser)
             for i in hourly.plan(FIXTURE, run.staging)}
    counts = {t: (s.rows_read, s.rows_kept, s.rows_quarantined) for t, s in stats.items()}
    assert counts == {"bronze.zj_flow": (9, 3, 6), "bronze.zj_nic": (3, 3, 0),
                      "bronze.zj_link": (3, 3, 0), "bronze.zj_port_minute": (3, 2, 1)}
    for s in stats.values():
        assert s.rows_read == s.rows_kept + s.rows_quarantined
    read = lambda layer, t: spark.read.format("delta").load(config.table_path(layer, t))  # noqa: E731
    assert read("bronze", "zj_flow").count() == 3
    quarantined = read("quarantine", "zj_flow").select(F.regexp_extract("raw_line", r",(2024/5/24 [^,]+),", 1).alias("at"), "reasons")
    dup = ["flow_key_unique"]
    assert sorted((r.at, r.reasons) for r in quarantined.collect()) == sorted([
        ("2024/5/24 下午12:02:00", ["expected 14 fields, found 9"]),
        ("2024/5/24 下午12:03:00", ["rtt_ns: 'fast' is not a valid bigint"]),
        ("2024/5/24 上午13:04:00", ["time: '2024/5/24 上午13:04:00' is not a valid timestamp"]),
        ("2024/5/24 下午12:05:00", ["dest_ip: missing value"]),
        ("2024/5/24 下午12:06:00", dup), ("2024/5/24 下午12:06:00", dup),
    ])
    port_q = read("quarantine", "zj_port_minute").first()
    assert port_q.reasons == ["column_values_to_match_regex(port_name)"]
    assert port_q.source_file == "trafficinfo/2024052412/2024052412_port.csv"

    derived = rebuild_derived(engine, config, run, hourly.DERIVED, {t: s.partitions for t, s in stats.items()}, lambda _: _Null())
    assert [(d.table, d.rows_read) for d in derived] == [("silver.zj_nic_rates", 2), ("silver.zj_link_wiring", 3)]
    rates = read("silver", "zj_nic_rates").orderBy("interval_end_ts").collect()
    assert [r.seconds for r in rates] == [61.0, 59.0]
    assert rates[0].rx_bytes == 0.0 and rates[1].rx_bytes == 1.2e7 and rates[0].tx_bytes == 52.0
    assert rates[1].rx_gbps == pytest.approx(1.2e7 * 8 / 59 / 1e9) and not any(r.counter_reset for r in rates)
    wiring = read("silver", "zj_link_wiring").orderBy("device_name", "port_name").collect()
    assert [(w.device_role, w.port_name, w.dst_role, w.ecn_marked_total) for w in wiring] == [
        ("leaf", "FourHundredGigE1/0/58", "spine", 12), ("leaf", "TwoHundredGigE1/0/16:1", "server", 0),
        ("spine", "FourHundredGigE1/0/8", "leaf", 0)]
    run.cleanup()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def cluster():
    return load_cluster("synthetic")[0]


def _world_files(cluster, hours: list[str], out: Path, fmt: str = "csv") -> World:
    world = World(cluster, hours, 3, 0.05, 11)
    writer = HourlyWriter(world)
    for hour in hours:
        writer.write_hour(hour, out / "trafficinfo" / hour, fmt)
    return world


@pytest.mark.e2e  # a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
@pytest.mark.portable
@pytest.mark.slow_on_classic
@pytest.mark.parametrize("hours", [["2024052323", "2024052400"], ["2024052411", "2024052412"]])
def test_generated_hours_round_trip_to_the_generators_instants(spark, cluster, tmp_path, hours):
    world = _world_files(cluster, hours, tmp_path / "raw")
    frames = _parse(spark, tmp_path / "raw", tmp_path / "staging")
    t0 = datetime.fromtimestamp(world.t0, UTC)
    minutes = {_naive(t0 + timedelta(minutes=k)) for k in range(120)}
    for table, col, shift in [("bronze.zj_flow", "time", 0), ("bronze.zj_port_minute", "time", 0),
                              ("bronze.zj_link", "start_time", 4)]:
        df = frames[table]
        lines = sum(len((tmp_path / "raw" / "trafficinfo" / h / f"{h}_{table.split('_')[1]}.csv")
                        .read_text(encoding="utf-8-sig").splitlines()) - 1 for h in hours)
        assert df.count() == lines > 0, table
        assert df.filter(F.size(PARSE_ERRORS) > 0).count() == 0, table
        got = {r[0] for r in df.select(col).distinct().collect()}
        assert got == {m + timedelta(seconds=shift) for m in minutes}, table
    nic = frames["bronze.zj_nic"].select(
        (F.unix_timestamp("save_time") % 60).alias("delay"), "hour_cst").distinct().collect()
    assert {r.delay for r in nic} <= {2, 3, 4, 5, 6} and {r.hour_cst for r in nic} == set(hours)
    # the texts really are the forms under test
    first = hours[1]
    flow_text = (tmp_path / "raw" / "trafficinfo" / first / f"{first}_flow.csv").read_text(encoding="utf-8-sig")
    link_text = (tmp_path / "raw" / "trafficinfo" / first / f"{first}_link.csv").read_text(encoding="utf-8")
    if first.endswith("00"):
        assert ",2024/5/24 上午12:00:00," in flow_text and ",2024/5/24 上午00:00:04," in link_text
        assert ",2024/5/23 下午11:59:00," in (tmp_path / "raw" / "trafficinfo" / hours[0] / f"{hours[0]}_flow.csv").read_text(encoding="utf-8-sig")
    else:
        assert ",2024/5/24 下午12:00:00," in flow_text and ",2024/5/24 下午12:00:04," in link_text


@pytest.mark.e2e  # a quarter of a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
@pytest.mark.portable
@pytest.mark.slow_on_classic
def test_xlsx_hour_reads_like_the_csv_hour(spark, cluster, tmp_path):
    hour = ["2024052400"]
    _world_files(cluster, hour, tmp_path / "csv")
    _world_files(cluster, hour, tmp_path / "xlsx", fmt="xlsx")
    assert [p.name for p in (tmp_path / "xlsx" / "trafficinfo" / "2024052400").iterdir()] == ["2024052400.xlsx"]
    from_csv = _parse(spark, tmp_path / "csv", tmp_path / "s1")
    from_xlsx = _parse(spark, tmp_path / "xlsx", tmp_path / "s2")
    for table, df in from_xlsx.items():
        assert df.filter(F.size(PARSE_ERRORS) > 0).count() == 0
        assert df.first().source_file.startswith("trafficinfo/2024052400/2024052400.xlsx!")
        cols = [c.name for c in load_schema(table).data_columns]
        assert_same_rows(df.select(*cols), from_csv[table].select(*cols))
    # both forms of the same kind in one hour is ambiguous
    shutil.copy(tmp_path / "csv" / "trafficinfo" / "2024052400" / "2024052400_nic.csv",
                tmp_path / "xlsx" / "trafficinfo" / "2024052400")
    with pytest.raises(TracelakeError, match="nic rows both in 2024052400_nic.csv and 2024052400.xlsx"):
        hourly.plan(tmp_path / "xlsx", tmp_path / "s3")


def test_missing_column_and_empty_folder(tmp_path):
    assert hourly.plan(tmp_path, tmp_path / "s") == []
    (tmp_path / "trafficinfo" / "2024052400").mkdir(parents=True)
    with pytest.raises(TracelakeError, match="2024052400: the hour folder holds no switch folders and no hourly files"):
        hourly.plan(tmp_path, tmp_path / "s")
    schema = load_schema("bronze.zj_port_minute")
    with pytest.raises(TracelakeError, match="lacks bronze.zj_port_minute's documented column.*InPktsLoss"):
        hourly.header_positions("DeviceName,PortName,Time,InBytes,InUseRatio,InSpeed,OutBytes,"
                                "OutUseRatio,OutSpeed,OutPktsLoss", schema, "x.csv")
    positions, labels = hourly.header_positions(
        "OUTPKTSLOSS , devicename,PortName,Time,InBytes,InUseRatio,InSpeed,InPktsLoss,OutBytes,"
        "OutUseRatio,OutSpeed,Extra", schema, "x.csv")
    assert positions["OutPktsLoss"] == 0 and positions["DeviceName"] == 1 and labels[-1] == "Extra"


@pytest.mark.e2e  # a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
def test_a_new_hour_adds_its_link_ends_to_the_wiring_and_a_replaced_hour_rebuilds_it(
        engine, spark, config, cluster, tmp_path, monkeypatch):
    """silver.zj_link_wiring reads a new hour's link.csv rows only, and still equals link_wiring
    of every stored hour: after hours added one by one, after an hour replaced with other rows
    (built whole again), and after an hour whose rebuild failed once is run again."""
    hours = ["2024052400", "2024052401", "2024052402", "2024052403"]
    raw = tmp_path / "raw"
    _world_files(cluster, hours, raw)
    read_hours: list[list[str]] = []
    whole = hourly.link_wiring

    def spy(link):
        read_hours.append(sorted(r.hour_cst for r in link.select("hour_cst").distinct().collect()))
        return whole(link)
    monkeypatch.setattr(hourly, "link_wiring", spy)
    table = lambda layer, name: spark.read.format("delta").load(config.table_path(layer, name))  # noqa: E731

    def delta_schema() -> list[tuple]:  # (a field's metadata may say {} or nothing)
        fields = DeltaTable(config.table_path("silver", "zj_link_wiring")).schema().fields
        return [(f.name, str(f.type), f.nullable) for f in fields]

    def wiring_is_whole(lines: int) -> None:
        link = table("bronze", "zj_link")
        assert link.count() == lines
        stored = table("silver", "zj_link_wiring")
        assert stored.agg(F.sum("samples")).first()[0] == lines
        assert_same_rows(stored, whole(link))
        assert delta_schema() == schema_after_first_hour

    link_lines = [len((raw / "trafficinfo" / h / f"{h}_link.csv").read_text(encoding="utf-8").splitlines()) - 1
                  for h in hours]
    run_ingest(engine, config, "zhejiang", str(raw), hours=hours[0])
    schema_after_first_hour = delta_schema()  # built whole
    for hour in hours[1:3]:
        run_ingest(engine, config, "zhejiang", str(raw), hours=hour)
    assert read_hours == [[hours[0]], [hours[1]], [hours[2]]]
    wiring_is_whole(sum(link_lines[:3]))

    # hour 2 again with one link row fewer and other ECN marks: its old rows are in the table
    path = raw / "trafficinfo" / hours[1] / f"{hours[1]}_link.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]).replace(",0,", ",7,", 1) + "\n", encoding="utf-8")
    read_hours.clear()
    run_ingest(engine, config, "zhejiang", str(raw), hours=hours[1])
    assert read_hours == [hours[:3]]
    wiring_is_whole(sum(link_lines[:3]) - 1)

    # the fourth hour's bronze commit lands, its wiring rebuild fails; the re-run adds it
    def broken(stored, added):
        raise RuntimeError("rebuild interrupted")
    with monkeypatch.context() as m:
        m.setattr(hourly, "wiring_with", broken)
        with pytest.raises(Exception, match="rebuild interrupted"):
            run_ingest(engine, config, "zhejiang", str(raw), hours=hours[3])
    assert table("bronze", "zj_link").filter(F.col("hour_cst") == hours[3]).count() == link_lines[3]
    read_hours.clear()
    run_ingest(engine, config, "zhejiang", str(raw), hours=hours[3])
    assert read_hours == [[hours[3]]]
    wiring_is_whole(sum(link_lines) - 1)
