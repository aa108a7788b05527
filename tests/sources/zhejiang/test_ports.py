"""Zhejiang per-port counters: file-name rules, the parser, silver.zj_port_rates (zero rows,
32-bit wraps, gaps, line rate) on real excerpts, the generator's round trip, and one ingest of
the 350 real files (module fixture) through tracelake.run.pipeline.run_ingest."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from conftest import make_config, shared
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.delta.fingerprint import fingerprint
from tracelake.delta.maintenance import history
from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS, ROW_ID
from tracelake.io.staging import Scratch
from tracelake.run.parsing import settle_parse
from tracelake.run.pipeline import run_ingest
from tracelake.schema import load_schema
from tracelake.sources.zhejiang import layout, ports
from tracelake.sources.zhejiang.ports import parser, tables
from tracelake.sources.zhejiang.ports.window import port_rates
from tracelake.sources.zhejiang.synth.ports import HEADER, OUTAGE_END_MS, write_port_hour

HOUR = "2024052400"
LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825"
ST1 = "NH-DC-NM224-J05-ROCE-ST-leaf-1_GPU_S9825"
REAL_FILES, REAL_ROWS = 350, 1_861_310
HOUR_START = datetime(2024, 5, 23, 16, tzinfo=UTC).timestamp()
MGMT = "M-GigabitEthernet0/0/0"


def _settled(spark, item, raw_dir: Path, name: str):
    """The plan's parse as the bronze step settles it (run.parsing), its rows as parsed."""
    return settle_parse(spark, item.parser, item.files, load_schema(ports.TABLE), raw_dir / "_staging" / name,
                        scratch=Scratch(str(raw_dir / "_staging")))


def _parse(spark, raw_dir: Path):
    [item] = tables.plan(raw_dir, raw_dir / "_staging")
    return _settled(spark, item, raw_dir, "parsed.parquet").rows


def _write(raw_dir: Path, folder: str, name: str, lines: list[str], newline: str = "\n", bom: str = "") -> Path:
    path = raw_dir / "trafficinfo" / HOUR / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((bom + newline.join([HEADER, *lines]) + newline).encode("utf-8"))
    return path


def _real_lines(name: str, first: int, count: int, folder: str = LEAF1) -> list[str]:
    """`count` data lines of a real file from data line `first` (1-based), read in place."""
    path = shared("zhejiang", "trafficinfo", HOUR, folder, name)
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    return lines[first:first + count]


# ---------------------------------------------------------------- file-name rules

def _rule_table(folder: str) -> dict[str, str]:
    """§3.2 written out: file name -> PortName for one switch folder."""
    leaf = re.search(r"ROCE-((?:ST-)?[Ll]eaf-\d+)_", folder).group(1)
    if leaf.startswith("ST-"):
        prefix = leaf.removeprefix("ST-")
        table = {f"{prefix}_{p}.csv": f"FourHundredGigE1/0/{p}" for p in range(1, 65)}
    else:
        prefix = leaf
        table = {f"{prefix}_{p}_{s}.csv": f"TwoHundredGigE1/0/{p}:{s}" for p in range(1, 31) for s in (1, 2)}
        table |= {f"{prefix}_{p}.csv": f"FourHundredGigE1/0/{p}" for p in range(31, 65)}
    return table | {f"{prefix}_0.csv": MGMT}


@pytest.mark.portable
def test_file_names_map_to_port_names_and_back():
    assert layout.port_name_for_file("Leaf-1_0.csv") == MGMT
    assert layout.port_name_for_file("Leaf-2_16_1.csv") == "TwoHundredGigE1/0/16:1"
    assert layout.port_name_for_file("Leaf-1_31.csv") == "FourHundredGigE1/0/31"  # the doc says 200G: wrong
    assert layout.port_name_for_file("leaf-1_64.csv") == "FourHundredGigE1/0/64"
    assert layout.device_name(ST1) == "NH-DC-NM224-J05-ROCE-ST-leaf-1.GPU.S9825"
    assert layout.file_name_for_port(ST1, MGMT) == "leaf-1_0.csv"
    assert layout.file_name_for_port(LEAF1, "TwoHundredGigE1/0/7:2") == "Leaf-1_7_2.csv"
    for folder in (LEAF1, ST1):
        for name, port in _rule_table(folder).items():
            assert (layout.port_name_for_file(name), layout.file_name_for_port(folder, port)) == (port, name)
    for bad in ("Leaf-1_0_1.csv", "Leaf-1_3_3.csv", "Leaf-1.csv", "Spine-1_3.csv"):
        with pytest.raises(TracelakeError):
            layout.port_name_for_file(bad)


@pytest.mark.portable
def test_plan_skips_dot_files_and_hourly_csvs_and_rejects_strangers(tmp_path):
    assert tables.plan(tmp_path, tmp_path) == []
    _write(tmp_path, LEAF1, "Leaf-1_0.csv", [])
    (tmp_path / "trafficinfo" / HOUR / LEAF1 / ".DS_Store").write_bytes(b"\0\0")
    (tmp_path / "trafficinfo" / HOUR / ".DS_Store").write_bytes(b"\0")
    (tmp_path / "trafficinfo" / HOUR / f"{HOUR}_port.csv").write_text("x\n")
    [item] = tables.plan(tmp_path, tmp_path)
    assert [(f.name, f.constants) for f in item.files] == [(
        f"trafficinfo/{HOUR}/{LEAF1}/Leaf-1_0.csv",
        {"hour_cst": HOUR, "folder_device_name": "NH-DC-NM129-B03-ROCE-Leaf-1.GPU.S9825", "file_port_name": MGMT},
    )]
    _write(tmp_path, LEAF1, "Leaf-2_1_1.csv", [])
    with pytest.raises(TracelakeError, match="another switch"):
        tables.plan(tmp_path, tmp_path)
    (tmp_path / "trafficinfo" / HOUR / LEAF1 / "Leaf-2_1_1.csv").unlink()
    (tmp_path / "trafficinfo" / HOUR / "NH-DC-NM129-E09-ROCE-spine-9_GPU_S9825").mkdir()
    with pytest.raises(TracelakeError, match="not a switch folder"):
        tables.plan(tmp_path, tmp_path)


@pytest.mark.portable
def test_every_real_file_is_planned_with_the_rule_tables_port_name(tmp_path):
    root = shared("zhejiang", "trafficinfo")
    (tmp_path / "trafficinfo").symlink_to(root)
    [item] = tables.plan(tmp_path, tmp_path)
    assert len(item.files) == REAL_FILES
    for raw in item.files:
        folder, name = raw.name.split("/")[2:]
        assert raw.constants["file_port_name"] == _rule_table(folder)[name]
        with open(raw.path, encoding="utf-8") as fh:
            fh.readline()
            first = fh.readline().split(",")
        assert (first[2], first[3]) == (raw.constants["folder_device_name"], raw.constants["file_port_name"])
    per_folder = {}
    for raw in item.files:
        per_folder.setdefault(raw.name.split("/")[2], set()).add(raw.name.split("/")[3])
    assert {f: len(n) for f, n in per_folder.items()} == {
        LEAF1: 95, "NH-DC-NM129-B04-ROCE-Leaf-2_GPU_S9825": 95,
        "NH-DC-NM129-F03-ROCE-Leaf-10_GPU_S9825": 95, ST1: 65}
    assert all(names == set(_rule_table(f)) for f, names in per_folder.items())


# ---------------------------------------------------------------- parser

@pytest.mark.portable
def test_parser_keeps_bad_rows_with_reasons(spark, tmp_path):
    good = f"2024/05/24 星期五 00:00:00.914,1716480000914,{layout.device_name(LEAF1)},{MGMT},9,1435,20,23556,0,0"
    bad = [
        good.replace(",9,1435,", ",9,"),                   # 9 fields
        good.replace(",23556,", ",23556.5,"),              # fractional counter
        good.replace("1716480000914", "1716480000.914"),  # seconds, not whole ms
        good.replace(f",{MGMT},", ",,"),                   # missing port
        good + ",7",                                       # 11 fields
        good.replace("1716480000914", "99999999999999999"),  # beyond the year 9999
        good.replace("1716480000914", "1716480000"),       # seconds: 1970 as milliseconds
    ]
    _write(tmp_path, LEAF1, "Leaf-1_0.csv", [good, *bad])
    _write(tmp_path, LEAF1, "Leaf-1_1_1.csv", [good.replace(MGMT, "TwoHundredGigE1/0/1:1")], newline="\r\n", bom="\ufeff")
    parsed = _parse(spark, tmp_path)
    got = parsed.select("raw_line", PARSE_ERRORS).orderBy("raw_line")
    expected = spark.createDataFrame([  # the well-formed file takes the one pass, which keeps no raw line of a good row
        (good, []), (None, []),
        (bad[0], ["expected 10 fields, found 9"]),
        (bad[1], ["out_octets: '23556.5' is not a valid bigint"]),
        (bad[2], ["save_time_utc: '1716480000.914' is not a valid epoch time in whole milliseconds of the years 2000-2099"]),
        (bad[3], ["port_name: missing value"]),
        (bad[4], ["expected 10 fields, found 11"]),
        (bad[5], ["save_time_utc: '99999999999999999' is not a valid epoch time in whole milliseconds of the years 2000-2099"]),
        (bad[6], ["save_time_utc: '1716480000' is not a valid epoch time in whole milliseconds of the years 2000-2099"]),
    ], f"raw_line string, {PARSE_ERRORS} array<string>").orderBy("raw_line")
    assert_same_rows(got, expected)
    row = parsed.filter(F.size(PARSE_ERRORS) == 0).orderBy("file_port_name").first()
    assert (row.save_time_utc, row.hour_cst, row.out_octets, row.in_ratio, row.raw_values_json) == (
        datetime(2024, 5, 23, 16, 0, 0, 914000), HOUR, 23556, 0.0, None)
    assert parsed.filter("raw_line = '" + bad[1] + "'").first().raw_values_json.startswith(
        '{"SaveTime":"2024/05/24 星期五 00:00:00.914","SaveTimeUTC":"1716480000914"')
    assert parsed.select(ROW_ID).distinct().count() == 9


# ---------------------------------------------------------------- rates on real excerpts

@pytest.mark.portable
def test_zero_rows_carry_their_bytes_to_the_next_update_on_a_real_excerpt(spark, tmp_path):
    lines = _real_lines("Leaf-1_16_1.csv", 1, 400)  # the hour's start: 2 rows, the outage, steady polling
    _write(tmp_path, LEAF1, "Leaf-1_16_1.csv", lines)
    rates = port_rates(_parse(spark, tmp_path)).orderBy("save_time_utc").collect()
    statuses = [r.status for r in rates]
    assert statuses[:4] == ["first", "no_new_data", "gap", "no_new_data"]
    assert {s: statuses.count(s) for s in set(statuses)} == {"first": 1, "no_new_data": 149, "gap": 1, "update": 249}
    zero = [r for r in rates if r.in_octets == r.out_octets == r.in_pkts == r.out_pkts == 0]
    assert len(zero) == 150 and all(r.status in ("no_new_data", "first") and r.in_util is None for r in zero)
    # the update after the zero row at 00:04:15.286 covers 00:04:14.359 -> 00:04:16.454
    r = rates[4]
    assert (r.in_octets, r.interval_start_utc, r.interval_s) == (3_555_510_742, rates[2].save_time_utc, 2.095)
    assert r.in_bytes_per_s == pytest.approx(3_555_510_742 / 2.095) and r.in_util == pytest.approx(3_555_510_742 * 8 / 2.095 / 200e9)
    updates = [r for r in rates if r.status == "update"]
    previous = [rates[2]] + updates[:-1]  # the intervals tile the time after the outage row
    assert all(u.interval_start_utc == p.save_time_utc for u, p in zip(updates, previous))
    assert sum(u.in_bytes_per_s * u.interval_s for u in updates) == pytest.approx(sum(u.in_octets for u in updates))
    assert max(max(u.in_util, u.out_util) for u in updates) < 1.0


@pytest.mark.portable
def test_a_32_bit_wrap_on_a_real_management_excerpt_is_undone(spark, tmp_path):
    lines = _real_lines("Leaf-1_0.csv", 1, 300)
    fields = lines[150].split(",")  # as Leaf-4's switch delivers a wrapped delta: value - 2^32
    delivered = int(fields[7])
    fields[7], fields[9] = str(delivered - 2**32), "-10.60"
    lines[150] = ",".join(fields)
    _write(tmp_path, LEAF1, "Leaf-1_0.csv", lines)
    parsed = _parse(spark, tmp_path)
    assert parsed.filter(F.size(PARSE_ERRORS) > 0).count() == 0
    assert [r.out_octets for r in parsed.filter("out_octets < 0").collect()] == [delivered - 2**32]
    rates = port_rates(parsed).orderBy("save_time_utc").collect()
    assert [i for i, r in enumerate(rates) if r.counter_wrapped] == [150]
    assert rates[150].out_octets == delivered and 0 < rates[150].out_util < 0.01
    assert {r.status for r in rates} == {"first", "gap", "update"}  # a management port never reads zero
    assert all(r.line_rate_bps == 1_000_000_000 for r in rates)


# ---------------------------------------------------------------- rates rules (synthetic)

def _counters(spark, port: str, rows: list[tuple[float, int]]):
    return spark.createDataFrame(
        [(HOUR, "SW", port, datetime.fromtimestamp(HOUR_START + t, UTC).replace(tzinfo=None), b // 2, b, b // 2, b)
         for t, b in rows],
        "hour_cst string, device_name string, port_name string, save_time_utc timestamp, "
        "in_pkts bigint, in_octets bigint, out_pkts bigint, out_octets bigint",
    )


@pytest.mark.portable
def test_rates_statuses_gaps_idle_and_line_rate(spark):
    rows = [(0.0, 0), (0.5, 0), (1.0, 10**9), (1.5, 0), (2.0, 10**9), (8.0, 10**9),
            (8.5, 0), (13.0, 0), (14.0, 0), (14.5, 10**9), (15.0, 20 * 10**9),
            (15.5, 0), (19.5, 9 * 10**9)]
    got = port_rates(_counters(spark, "TwoHundredGigE1/0/1:1", rows)).orderBy("save_time_utc").select(
        "status", "interval_s", "dt_s", "in_bytes_per_s", "in_util")
    expected = spark.createDataFrame([
        ("first", None, None, None, None),
        ("no_new_data", None, 0.5, None, None),
        ("update", 1.0, 0.5, 1e9, 0.04),            # carried from the first row
        ("no_new_data", None, 0.5, None, None),
        ("update", 1.0, 0.5, 1e9, 0.04),
        ("gap", None, 6.0, None, None),              # 6 s without a row: no rate
        ("no_new_data", None, 0.5, None, None),
        ("no_new_data", None, 4.5, None, None),      # 5.0 s after the last update: still waiting
        ("idle", 1.0, 1.0, 0.0, 0.0),                # 6 s: the counter kept reading zero
        ("update", 0.5, 0.5, 2e9, 0.08),             # after idle: since the previous row only
        ("over_line_rate", None, 0.5, None, None),   # 320 Gb/s on a 200G port: withheld
        ("no_new_data", None, 0.5, None, None),
        ("update", 4.5, 4.0, 2e9, 0.08),             # a 4 s poll gap after a waiting zero row: carried
    ], "status string, interval_s double, dt_s double, in_bytes_per_s double, in_util double")
    assert_same_rows(got, expected)
    speeds = port_rates(_counters(spark, MGMT, [(0.0, 1), (0.5, 125_000)]).unionByName(
        _counters(spark, "FourHundredGigE1/0/40", [(0.0, 1)])).unionByName(
        _counters(spark, "HundredGigE1/0/1", [(0.0, 1)])))
    got = sorted((r.port_name, r.line_rate_bps, r.in_util or 0.0) for r in speeds.collect())
    assert got == [("FourHundredGigE1/0/40", 400_000_000_000, 0.0), ("HundredGigE1/0/1", None, 0.0),
                   (MGMT, 1_000_000_000, 0.0), (MGMT, 1_000_000_000, 0.002)]


@pytest.mark.portable
def test_a_negative_count_on_a_64_bit_port_is_flagged_not_unwrapped(spark):
    """Only the management port's counters are 32-bit: adding 2^32 to a 400G port's negative count
    would invent ~4.3 GB of traffic, so the row keeps its value and gets no rate."""
    rows = [(0.0, 10**9), (0.5, 10**9), (1.0, -(10**6)), (1.5, 10**9)]
    got = port_rates(_counters(spark, "FourHundredGigE1/0/40", rows)).orderBy("save_time_utc").select(
        "status", "out_octets", "counter_wrapped", "interval_s", "out_bytes_per_s")
    expected = spark.createDataFrame([
        ("first", 10**9, False, None, None),
        ("update", 10**9, False, 0.5, 2e9),
        ("negative_counter", -(10**6), False, None, None),
        ("update", 10**9, False, 0.5, 2e9),
    ], "status string, out_octets bigint, counter_wrapped boolean, interval_s double, out_bytes_per_s double")
    assert_same_rows(got, expected)


# ---------------------------------------------------------------- generator

def _constant(level):
    def load(folder, port, t):
        return np.full_like(t, level), np.full_like(t, level / 2)
    return load


@pytest.mark.portable
def test_generated_files_have_the_real_format_and_quirks(tmp_path):
    chosen = [(LEAF1, MGMT), (LEAF1, "TwoHundredGigE1/0/16:1"), (LEAF1, "FourHundredGigE1/0/40"),
              (ST1, MGMT), (ST1, "FourHundredGigE1/0/60")]
    paths = write_port_hour(tmp_path, HOUR, chosen, _constant(0.5), seed=3)
    base = tmp_path / "trafficinfo" / HOUR
    assert [p.relative_to(base).as_posix() for p in paths] == sorted([
        f"{LEAF1}/Leaf-1_0.csv", f"{LEAF1}/Leaf-1_16_1.csv", f"{LEAF1}/Leaf-1_40.csv",
        f"{ST1}/leaf-1_0.csv", f"{ST1}/leaf-1_60.csv"])
    assert write_port_hour(tmp_path / "again", HOUR, chosen, _constant(0.5), seed=3)[1].read_bytes() == paths[1].read_bytes()
    text = paths[1].read_bytes()
    assert not text.startswith(b"\xef\xbb\xbf") and b"\r" not in text and text.endswith(b"\n")
    lines = text.decode("utf-8").splitlines()
    assert lines[0] == HEADER
    rows = [line.split(",") for line in lines[1:]]
    assert re.fullmatch(r"2024/05/24 星期五 00:00:0\d\.\d{3}", rows[0][0])
    ms = np.array([int(r[1]) for r in rows])
    assert ms[2] - ms[0] > 250_000 and ms[2] == HOUR_START * 1000 + OUTAGE_END_MS  # the outage
    dt = np.diff(ms[2:])
    assert 520 < np.median(dt) < 570 and 4_500 < len(rows) < 5_500
    zero = np.mean([r[4:8] == ["0"] * 4 for r in rows])
    assert 0.3 < zero < 0.55
    mgmt = [line.split(",") for line in paths[0].read_text(encoding="utf-8").splitlines()[1:]]
    assert not any(r[4:8] == ["0"] * 4 for r in mgmt)
    storage = paths[4].read_text(encoding="utf-8").splitlines()
    assert 6_000 < len(storage) < 6_500 and storage[1].split(",")[2] == "NH-DC-NM224-J05-ROCE-ST-leaf-1.GPU.S9825"
    ratios = {r[8] for r in rows} | {r[9] for r in rows}
    assert {"0", "50"} <= ratios and all(re.fullmatch(r"\d+(\.\d\d?)?", x) for x in ratios)


@pytest.mark.portable
def test_generated_load_round_trips_through_parser_and_rates(spark, tmp_path):
    burst_at = HOUR_START + 1_800

    def load(folder, port, t):
        if port.endswith("16:1"):
            return np.full_like(t, 0.5), np.full_like(t, 0.25)
        level = np.where((t >= burst_at) & (t < burst_at + 20), 0.9, 0.1)
        return level, np.zeros_like(t)

    write_port_hour(tmp_path, HOUR, [(LEAF1, "TwoHundredGigE1/0/16:1"), (LEAF1, "TwoHundredGigE1/0/17:2")], load, seed=11)
    rates = port_rates(_parse(spark, tmp_path)).filter("status = 'update'").cache()
    steady = rates.filter(F.col("port_name").endswith("16:1"))
    lo, hi, lo_out, hi_out = steady.agg(F.min("in_util"), F.max("in_util"), F.min("out_util"), F.max("out_util")).first()
    assert 0.499 < lo <= hi < 0.501 and 0.249 < lo_out <= hi_out < 0.251
    bursty = rates.filter(F.col("port_name").endswith("17:2")).select(
        F.unix_millis("interval_start_utc").alias("start"), F.unix_millis("save_time_utc").alias("end"), "in_util").collect()
    inside = [r.in_util for r in bursty if r.start >= burst_at * 1000 and r.end <= (burst_at + 20) * 1000]
    outside = [r.in_util for r in bursty if r.end <= burst_at * 1000 or r.start >= (burst_at + 20) * 1000]
    assert len(inside) >= 8 and all(abs(u - 0.9) < 1e-3 for u in inside)
    assert all(abs(u - 0.1) < 1e-3 for u in outside)
    peak = max(bursty, key=lambda r: r.in_util)
    assert burst_at * 1000 <= peak.end <= (burst_at + 21) * 1000


@pytest.mark.portable
def test_generated_management_wraps_are_undone(spark, tmp_path):
    for seed in range(40):  # a management file holds a wrap with probability 1/8
        [path] = write_port_hour(tmp_path / str(seed), HOUR, [(LEAF1, MGMT)], _constant(0.0), seed=seed)
        if ",-" in path.read_text(encoding="utf-8"):
            break
    else:
        pytest.fail("no generated management file with a 32-bit wrap in 40 seeds")
    rates = port_rates(_parse(spark, tmp_path / str(seed)))
    wrapped = rates.filter("counter_wrapped").collect()
    assert len(wrapped) == 1 and 0 < wrapped[0].out_octets < 100_000
    assert rates.agg(F.max("out_util")).first()[0] < 0.01


@pytest.mark.portable
def test_the_one_pass_and_the_line_by_line_parse_give_the_same_rows(spark, tmp_path):
    chosen = [(LEAF1, MGMT), (LEAF1, "TwoHundredGigE1/0/16:1"), (ST1, "FourHundredGigE1/0/40")]
    write_port_hour(tmp_path, HOUR, chosen, _constant(0.2), seed=4)
    crlf = _real_lines("Leaf-1_1_1.csv", 1, 40)
    _write(tmp_path, LEAF1, "Leaf-1_1_1.csv", crlf, newline="\r\n", bom="\ufeff")
    [item] = tables.plan(tmp_path, tmp_path / "_staging")
    schema = load_schema(ports.TABLE)
    settled = _settled(spark, item, tmp_path, "fast.parquet")
    fast, held = settled.rows, settled.held
    assert held  # well-formed files (a BOM and CRLF included) take the one pass
    exact = parser.parse_fields(parser._read_lines(spark, item.files, schema), schema)
    contract = [*[c.name for c in schema.data_columns], "source_file", PARSE_ERRORS]
    assert_same_rows(fast.select(*contract), exact.select(*contract))
    assert fast.filter(F.size(PARSE_ERRORS) > 0).count() == 0
    assert fast.filter(F.col("source_file").endswith("Leaf-1_1_1.csv")).count() == 40


@pytest.mark.portable
def test_the_pass_gives_its_rows_in_the_staged_form_the_engine_would_compute(spark, tmp_path):
    """FastParse.clean: staging takes the pass's columns as they come. They equal what
    quality.split.staged_form computes for them with the engine (a failed row's floats nulled,
    raw text only where a row failed or was flagged), marker row included."""
    from tracelake.quality.gate import load_suite, proofs
    from tracelake.quality.split import row_flags, staged_form

    chosen = [(LEAF1, MGMT), (LEAF1, "TwoHundredGigE1/0/16:1")]
    write_port_hour(tmp_path, HOUR, chosen, _constant(0.2), seed=5)
    lines = _real_lines("Leaf-1_0.csv", 1, 5)
    _write(tmp_path, LEAF1, "Leaf-1_0.csv", [*lines[:2], "", *lines[2:]])  # a blank line: its marker
    [item] = tables.plan(tmp_path, tmp_path / "_staging")
    schema = load_schema(ports.TABLE)
    parsed = item.parser.parse(spark, item.files, schema, scratch=Scratch(str(tmp_path / "_staging")))
    assert parsed.clean
    flags, by_gx = row_flags(load_suite(ports.TABLE))
    proven = [rule for rule, column in proofs(load_suite(ports.TABLE), item.parser.name).items() if column is None]
    as_given = staged_form(parsed.frame, schema, flags, by_gx, proven, clean=True)
    computed = staged_form(parsed.frame, schema, flags, by_gx, proven)
    assert as_given.columns == computed.columns
    assert_same_rows(as_given, computed)
    markers = as_given.filter(F.size(PARSE_ERRORS) > 0).select("source_file", PARSE_ERRORS, "in_ratio").collect()
    assert [tuple(r) for r in markers] == [(f"trafficinfo/{HOUR}/{LEAF1}/Leaf-1_0.csv", ["file parsed line by line"],
                                            None)]


@pytest.mark.portable
def test_files_with_lines_the_one_pass_cannot_type_are_parsed_line_by_line(spark, tmp_path):
    lines = _real_lines("Leaf-1_0.csv", 1, 5)
    quoted = lines[3].replace(layout.device_name(LEAF1), '"NH,DC"')
    _write(tmp_path / "blank", LEAF1, "Leaf-1_0.csv", [*lines[:2], "", *lines[2:]])
    _write(tmp_path / "quote", LEAF1, "Leaf-1_0.csv", [*lines[:3], quoted, lines[4]])
    for case, bad, reason in (("blank", "", "expected 10 fields, found 1"),
                              ("quote", quoted, "expected 10 fields, found 11")):
        [item] = tables.plan(tmp_path / case, tmp_path / case / "_staging")
        settled = _settled(spark, item, tmp_path / case, "parsed.parquet")
        parsed, held = settled.rows, settled.held
        assert not held, case  # the file went the exact way
        got = parsed.select("raw_line", PARSE_ERRORS)
        expected = [(line, []) for line in lines if line != lines[3] or case == "blank"] + [(bad, [reason])]
        assert_same_rows(got, spark.createDataFrame(expected, f"raw_line string, {PARSE_ERRORS} array<string>"))


# ---------------------------------------------------------------- ingest (Delta)

@pytest.fixture(scope="module")
def real_lake(engine, tmp_path_factory):
    """The 350 real files ingested once: (config, stats) for the module's tests."""
    root = shared("zhejiang", "trafficinfo")
    raw = tmp_path_factory.mktemp("zj-ports-raw")
    (raw / "trafficinfo").symlink_to(root)
    config = make_config(tmp_path_factory.mktemp("zj-ports-lake"))
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(raw))}
    return config, stats


def test_real_files_ingest_exactly(spark, real_lake):
    config, stats = real_lake
    bronze = stats[ports.TABLE]
    assert (bronze.rows_read, bronze.rows_kept, bronze.rows_quarantined) == (REAL_ROWS, REAL_ROWS, 0)
    table = spark.read.format("delta").load(config.table_path("bronze", "zj_port_counters"))
    per_file = {r.source_file: r.n for r in table.groupBy("source_file").agg(F.count("*").alias("n")).collect()}
    assert len(per_file) == REAL_FILES and sum(per_file.values()) == REAL_ROWS
    for name, n in per_file.items():
        with open(shared("zhejiang", *name.split("/")), "rb") as fh:
            assert fh.read().count(b"\n") - 1 == n, name
    mismatched = table.filter("port_name != file_port_name OR device_name != folder_device_name").count()
    assert mismatched == 0
    assert table.agg(F.sum("in_octets"), F.min("save_time_utc"), F.max("save_time_utc")).first() == (
        1_732_574_037_379_551, datetime(2024, 5, 23, 16, 0, 0, 622000), datetime(2024, 5, 23, 16, 59, 59, 835000))
    quarantine = spark.read.format("delta").load(config.table_path("quarantine", "zj_port_counters")).count()
    assert bronze.rows_read == bronze.rows_kept + bronze.rows_quarantined == table.count() + quarantine


def test_real_rates_stay_within_line_rate(spark, real_lake):
    config, stats = real_lake
    assert stats[ports.RATES_TABLE].rows_kept == REAL_ROWS
    rates = spark.read.format("delta").load(config.table_path("silver", "zj_port_rates"))
    by_status = {r.status: r.n for r in rates.groupBy("status").agg(F.count("*").alias("n")).collect()}
    assert by_status == {"first": 350, "gap": 448, "update": 894_805, "no_new_data": 704_499, "idle": 261_208}
    worst = rates.agg(F.max(F.greatest("in_util", "out_util")), F.max("interval_s"), F.max("dt_s")).first()
    assert 0.9977 < worst[0] < 0.9978 and worst[1] == 6.117  # zero rows waiting < 5 s, then a < 5 s poll
    assert worst[2] == 252.942  # the collector outage: a gap, no rate
    zero_with_rate = rates.filter(
        "in_octets = 0 AND out_octets = 0 AND in_pkts = 0 AND out_pkts = 0 AND status NOT IN ('idle') "
        "AND in_util IS NOT NULL").count()
    assert zero_with_rate == 0
    # volumes add up: the octets with a rate plus those without equal bronze's
    total = rates.agg(F.sum("in_octets")).first()[0]
    assert total == 1_732_574_037_379_551


def test_bad_rows_are_quarantined_and_counted(engine, spark, config, tmp_path):
    [good, other] = write_port_hour(tmp_path, HOUR, [(LEAF1, "TwoHundredGigE1/0/1:1"), (LEAF1, "TwoHundredGigE1/0/2:1")],
                                    _constant(0.3), seed=5)
    lines = good.read_text(encoding="utf-8").splitlines()
    n = len(lines) - 1 + len(other.read_text(encoding="utf-8").splitlines()) - 1
    lines[10] = lines[10].rsplit(",", 2)[0]                    # cut short
    lines[20] = lines[20].replace("TwoHundredGigE1/0/1:1", "TwoHundredGigE1/0/2:1")  # another port's row
    good.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path))}[ports.TABLE]
    assert (stats.rows_read, stats.rows_kept, stats.rows_quarantined) == (n, n - 2, 2)
    quarantine = spark.read.format("delta").load(config.table_path("quarantine", "zj_port_counters"))
    assert sorted(r.reasons for r in quarantine.collect()) == [["expected 10 fields, found 8"], ["port_matches_file_name"]]


def test_a_poll_twice_is_kept_once_and_a_conflicting_pair_is_quarantined(engine, spark, config, tmp_path):
    """An exact copy of a poll is counted as repeated and not kept; a poll delivered twice with
    other values is quarantined, both rows, with the reason naming the file; the other rows of
    the hour are kept either way (none of it stops the run)."""
    [path] = write_port_hour(tmp_path, HOUR, [(LEAF1, "TwoHundredGigE1/0/1:1")], _constant(0.3), seed=5)
    lines = path.read_text(encoding="utf-8").splitlines()
    n = len(lines) - 1
    fields = lines[60].split(",")
    fields[5] = str(int(fields[5]) + 1)  # InOctets
    path.write_text("\n".join([*lines, lines[50], ",".join(fields)]) + "\n", encoding="utf-8")
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path))}[ports.TABLE]
    assert (stats.rows_read, stats.rows_kept, stats.rows_quarantined, stats.rows_repeated) == (n + 2, n - 1, 2, 1)
    quarantine = spark.read.format("delta").load(config.table_path("quarantine", "zj_port_counters"))
    name = f"trafficinfo/{HOUR}/{path.parent.name}/{path.name}"
    assert sorted(r.reasons for r in quarantine.collect()) == [[
        f"the same poll (switch, port, SaveTimeUTC) delivered 2 times with different values in {name}"]] * 2
    rates = spark.read.format("delta").load(config.table_path("silver", "zj_port_rates"))
    assert rates.count() == n - 1


def test_a_new_hour_is_appended_and_a_rerun_changes_nothing(engine, spark, config, tmp_path):
    chosen = [(LEAF1, "TwoHundredGigE1/0/1:1"), (LEAF1, "TwoHundredGigE1/0/2:1")]
    first = write_port_hour(tmp_path / "a", HOUR, chosen, _constant(0.3), seed=5)
    second = write_port_hour(tmp_path / "b", "2024052401", chosen, _constant(0.3), seed=6)
    rows = [len(p.read_text(encoding="utf-8").splitlines()) - 1 for p in first + second]
    path = config.table_path("bronze", "zj_port_counters")
    run_ingest(engine, config, "zhejiang", str(tmp_path / "a"))
    run_ingest(engine, config, "zhejiang", str(tmp_path / "b"))  # shares no file and no key
    commits = history(engine, path)
    assert [c.operation for c in commits[:2]] == ["WRITE", "WRITE"]  # appends, not MERGEs
    table = spark.read.format("delta").load(path)
    assert table.count() == sum(rows)
    assert table.groupBy("hour_cst").count().orderBy("hour_cst").collect() == [
        (HOUR, sum(rows[:2])), ("2024052401", sum(rows[2:]))]
    before = sorted(table.drop("ingest_ts").collect())
    run_ingest(engine, config, "zhejiang", str(tmp_path / "b"))  # its files are there: MERGE
    assert history(engine, path, 1)[0].version == commits[0].version
    assert sorted(spark.read.format("delta").load(path).drop("ingest_ts").collect()) == before


def test_real_files_rated_in_one_pass_equal_the_window_rates(spark, real_lake):
    """The 350 real files: silver.zj_port_rates as the one pass rated them equals the window
    rates (port_rates, the reference) over the stored counters, row for row."""
    config, _ = real_lake
    stored = spark.read.format("delta").load(config.table_path("silver", "zj_port_rates"))
    counters = spark.read.format("delta").load(config.table_path("bronze", "zj_port_counters"))
    reference = port_rates(counters)
    # compared in the engine by row count and an order-free sum of row hashes (a row-by-row
    # collect of these rows takes minutes); the first rows are compared exactly besides
    assert fingerprint(stored, stored.columns) == fingerprint(reference, stored.columns)
    assert fingerprint(stored, stored.columns)[0] == REAL_ROWS
    first = F.col("save_time_utc") < F.lit("2024-05-23 16:00:05").cast("timestamp")
    assert_same_rows(stored.filter(first), reference.select(*stored.columns).filter(first))
