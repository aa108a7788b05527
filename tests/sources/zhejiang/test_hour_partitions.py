"""The lake grows hour by hour: per-port counters and their rates are partitioned by the CST hour
folder, an ingest replaces exactly its hours, and the rates of an hour continue from the hour
before it as if both had been computed at once."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from helpers import rows, tracelake
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.delta import commit as lake
from tracelake.delta.maintenance import history
from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS
from tracelake.io.staging import Scratch
from tracelake.run import pipeline
from tracelake.run.context import Run
from tracelake.run.derived import publish_derived
from tracelake.run.pipeline import run_ingest
from tracelake.run.settled import RECORD, code_digest
from tracelake.schema import load_schema
from tracelake.sources.zhejiang import ports
from tracelake.sources.zhejiang.clock import shift_hour
from tracelake.sources.zhejiang.ports import parser, rebuild
from tracelake.sources.zhejiang.ports.files import find_port_files
from tracelake.sources.zhejiang.ports.window import port_rates
from tracelake.sources.zhejiang.synth.ports import write_port_hour
from tracelake.sources.zhejiang.transforms.hourly import nic_rates as hourly_nic_rates

HOURS = ("2024052400", "2024052401", "2024052402")
LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825"
CHOSEN = [(LEAF1, "TwoHundredGigE1/0/1:1"), (LEAF1, "TwoHundredGigE1/0/2:1"), (LEAF1, "M-GigabitEthernet0/0/0")]


def _load(level):
    def load(folder, port, t):
        return np.full_like(t, level), np.full_like(t, level / 3)
    return load


def _hour(root: Path, hour: str, seed: int, level: float = 0.3) -> Path:
    write_port_hour(root / hour, hour, CHOSEN, _load(level), seed=seed)
    return root / hour


def _data_lines(raw: Path) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) - 1 for p in raw.rglob("*.csv"))


def _table(spark, config, layer, table):
    return spark.read.format("delta").load(config.table_path(layer, table))


def _by_hour(frame) -> dict[str, list]:
    rows = frame.drop("ingest_ts", "ingest_run_id").collect()
    grouped: dict[str, list] = {}
    for row in rows:
        grouped.setdefault(row.hour_cst, []).append(tuple(row))
    return {h: sorted(r) for h, r in grouped.items()}


@pytest.mark.e2e  # a quarter of a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
@pytest.mark.delta_io
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_reingesting_an_hour_replaces_exactly_that_hour(engine, spark, config, tmp_path):
    raws = [_hour(tmp_path, h, seed=20 + i) for i, h in enumerate(HOURS)]
    for raw in raws:
        run_ingest(engine, config, "zhejiang", str(raw))
    bronze = config.table_path("bronze", "zj_port_counters")
    assert [c.operation for c in history(engine, bronze)[:3]] == ["WRITE", "WRITE", "WRITE"]
    counts = dict(_table(spark, config, "bronze", "zj_port_counters").groupBy("hour_cst").count().collect())
    assert counts == {h: _data_lines(raw) for h, raw in zip(HOURS, raws)}

    before_bronze = _table(spark, config, "bronze", "zj_port_counters").collect()
    before_rates = _by_hour(_table(spark, config, "silver", "zj_port_rates"))
    # hour 2 again, with other content (a changed upstream file) and one bad line
    changed = _hour(tmp_path / "again", HOURS[1], seed=99, level=0.6)
    path = next(changed.rglob("*_1_1.csv"))
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[5] = lines[5].rsplit(",", 3)[0]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    read = _data_lines(changed)
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(changed))}

    counter_stats = stats[ports.TABLE]
    assert counter_stats.partitions == ((HOURS[1],),)
    assert (counter_stats.rows_read, counter_stats.rows_quarantined) == (read, 1)
    assert counter_stats.rows_kept == read - 1
    after = _table(spark, config, "bronze", "zj_port_counters")
    # the other hours' rows are the very rows stored before (lineage included: not rewritten)
    untouched = [r for r in before_bronze if r.hour_cst != HOURS[1]]
    assert sorted(after.filter(F.col("hour_cst") != HOURS[1]).collect()) == sorted(untouched)
    assert after.filter(F.col("hour_cst") == HOURS[1]).count() == read - 1
    quarantine = _table(spark, config, "quarantine", "zj_port_counters")
    assert [(r.hour_cst, r.reasons) for r in quarantine.collect()] == [(HOURS[1], ["expected 10 fields, found 7"])]
    # rates: hour 2 and the hour after it (whose opening rows continue hour 2's changed last
    # rows) were rebuilt; hour 1 was not
    assert stats[ports.RATES_TABLE].partitions == ((HOURS[1],), (HOURS[2],))
    assert _by_hour(_table(spark, config, "silver", "zj_port_rates"))[HOURS[2]] != before_rates[HOURS[2]]
    after_rates = _by_hour(_table(spark, config, "silver", "zj_port_rates"))
    assert after_rates[HOURS[0]] == before_rates[HOURS[0]]
    assert after_rates[HOURS[1]] != before_rates[HOURS[1]]
    # and they equal rates computed over the whole table at once
    whole = port_rates(_table(spark, config, "bronze", "zj_port_counters"))
    assert_same_rows(_table(spark, config, "silver", "zj_port_rates"), whole, ignoreColumnOrder=True)


def _three_hours_of_rates(engine, spark, config, tmp_path, seed: int) -> tuple[dict, str, int]:
    """Three hours ingested one by one: (the rates by hour, the rates table's path, its version)."""
    for i, hour in enumerate(HOURS):
        run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, hour, seed=seed + i)))
    rates_path = config.table_path("silver", "zj_port_rates")
    return _by_hour(_table(spark, config, "silver", "zj_port_rates")), rates_path, history(engine, rates_path, 1)[0].version


@pytest.mark.e2e  # ten seconds or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
def test_a_change_inside_an_hour_leaves_the_next_hours_rates_as_they_were(engine, spark, config, tmp_path):
    """The next hour's rates depend on an hour only through its opening rows: when they come out
    the same, that hour is not rewritten, and the rates still equal a computation over all hours."""
    before, rates_path, version = _three_hours_of_rates(engine, spark, config, tmp_path, seed=30)
    # hour 2 again with the packets of one non-zero sample in its middle doubled: its last rows stay
    again = _hour(tmp_path / "again", HOURS[1], seed=31)
    path = next(again.rglob("*_1_1.csv"))
    lines = path.read_text(encoding="utf-8").splitlines()
    middle = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].split(",")[4] != "0")
    fields = lines[middle].split(",")
    fields[4] = str(int(fields[4]) * 2)  # InPkts
    lines[middle] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(again))}

    assert stats[ports.RATES_TABLE].partitions == ((HOURS[1],),)
    assert history(engine, rates_path, 1)[0].version == version + 1  # one commit: hour 2 only

    def inodes(table: str) -> set[int]:
        uris = DeltaTable(config.table_path(*table.split("."))).file_uris([("hour_cst", "=", HOURS[1])])
        return {Path(u.removeprefix("file://")).stat().st_ino for u in uris}
    assert inodes(ports.RATES_TABLE) & inodes(ports.TABLE)  # the only hour replaced: its rates are its staged files
    after = _by_hour(_table(spark, config, "silver", "zj_port_rates"))
    assert after[HOURS[0]] == before[HOURS[0]] and after[HOURS[2]] == before[HOURS[2]]
    assert after[HOURS[1]] != before[HOURS[1]]
    whole = port_rates(_table(spark, config, "bronze", "zj_port_counters"))
    assert_same_rows(_table(spark, config, "silver", "zj_port_rates"), whole, ignoreColumnOrder=True)


@pytest.mark.e2e  # ten seconds or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
def test_a_changed_hour_end_rewrites_both_hours_in_one_commit_from_staged_pieces(
    engine, spark, config, tmp_path, monkeypatch
):
    """Hour 2 again without its last rows: hour 3's opening rows change, so both hours are
    rewritten, in one commit, each partition staged on its own (no sort of both hours' rows;
    forced here below the size where that starts)."""
    monkeypatch.setattr(lake, "SPLIT_ROWS", 0)
    before, rates_path, version = _three_hours_of_rates(engine, spark, config, tmp_path, seed=50)
    again = _hour(tmp_path / "again", HOURS[1], seed=51)
    for path in again.rglob("*.csv"):
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines[:-20]) + "\n", encoding="utf-8")  # the last ~10 s of every port
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(again))}

    assert stats[ports.RATES_TABLE].partitions == ((HOURS[1],), (HOURS[2],))
    assert history(engine, rates_path, 1)[0].version == version + 1
    after = _by_hour(_table(spark, config, "silver", "zj_port_rates"))
    assert after[HOURS[0]] == before[HOURS[0]]
    assert after[HOURS[1]] != before[HOURS[1]] and after[HOURS[2]] != before[HOURS[2]]
    assert len(after[HOURS[2]]) == len(before[HOURS[2]])
    whole = port_rates(_table(spark, config, "bronze", "zj_port_counters"))
    assert_same_rows(_table(spark, config, "silver", "zj_port_rates"), whole, ignoreColumnOrder=True)


def test_two_hours_apart_reingested_together_continue_from_their_own_hours_before(engine, spark, config, tmp_path):
    """Re-ingesting hours 2 and 5 of six in one run: each continues from its own hour before
    (the carried rows are kept per hour, so hour 1's last rows are not lost to hour 4's)."""
    hours = [f"20240524{h:02d}" for h in range(6)]
    for i, hour in enumerate(hours):
        write_port_hour(tmp_path / "all", hour, CHOSEN[:2], _load(0.2 + 0.05 * i), seed=70 + i)
    run_ingest(engine, config, "zhejiang", str(tmp_path / "all"))
    for i in (1, 4):
        write_port_hour(tmp_path / "again", hours[i], CHOSEN[:2], _load(0.7), seed=90 + i)
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path / "again"))}
    assert stats[ports.TABLE].partitions == ((hours[1],), (hours[4],))
    rates = _table(spark, config, "silver", "zj_port_rates")
    assert_same_rows(rates, port_rates(_table(spark, config, "bronze", "zj_port_counters")), ignoreColumnOrder=True)
    assert rates.filter(F.col("status") == "first").count() == 2  # only the first hour's first rows


@pytest.mark.delta_io
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_rates_across_an_hour_boundary_equal_rates_over_both_hours(engine, spark, config, tmp_path):
    for i, hour in enumerate(HOURS[:2]):
        run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, hour, seed=40 + i)))
    rates = _table(spark, config, "silver", "zj_port_rates")
    whole = port_rates(_table(spark, config, "bronze", "zj_port_counters"))
    assert_same_rows(rates, whole, ignoreColumnOrder=True)
    # the first row of each port in the second hour continues the first hour: no 'first' status
    firsts = rates.filter(F.col("status") == "first").groupBy("hour_cst").count().collect()
    assert firsts == [(HOURS[0], len(CHOSEN))]


def test_an_hours_rates_are_committed_from_their_staged_files_and_equal_the_engines_write(
    engine, spark, config, tmp_path
):
    """On the local profile a one-hour rates rebuild commits the files it staged for the gate
    (staged_commit) instead of writing them again; the `connect` profile keeps the engine's
    write. Both hold the same rows, and emptying the partition works the same way."""
    run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, HOURS[0], seed=8)))
    path = config.table_path("silver", "zj_port_rates")
    counters = _table(spark, config, "bronze", "zj_port_counters")
    assert_same_rows(_table(spark, config, "silver", "zj_port_rates"), port_rates(counters), ignoreColumnOrder=True)
    table = DeltaTable(path)
    added = [json.loads(line)["add"] for line in (Path(path) / "_delta_log" / f"{table.version():020d}.json").open()
             if '"add"' in line]
    assert table.history(1)[0]["operation"] == "WRITE"
    assert added and all(a["path"].startswith(f"hour_cst={HOURS[0]}/") and a["path"].endswith("-staged.parquet")
                         for a in added)
    assert sum(json.loads(a["stats"])["numRecords"] for a in added) == counters.count()

    other = replace(config, lake_root=str(tmp_path / "other"), engine_root="", profile="connect",
                    staging_dir=str(tmp_path / "other" / "_staging"))
    run = Run.new(other)
    rebuilt = port_rates(counters)
    publish_derived(spark, other, run, ports.RATES_TABLE, rebuilt, ((HOURS[0],),))
    engines = other.table_path("silver", "zj_port_rates")
    assert not any(f.endswith("-staged.parquet") for f in DeltaTable(engines).file_uris())
    assert_same_rows(spark.read.format("delta").load(engines), _table(spark, config, "silver", "zj_port_rates"),
                     ignoreColumnOrder=True)  # Sail creates by a frame write: its partition column last

    for cfg in (config, other):  # a partition replaced by no rows is emptied, in one commit
        before = DeltaTable(cfg.table_path("silver", "zj_port_rates")).version()
        publish_derived(spark, cfg, Run.new(cfg), ports.RATES_TABLE, rebuilt.limit(0), ((HOURS[0],),))
        assert DeltaTable(cfg.table_path("silver", "zj_port_rates")).version() == before + 1
        assert _table(spark, cfg, "silver", "zj_port_rates").count() == 0


def test_an_hours_counters_are_committed_from_the_files_its_parse_staged(engine, spark, config, tmp_path):
    """On the local profile a clean hour's bronze partition is the files the one pass staged for
    the gate, linked into the table (no second write of the hour). Those files also hold the
    pass's rates and flags; the table reads exactly its schema's columns, equal to the exact
    parse of the same files with the run's lineage."""
    raw = _hour(tmp_path, HOURS[0], seed=12)
    [stats] = [s for s in run_ingest(engine, config, "zhejiang", str(raw)) if s.table == ports.TABLE]
    path = config.table_path("bronze", "zj_port_counters")
    table = DeltaTable(path)
    added = [json.loads(line)["add"] for line in (Path(path) / "_delta_log" / f"{table.version():020d}.json").open()
             if '"add"' in line]
    assert added and all(a["path"].endswith("-staged.parquet") for a in added)
    stored = _table(spark, config, "bronze", "zj_port_counters")
    schema = load_schema(ports.TABLE)
    assert sorted(stored.columns) == sorted(c.name for c in schema.columns)
    import pyarrow.parquet as pq
    extra = set(pq.read_schema(str(Path(path) / added[0]["path"])).names) - set(stored.columns)
    assert {"status", "in_bytes_per_s", PARSE_ERRORS} <= extra
    exact = parser.PortParser().exact(spark, find_port_files(raw), schema)
    data = [c.name for c in schema.data_columns]
    assert_same_rows(stored.select(*data, "source_file"), exact.select(*data, "source_file"))
    lineage = stored.select("ingest_run_id", "ingest_ts").distinct().collect()
    assert len(lineage) == 1 and lineage[0].ingest_ts is not None
    assert stats.rows_kept == stored.count() == _data_lines(raw)
    runs = _table(spark, config, "ops", "quality_results").select("run_id").distinct().collect()
    assert lineage[0].ingest_run_id in {r.run_id for r in runs}


def test_the_pass_writes_its_kept_rows_itself_and_both_tables_equal_the_engines_staging(
        engine, spark, config, tmp_path, monkeypatch):
    """Where the rows to rate again are staged apart (one hour, the local profile), the pass writes
    every other kept row into the run's sink itself (grouppass), and those files move in among the
    staged files: the engine takes in only the rows set apart. The hour's counters and rates are
    then those files, and equal, row for row, what the engine's own staging of every row gives."""
    from tracelake.run import parsing
    moved: list[tuple[int, int]] = []
    original = parsing.move_files

    def recorded(files, folder, columns):
        import pyarrow.parquet as pq
        names = [p.name for p in files.local().rglob("*.parquet")]
        done = original(files, folder, columns)
        moved.extend((pq.ParquetFile(folder.local() / n).metadata.num_rows, (folder.local() / n).stat().st_ino)
                     for n in names)
        return done
    monkeypatch.setattr(parsing, "move_files", recorded)
    raw = _hour(tmp_path, HOURS[1], seed=63, level=0.9)  # seed 63: the management port's counter wraps
    run_ingest(engine, config, "zhejiang", str(raw))
    lines = _data_lines(raw)
    mgmt = _table(spark, config, "bronze", "zj_port_counters").filter(
        F.col("port_name") == "M-GigabitEthernet0/0/0").count()  # a 32-bit port: its rows are rated again
    assert mgmt and moved and sum(n for n, _ in moved) == lines - mgmt  # every kept row but the port set apart
    counters = {Path(u.removeprefix("file://")).stat().st_ino for u in DeltaTable(config.table_path(
        "bronze", "zj_port_counters")).file_uris()}
    rates = {Path(u.removeprefix("file://")).stat().st_ino for u in DeltaTable(config.table_path(
        "silver", "zj_port_rates")).file_uris()}
    assert {ino for _, ino in moved} <= counters & rates

    monkeypatch.setattr(parser.PortParser, "needs_sink", False)
    engines = replace(config, lake_root=str(tmp_path / "engines"))
    run_ingest(engine, engines, "zhejiang", str(raw))
    for layer, table in (("bronze", "zj_port_counters"), ("silver", "zj_port_rates")):
        ours, theirs = (_table(spark, c, layer, table).drop("ingest_ts", "ingest_run_id") for c in (config, engines))
        assert ours.count() == lines
        assert_same_rows(ours, theirs, ignoreColumnOrder=True)


def test_a_clean_hours_rates_are_the_files_its_counters_were_staged_in(engine, spark, config, tmp_path, monkeypatch):
    """The pass rates each port on from the carried state of the hour before, so an hour's
    silver rows are staged with its counters: silver.zj_port_rates commits the same files as
    bronze.zj_port_counters (one inode, two tables), except for the ports the pass set apart
    (a management port whose 32-bit counters wrapped), whose rows are computed again, from the
    state the pass staged. That state is the one the first hour's own pass left (carry): the
    hour before is not scanned at all. Both hours equal the window over both."""
    scans = []
    original = parser.carried_state
    for module in (parser, rebuild):  # the pass's state and the rates' rebuild each scan through it
        monkeypatch.setattr(module, "carried_state", lambda earlier, firsts=None: scans.append(firsts) or original(earlier, firsts))
    for hour, seed in zip(HOURS[:2], (60, 63)):  # seed 63: the management port's counter wraps in the second hour
        scans.clear()
        run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, hour, seed=seed, level=0.9)))
    assert scans == []  # the second hour's pass and its rates of the wrapped port read the state the first left

    def inodes(table: str) -> dict[int, str]:
        path = Path(config.table_path(*table.split(".")))
        uris = [u.removeprefix("file://") for u in DeltaTable(str(path)).file_uris([("hour_cst", "=", HOURS[1])])]
        return {Path(u).stat().st_ino: u for u in uris}
    counters, rates = inodes(ports.TABLE), inodes(ports.RATES_TABLE)
    shared = set(counters) & set(rates)
    assert shared and all(rates[i].endswith("-staged.parquet") for i in rates)
    bronze = _table(spark, config, "bronze", "zj_port_counters")
    wrapped = bronze.filter((F.col("hour_cst") == HOURS[1]) & (F.col("port_name") == "M-GigabitEthernet0/0/0")
                            & ((F.col("in_octets") < 0) | (F.col("out_octets") < 0) | (F.col("in_pkts") < 0)
                               | (F.col("out_pkts") < 0))).count()
    import pyarrow.parquet as pq
    own = sum(pq.ParquetFile(rates[i]).metadata.num_rows for i in set(rates) - shared)
    mgmt = bronze.filter((F.col("hour_cst") == HOURS[1]) & (F.col("port_name") == "M-GigabitEthernet0/0/0")).count()
    assert wrapped and own == mgmt  # the wrapped port's rows alone were computed again
    stored = _table(spark, config, "silver", "zj_port_rates")
    assert sorted(stored.columns) == sorted(c.name for c in load_schema(ports.RATES_TABLE).columns)
    assert_same_rows(stored, port_rates(bronze), ignoreColumnOrder=True)


def test_the_pass_stages_rows_apart_only_where_silver_can_take_the_other_files(spark, config, tmp_path):
    """Staging by folders (io.staging.FastParse.apart) sorts each task's rows on a Spark cluster:
    the pass asks for it only where the rates can then commit the other folder's files (the
    local profile, one hour), and not without a lake to continue from."""
    from tracelake.sources.zhejiang.ports import filepass
    files = find_port_files(_hour(tmp_path, HOURS[0], seed=5))
    schema = load_schema(ports.TABLE)

    def apart(cfg, chosen=files):
        return parser.PortParser().parse(spark, chosen, schema, lake=cfg, scratch=Scratch(str(tmp_path / "s"))).apart
    two = files + find_port_files(_hour(tmp_path, HOURS[1], seed=6))
    assert [apart(config), apart(replace(config, profile="connect")), apart(config, two), apart(None)] == \
        [filepass.RERATE, None, None, None]


@pytest.mark.delta_io
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_an_identical_rerun_of_an_hour_commits_nothing(engine, spark, config, tmp_path):
    raw = _hour(tmp_path, HOURS[0], seed=7)
    run_ingest(engine, config, "zhejiang", str(raw))
    versions = {t: history(engine, config.table_path(*t.split(".")), 1)[0].version
                for t in ("bronze.zj_port_counters", "silver.zj_port_rates")}
    run_ingest(engine, config, "zhejiang", str(raw))
    assert {t: history(engine, config.table_path(*t.split(".")), 1)[0].version for t in versions} == versions


def test_an_identical_rerun_rebuilds_nothing_unless_a_run_stopped_before_its_rebuilds(
        engine, spark, config, tmp_path, monkeypatch):
    """An hour ingested again as it is changes no row, so nothing derived from it is rebuilt
    (run.settled), unless a run stopped between its commits and its rebuilds: that run's hour is
    rebuilt by the next run of it, though its rows are then unchanged too. A record written by
    other code is not trusted."""
    raws = [_hour(tmp_path, h, seed=40 + i) for i, h in enumerate(HOURS[:2])]
    for raw in raws:
        run_ingest(engine, config, "zhejiang", str(raw))
    record = Path(config.lake_root) / RECORD
    assert json.loads(record.read_text())["tables"] == {ports.TABLE: [[HOURS[0]], [HOURS[1]]]}
    rates_path = config.table_path("silver", "zj_port_rates")
    version = history(engine, rates_path, 1)[0].version

    again = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(raws[0]))}
    assert list(again) == [ports.TABLE] and again[ports.TABLE].unchanged  # no derived table rebuilt
    assert (again[ports.TABLE].rows_read, again[ports.TABLE].rows_kept) == (_data_lines(raws[0]),) * 2
    assert history(engine, rates_path, 1)[0].version == version

    # hour 1 with other content; the run stops after its commits, before its rebuilds
    changed = _hour(tmp_path / "again", HOURS[0], seed=41, level=0.6)
    real = pipeline.rebuild_derived

    def stopped(*args, **kwargs):
        raise TracelakeError("silver.zj_port_rates: disk full")

    monkeypatch.setattr(pipeline, "rebuild_derived", stopped)
    with pytest.raises(TracelakeError, match="disk full"):
        run_ingest(engine, config, "zhejiang", str(changed))
    assert json.loads(record.read_text())["tables"] == {ports.TABLE: [[HOURS[1]]]}  # hour 1 is owed
    assert history(engine, rates_path, 1)[0].version == version  # the rates are behind the counters
    monkeypatch.setattr(pipeline, "rebuild_derived", real)
    rerun = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(changed))}
    assert rerun[ports.TABLE].unchanged and rerun[ports.RATES_TABLE].partitions == ((HOURS[0],), (HOURS[1],))
    whole = port_rates(_table(spark, config, "bronze", "zj_port_counters"))
    assert_same_rows(_table(spark, config, "silver", "zj_port_rates"), whole, ignoreColumnOrder=True)
    assert json.loads(record.read_text())["tables"] == {ports.TABLE: [[HOURS[0]], [HOURS[1]]]}

    # a record of other code: rebuilt (the same rows, so no commit), then trusted again
    record.write_text(json.dumps({**json.loads(record.read_text()), "code": "other"}))
    version = history(engine, rates_path, 1)[0].version
    assert ports.RATES_TABLE in {s.table for s in run_ingest(engine, config, "zhejiang", str(changed))}
    assert history(engine, rates_path, 1)[0].version == version
    assert json.loads(record.read_text())["code"] == code_digest()

    # a derived table deleted by hand: rebuilt, though the record holds the hour
    shutil.rmtree(rates_path)
    assert ports.RATES_TABLE in {s.table for s in run_ingest(engine, config, "zhejiang", str(changed))}
    assert_same_rows(_table(spark, config, "silver", "zj_port_rates"), whole, ignoreColumnOrder=True)


def test_hours_chooses_the_hour_folders_to_ingest(engine, spark, config, tmp_path):
    for i, hour in enumerate(HOURS):
        write_port_hour(tmp_path, hour, CHOSEN[:1], _load(0.2), seed=60 + i)
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path), hours=f"{HOURS[1]}..{HOURS[2]}")}
    assert stats[ports.TABLE].partitions == ((HOURS[1],), (HOURS[2],))
    lines = sum(_data_lines(tmp_path / "trafficinfo" / h) for h in HOURS[1:])
    assert (stats[ports.TABLE].rows_read, stats[ports.TABLE].rows_kept) == (lines, lines)  # one line per table
    # a range is ingested hour after hour (its memory is an hour's): one commit per hour and table
    for table in (ports.TABLE, ports.RATES_TABLE):
        commits = history(engine, config.table_path(*table.split(".")))
        assert [c.operation for c in commits[:2]] == ["WRITE", "WRITE"], table
    hours = _table(spark, config, "bronze", "zj_port_counters").select("hour_cst").distinct().collect()
    assert sorted(r.hour_cst for r in hours) == list(HOURS[1:])
    with pytest.raises(TracelakeError, match="no hour folder 2024052403"):
        run_ingest(engine, config, "zhejiang", str(tmp_path), hours="2024052403")
    with pytest.raises(TracelakeError, match="is not an hour YYYYMMDDHH"):
        run_ingest(engine, config, "zhejiang", str(tmp_path), hours="2024-05-24")
    with pytest.raises(TracelakeError, match="--hours applies to sources with hour folders"):
        run_ingest(engine, config, "itp", str(tmp_path), hours=HOURS[0])


def test_a_bad_hour_after_good_ones_names_both_failures_when_the_derived_rebuild_fails_too(
        engine, config, tmp_path, monkeypatch):
    """The derived tables of the hours before a bad one are rebuilt before its error is raised;
    should that rebuild fail as well, the line still leads with the bad hour and says what was
    not rebuilt, instead of hiding the first failure behind the second."""
    files = write_port_hour(tmp_path, HOURS[0], CHOSEN[:1], _load(0.2), seed=70)
    bad = tmp_path / "trafficinfo" / HOURS[1] / files[0].parent.name / files[0].name
    bad.parent.mkdir(parents=True)
    bad.write_text(files[0].read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    real = pipeline.rebuild_derived

    def failing_once(engine, config, run, derived, changed, step):
        if any(item.table == "silver.zj_task_iterations" for item in derived):  # the once-rebuilt list
            raise TracelakeError("silver.zj_task_iterations: disk full")
        return real(engine, config, run, derived, changed, step)

    monkeypatch.setattr(pipeline, "rebuild_derived", failing_once)
    with pytest.raises(TracelakeError) as raised:
        run_ingest(engine, config, "zhejiang", str(tmp_path), hours=f"{HOURS[0]}..{HOURS[1]}")
    message = str(raised.value)  # exact but for the run id in the middle
    assert message.startswith(f"hour {HOURS[1]}: bronze.zj_port_counters: critical expectation(s) failed: "
                              "table_row_count_to_be_between; nothing was written to bronze.zj_port_counters")
    assert message.endswith(f"({HOURS[0]} ingested before it, the tables derived from them not rebuilt: "
                            "silver.zj_task_iterations: disk full; a re-run of the range redoes only what changed)")


@pytest.mark.e2e
def test_cli_hours_and_maintain_compact_and_vacuum(tmp_path):
    """As a scheduler runs it: one `ingest --hours` per hour and a retry of a changed hour, then
    `maintain --optimize --vacuum`. An hour's commit takes the files its parse staged (one per
    engine task): the retry's replaced files are what the vacuum removes, the compaction brings
    each hour down to one file, and the table that gets an append per run (ops.quality_results)
    down to one file too."""
    from deltalake import DeltaTable

    raw, lake = tmp_path / "raw", tmp_path / "lake"
    for i, hour in enumerate(HOURS):
        write_port_hour(raw, hour, CHOSEN, _load(0.2), seed=80 + i)
    for hour in HOURS:
        done = tracelake("ingest", "zhejiang", "--raw", str(raw), "--hours", hour, "--lake", str(lake))
        assert done.returncode == 0, done.stderr
    path = lake / "bronze" / "zj_port_counters"
    replaced = [f for f in DeltaTable(str(path)).file_uris() if f"/hour_cst={HOURS[0]}/" in f]
    changed = sorted((raw / "trafficinfo" / HOURS[0]).rglob("*.csv"))[0]
    changed.write_text("".join(changed.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
    done = tracelake("ingest", "zhejiang", "--raw", str(raw), "--hours", HOURS[0], "--lake", str(lake))
    assert done.returncode == 0, done.stderr
    table = "bronze.zj_port_counters"
    live = DeltaTable(str(path)).file_uris()
    assert len(live) >= len(HOURS) and not set(replaced) & set(live)
    before = rows(tracelake("maintain", table, "--lake", str(lake)).stdout)
    assert before[0] == ["table", "version", "last_operation", "files_before", "files_after"]
    assert before[1] == [table, "4", "WRITE", str(len(live)), str(len(live))]  # create + 3 hours + the retry
    on_disk = list(path.rglob("*.parquet"))
    assert len(on_disk) == len(live) + len(replaced)  # the retry's replaced files are still there
    done = tracelake("maintain", table, "--optimize", "--vacuum", "--retain-hours", "0", "--lake", str(lake))
    assert done.returncode == 0, done.stderr
    after = rows(done.stdout)[1]
    compacted = len(live) > len(HOURS)  # an OPTIMIZE commit, then VACUUM START and VACUUM END
    assert after == [table, "7" if compacted else "6", "VACUUM END", str(len(live)), str(len(HOURS))]
    on_disk = list(path.rglob("*.parquet"))
    assert len(on_disk) == len(HOURS)  # one file an hour: the vacuum removed every other
    import pyarrow.parquet as pq
    kept = {c.name for c in load_schema(table).columns} - {"hour_cst"}
    several = {h for h in HOURS if sum(f"/hour_cst={h}/" in f for f in live) > 1}
    for f in on_disk:  # an hour of several files is compacted without the pass's columns; a lone file stays as it was
        names = set(pq.read_schema(f).names)
        assert names == kept if f.parent.name.removeprefix("hour_cst=") in several else names > kept | {"status"}
    assert several
    ops = rows(tracelake("maintain", "ops.quality_results", "--optimize", "--lake", str(lake)).stdout)[1]
    assert ops[2] == "OPTIMIZE" and int(ops[3]) >= 4 and ops[4] == "1"  # an append per run, compacted to one
    counts = tracelake("query", f"SELECT hour_cst, count(*) AS n FROM {table} GROUP BY hour_cst ORDER BY hour_cst",
                       "--lake", str(lake))
    assert [r[0] for r in rows(counts.stdout)[1:]] == list(HOURS)
    assert sum(int(r[1]) for r in rows(counts.stdout)[1:]) == _data_lines(raw)


def test_an_hour_with_a_tenth_of_its_rows_bad_reconciles(engine, spark, config, tmp_path):
    """Every tenth data line names another switch than its folder: the quarantine rule
    device_matches_folder sets exactly those aside (evaluated as a column, no row id collected),
    and rows read = kept + quarantined."""
    raw = _hour(tmp_path, HOURS[0], seed=31)
    bad = 0
    for path in sorted(raw.rglob("*.csv")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i in range(1, len(lines), 10):
            lines[i] = lines[i].replace("Leaf-1.GPU.S9825", "Leaf-99.GPU.S9825")
            bad += 1
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    [stats] = [s for s in run_ingest(engine, config, "zhejiang", str(raw)) if s.table == "bronze.zj_port_counters"]
    total = _data_lines(raw)
    assert (stats.rows_read, stats.rows_quarantined, stats.rows_kept) == (total, bad, total - bad)
    quarantine = _table(spark, config, "quarantine", "zj_port_counters")
    reasons = quarantine.groupBy(F.col("reasons").cast("string").alias("r")).count().collect()
    assert [(r.r, r["count"]) for r in reasons] == [("[device_matches_folder]", bad)]
    assert _table(spark, config, "bronze", "zj_port_counters").count() == total - bad
    # rows were set aside, so the staged files are not the table's: the engine wrote the kept rows
    bronze = DeltaTable(config.table_path("bronze", "zj_port_counters")).file_uris()
    assert bronze and not any(f.endswith("-staged.parquet") for f in bronze)
    # each set-aside row keeps its line as delivered (kept only for flagged rows when staged)
    lines = {line for path in raw.rglob("*.csv") for line in path.read_text(encoding="utf-8").splitlines()}
    stored = [r.raw_line for r in quarantine.select("raw_line").collect()]
    assert len(stored) == bad and all("Leaf-99.GPU.S9825" in line and line in lines for line in stored)


@pytest.mark.e2e
def test_the_ninth_hour_of_a_long_task_rejudges_only_the_hours_near_it_and_equals_a_full_build(
        engine, spark, config, tmp_path):
    """A task running through nine hours: the first eight by a full ingest, the ninth by
    `--hours`. gold.zj_iteration_network is rewritten only in the hours whose verdicts the ninth
    hour's evidence can move (within the typical levels' 3 hours of a changed evidence hour);
    the files of the task's earlier hours stay as they were, and the table equals a build over
    all nine hours row for row."""
    from tracelake.run.registry import all_derived, generate

    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.02, seed=4, hours=9, tasks=1)
    hours = sorted(p.name for p in (raw / "trafficinfo").iterdir())
    shutil.move(raw / "trafficinfo" / hours[-1], tmp_path / "aside")
    run_ingest(engine, config, "zhejiang", str(raw))
    path = config.table_path("gold", "zj_iteration_network")

    def files_by_hour() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for add in pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist():
            found.setdefault(add["partition.hour_cst"], set()).add(add["path"])
        return found

    by_hour = files_by_hour()
    assert len(by_hour) >= 9  # one task's iterations through every hour, and the hour before
    shutil.move(tmp_path / "aside", raw / "trafficinfo" / hours[-1])
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(raw), hours=hours[-1])}
    evidence = {hour for _, hour in stats["silver.zj_iteration_counters"].partitions}
    # the hour, and the iterations running into it or within REACH of its edges
    assert evidence == {hours[-2], hours[-1], shift_hour(hours[-1], 1)}
    moved = {hour for _, hour in stats["gold.zj_iteration_network"].partitions}
    assert moved == {shift_hour(hours[-1], d) for d in range(-4, 2)}, sorted(moved)
    after = files_by_hour()
    rewritten = {h for h in by_hour if by_hour[h] != after.get(h)}
    assert {hours[-2], hours[-1]} <= rewritten <= moved  # a partition whose rows come out the same keeps its files
    assert all(by_hour[h] == after[h] for h in by_hour if h not in moved) and len(by_hour) - len(moved) >= 4
    [item] = [d for d in all_derived() if d.table == "gold.zj_iteration_network"]
    full = item.build(spark, config)
    stored = _table(spark, config, "gold", "zj_iteration_network")
    assert stored.count() == full.count() > 1000
    assert_same_rows(stored.select(*full.columns), full, checkRowOrder=False)


@pytest.mark.e2e
def test_an_hourly_ingest_recomputes_only_the_partitions_it_can_move_and_equals_a_full_build(
        engine, spark, config, tmp_path):
    """Tasks, workbook and hour 1 by a full ingest, then hour 2 by `--hours`: gold is rebuilt in
    the (task, hour) partitions whose verdicts hour 2's evidence can move only (within the
    typical levels' 3 hours of a changed evidence hour), and equals a build over both hours."""

    from helpers import ingest_then_next_hour

    from tracelake.api.contract import Derived
    from tracelake.run.registry import all_derived

    hours, stats = ingest_then_next_hour(engine, config, tmp_path, scale=0.05, seed=9, tasks=2)
    raw = tmp_path / "raw"
    assert "bronze.zj_task_log_events" not in stats  # an hourly run reads traffic only
    gold = stats["gold.zj_iteration_network"]
    evidence = stats["silver.zj_iteration_counters"].partitions
    reach = {(task, shift_hour(hour, d)) for task, hour in evidence for d in range(-3, 4)}
    assert gold.partitions is not None and 0 < len(gold.partitions) and set(gold.partitions) <= reach
    [item] = [d for d in all_derived() if d.table == "gold.zj_iteration_network"]
    assert isinstance(item, Derived)
    full = item.build(spark, config)
    stored = _table(spark, config, "gold", "zj_iteration_network")
    assert_same_rows(stored.select(*full.columns), full, checkRowOrder=False)
    # the counter evidence kept per iteration equals one computed from all rates at once, and so
    # does gold computed from the rate rows themselves
    from tracelake.sources.zhejiang.transforms.correlate import (
        iteration_counters,
        iteration_flows,
        iteration_network,
        iteration_port_minutes,
    )

    paths, iterations, rates, minutes, flows, links = (
        _table(spark, config, *name.split(".")) for name in (
            "silver.zj_task_paths", "silver.zj_task_iterations", "silver.zj_port_rates",
            "bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link"))
    counters = _table(spark, config, "silver", "zj_iteration_counters")
    # the evidence is rewritten in the (task, start hour) partitions of the iterations hour 2 can
    # touch: those tasks' partitions of the second hour and of the hours beside it (iterations
    # that run into it or lie within REACH of its edges), never the whole task
    touched = stats["silver.zj_iteration_counters"].partitions
    assert {task for task, _ in touched} == {task for task, _ in gold.partitions}
    assert {hour for _, hour in touched} == {hours[0], hours[1], shift_hour(hours[1], 1)}
    # rounded so that rows computed through other divisions still compare alike
    rounded = lambda f: f.select(*[F.round(c, 6).alias(c) if t == "double" else F.col(c)  # noqa: E731
                                   for c, t in f.dtypes])
    assert_same_rows(rounded(counters), rounded(iteration_counters(paths, iterations, rates).select(*counters.columns)),
                         checkRowOrder=False)
    # so is the per-minute evidence, and gold reads no network table
    for name, whole in (("zj_iteration_port_minutes", iteration_port_minutes(paths, iterations, minutes, flows)),
                        ("zj_iteration_flows", iteration_flows(paths, iterations, flows, links))):
        assert {task for task, _ in stats[f"silver.{name}"].partitions} <= {task for task, _ in gold.partitions}
        kept = _table(spark, config, "silver", name)
        assert kept.count() > 0
        assert_same_rows(rounded(kept), rounded(whole.select(*kept.columns)), checkRowOrder=False)
    assert_same_rows(stored.select(*full.columns),
                         iteration_network(paths, iterations, rates, minutes, flows, links).select(*full.columns),
                         checkRowOrder=False)
    # NIC rates: only hour 2's partition rebuilt, continuing each NIC from its last hour-1 sample
    assert stats["silver.zj_nic_rates"].partitions == ((hours[1],),)
    nic_rates = _table(spark, config, "silver", "zj_nic_rates")
    assert_same_rows(nic_rates, hourly_nic_rates(_table(spark, config, "bronze", "zj_nic")),
                         checkRowOrder=False, ignoreColumnOrder=True)
    nics = _table(spark, config, "bronze", "zj_nic").select("device_name", "port_name").distinct().count()
    crossing = nic_rates.filter((F.col("hour_cst") == hours[1]) & (F.date_format(
        F.from_utc_timestamp("interval_start_ts", "Asia/Shanghai"), "yyyyMMddHH") == hours[0]))
    assert nics > 0 and crossing.count() == nics
    # a lake written before hour_cst (evidence partitioned by task only): the next hourly
    # run builds the table whole in the new layout, with the same rows
    path = config.table_path("silver", "zj_iteration_counters")
    _table(spark, config, "silver", "zj_iteration_counters").drop("hour_cst").write.parquet(
        str(tmp_path / "old_layout"))
    (spark.read.parquet(str(tmp_path / "old_layout")).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
     .partitionBy("task_id").save(path))
    assert DeltaTable(path).metadata().partition_columns == ["task_id"]
    settled = Path(config.lake_root) / RECORD
    settled.unlink()  # that lake's code kept no record of settled hours (run.settled)
    again = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(raw), hours=hours[1])}
    assert again["silver.zj_iteration_counters"].partitions is None  # rebuilt whole
    assert DeltaTable(path).metadata().partition_columns == ["task_id", "hour_cst"]
    assert_same_rows(rounded(_table(spark, config, "silver", "zj_iteration_counters")), rounded(counters),
                         checkRowOrder=False, ignoreColumnOrder=True)  # Sail's re-layout: partition columns last
    # the same hour again commits nothing: the evidence's float sums no longer depend on the order
    # rows arrive in (correlate.exact_sum), so the fingerprints of an identical rebuild match
    derived = ("silver.zj_iteration_counters", "silver.zj_iteration_port_minutes", "silver.zj_iteration_flows",
               "gold.zj_iteration_network", "gold.zj_task_network_summary")
    versions = {t: history(engine, config.table_path(*t.split(".")), 1)[0].version for t in derived}
    settled.unlink()  # rebuilt again, not skipped as settled
    again = {s.table for s in run_ingest(engine, config, "zhejiang", str(raw), hours=hours[1])}
    assert set(derived) <= again
    assert {t: history(engine, config.table_path(*t.split(".")), 1)[0].version for t in derived} == versions


def test_the_hours_an_iteration_touches_do_not_follow_the_processs_time_zone(spark, monkeypatch):
    """A collected timestamp is a naive datetime in the Python process's local zone: read as UTC,
    it moved the evidence rebuild's hours by that zone's offset (a China-local machine: 8 hours)."""
    import time
    from datetime import UTC, datetime

    from tracelake.sources.zhejiang.correlate import _near_changed_hours

    start = datetime(2024, 5, 24, 1, 30, tzinfo=UTC)  # 09:30 CST: hour folder 2024052409
    iterations = spark.createDataFrame([("t1", start, start.replace(minute=31))],
                                       "task_id string, start_ts timestamp, end_ts timestamp")
    found = []
    for zone in ("UTC", "Asia/Shanghai", "America/Los_Angeles"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        _, partitions, hours, first = _near_changed_hours(iterations, {"2024052409"})
        found.append((partitions, sorted(hours), first))
    monkeypatch.undo()
    time.tzset()
    assert found == [([("t1", "2024052409")], ["2024052409"], start)] * 3


def _polls(start_ms: int, count: int, octets: int) -> list[str]:
    """`count` polls of one 400G port, 0.5 s apart from `start_ms`, each counting `octets`."""
    header = "SaveTime,SaveTimeUTC,DeviceName,PortName,InPkts,InOctets,OutPkts,OutOctets,InRatio,OutRatio"
    lines = [header]
    for i in range(count):
        ms = start_ms + 500 * i
        local = datetime.fromtimestamp(ms / 1000, UTC) + timedelta(hours=8)
        text = f"{local:%Y/%m/%d} 星期五 {local:%H:%M:%S}.{ms % 1000:03d}"
        lines.append(f"{text},{ms},{LEAF1.removesuffix('_GPU_S9825')}.GPU.S9825,FourHundredGigE1/0/40,"
                     f"{octets // 1000},{octets},{octets // 1000},{octets},0.1,0.1")
    return lines


def _overlapping_hours(raw: Path, polls: int, copied: range) -> None:
    """Hour 00 ends with `polls` polls of 1 GB, 0.5 s apart; hour 01's folder holds the polls
    `copied` (1-based) again, as a collector's retry delivers them, and 3 polls of its own after
    them."""
    start = 1_716_483_600_000 - 500 * polls  # the last poll 0.5 s before 01:00 CST
    hour0 = _polls(start, polls, 10**9)
    hour1 = [hour0[0], *hour0[copied.start:copied.stop], *_polls(start + 500 * polls, 3, 10**9)[1:]]
    for hour, lines in (("2024052400", hour0), ("2024052401", hour1)):
        path = raw / "trafficinfo" / hour / LEAF1 / "Leaf-1_40.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("order", [("2024052400", "2024052401"), ("2024052401", "2024052400"), (None,)])
@pytest.mark.parametrize(("polls", "copied"), [(10, range(4, 10)), (400, range(100, 400))])
def test_polls_two_hour_folders_both_hold_are_rated_once_in_any_ingest_order(engine, spark, tmp_path, order, polls, copied):
    """However the two hours are ingested (00 then 01, 01 then 00, both at once), each poll that
    hour 01 holds again is `repeated` there and its bytes are counted once: hour 00 rates every
    poll after its first, hour 01 its 3 own, each over its 0.5 s. The overlap is 2.5 s, or 150 s
    (far longer than the 10 s an hour's opening rows reach)."""
    from conftest import make_config

    _overlapping_hours(tmp_path / "raw", polls, copied)
    config = make_config(tmp_path / "lake")
    for hours in order:
        run_ingest(engine, config, "zhejiang", str(tmp_path / "raw"), hours=hours)
    rates = _table(spark, config, "silver", "zj_port_rates")
    statuses = rates.groupBy("hour_cst", "status").agg(
        F.count(F.lit(1)).alias("n"), F.sum(F.col("in_bytes_per_s") * F.col("interval_s")).alias("bytes"))
    assert sorted((r.hour_cst, r.status, r.n, round(r.bytes or 0)) for r in statuses.collect()) == [
        ("2024052400", "first", 1, 0), ("2024052400", "update", polls - 1, (polls - 1) * 10**9),
        ("2024052401", "repeated", len(copied), 0), ("2024052401", "update", 3, 3 * 10**9)]
    intervals = rates.filter(F.col("status") == "update").select("interval_s").distinct().collect()
    assert [r.interval_s for r in intervals] == [0.5]
