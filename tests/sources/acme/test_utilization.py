"""AcmeTrace utilization: wide DCGM/Prometheus CSVs and IPMI power files -> long bronze rows.

The invariant, at the cell level: every non-empty cell read is one row, kept or quarantined;
duplicate Time rows leave one kept row per (cluster, metric, ts, node, gpu, ib device) and the
rest in quarantine as 'duplicate Time row'; empty cells are no sample and give no row.
References are computed here in plain Python from the files.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pytest
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS, STAGED_RAW_LINE, STAGED_RAW_VALUES
from tracelake.io.staging import FastParse, Scratch, parse_path
from tracelake.io.text import RawFile
from tracelake.quality.gate import load_suite
from tracelake.quality.split import staged_form
from tracelake.run.parsing import settle_parse
from tracelake.run.pipeline import run_ingest
from tracelake.schema import load_schema
from tracelake.sources.acme import unpivot, utilization, widepass
from tracelake.sources.acme.synth import utilization as generate_util
from tracelake.sources.acme.utilization import parse_column_name, plan

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "utilization"
UTIL, POWER = "bronze.acme_utilization", "bronze.acme_power"
UTIL_KEYS = ["cluster", "metric", "ts", "node_ip", "gpu_index", "ib_device"]
GOOD_UTIL = "cluster string, metric string, ts timestamp, node_ip string, gpu_index int, " \
            "ib_device string, value double, unit string, source_file string"
BAD = "source_file string, raw_line string, raw_values_json string, reasons array<string>"


def _t(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def _staged(spark, parser, files, staging: Path, table: str):
    """A parse as an ingest stages it (run.parsing.settle_parse with the bronze step's projection:
    raw text kept for the rows set aside only); the one pass falls back as in an ingest. The
    pass's own columns (its rows' kinds, series and lines, its proof of a rule) are left out, to
    compare rows."""
    schema = load_schema(table)
    return settle_parse(spark, parser, files, schema, parse_path(staging, table),
                        lambda frame, proven, clean=False: staged_form(frame, schema, {}, False, proven, clean),
                        scratch=Scratch(str(staging)), suite={"expectations": []}).rows.drop(
        widepass.KIND, widepass.SERIES, widepass.FILE, widepass.LINE, widepass.ASIDE, widepass.NOT_IPV4,
        widepass.OFF_SHAPE)


def _given(frame):
    """A parser that hands over `frame` (a parse made already)."""
    return lambda spark, files, schema: frame


def _parse(spark, raw_dir: Path, table: str, folders: pytest.TempPathFactory):
    """The plan's parser (for utilization the one pass with its exact fallbacks), staged in a
    folder of the run's own (outside the raw folder, and removed with pytest's old runs)."""
    staging = folders.mktemp("acme-parse")
    [item] = [i for i in plan(raw_dir, staging) if i.table == table]
    return _staged(spark, item.parser, item.files, staging, table)


def _good(frame, columns: list[str]):
    return frame.filter(F.size(PARSE_ERRORS) == 0).select(*columns)


def _bad(frame):
    return frame.filter(F.size(PARSE_ERRORS) > 0).select(
        "source_file", F.col(STAGED_RAW_LINE).alias("raw_line"), F.col(STAGED_RAW_VALUES).alias("raw_values_json"),
        F.col(PARSE_ERRORS).alias("reasons"))


def reference_cells(raw_dir: Path) -> dict:
    """Plain-Python counts from the files: cells (non-empty values; every position of a line with
    the wrong field count) and distinct (file series, Time, column) keys, per table."""
    util_cells, util_keys, power_cells, power_keys = 0, set(), 0, set()
    for path in sorted((raw_dir / "utilization").rglob("*.csv")):
        with open(path, encoding="utf-8", newline="") as fh:
            rows = csv.reader(fh)
            header = next(rows)
            for row in rows:
                if path.parent.name == "ipmi":
                    for name, value in zip(header[2:], row[2:]):
                        if value:
                            power_cells += 1
                            power_keys.add((path.name, row[0], row[1], name))
                    continue
                if len(row) != len(header):  # malformed: every header position is a cell
                    util_cells += len(header) - 1
                    continue
                metric = re.sub(r"-\d{4}-\d{2}$", "", path.stem)
                for name, value in zip(header[1:], row[1:]):
                    if value:
                        util_cells += 1
                        util_keys.add((path.parent.name, metric, row[0], name))
    return {UTIL: (util_cells, len(util_keys)), POWER: (power_cells, len(power_keys))}


# ------------------------------------------------------------------ planning, no engine

@pytest.mark.portable
def test_plan_finds_metric_and_ipmi_files_in_the_release_layout():
    util, power = plan(FIXTURE, FIXTURE / "_staging")
    assert util.table == UTIL and power.table == POWER
    assert [(f.name, f.constants["cluster"], f.constants["metric"], f.constants["month"]) for f in util.files] == [
        ("utilization/kalos/NODE_CPU_UTILIZATION.csv", "kalos", "NODE_CPU_UTILIZATION", None),
        ("utilization/kalos/NODE_IB_SEND.csv", "kalos", "NODE_IB_SEND", None),
        ("utilization/seren/GPU_UTIL-2023-07.csv", "seren", "GPU_UTIL", "2023-07"),
        ("utilization/seren/GPU_UTIL-2023-08.csv", "seren", "GPU_UTIL", "2023-08"),
        ("utilization/seren/NODE_MEMORY_UTILIZATION.csv", "seren", "NODE_MEMORY_UTILIZATION", None),
    ]
    assert [(f.name, f.constants) for f in power.files] == [
        ("utilization/ipmi/GPU_AB_Power.csv", {"cluster": "seren", "kind": "GPU_AB", "unit": "W"})]


@pytest.mark.portable
def test_plan_without_utilization_files_is_empty_and_misplaced_files_are_errors(tmp_path):
    assert plan(tmp_path, tmp_path / "_staging") == []
    (tmp_path / "utilization" / "util_pkl").mkdir(parents=True)
    (tmp_path / "utilization" / "util_pkl" / "x.pkl").write_bytes(b"")
    assert plan(tmp_path, tmp_path / "_staging") == []  # the release's pickles are ignored
    (tmp_path / "utilization" / "philly").mkdir()
    (tmp_path / "utilization" / "philly" / "GPU_UTIL.csv").write_text("Time\n")
    with pytest.raises(TracelakeError, match="unknown utilization folder"):
        plan(tmp_path, tmp_path / "_staging")
    shutil.rmtree(tmp_path / "utilization" / "philly")
    (tmp_path / "utilization" / "seren").mkdir()
    (tmp_path / "utilization" / "seren" / "GPU UTIL.csv").write_text("Time\n")
    with pytest.raises(TracelakeError, match="<METRIC>.csv or <METRIC>-<YYYY>-<MM>.csv"):
        plan(tmp_path, tmp_path / "_staging")


@pytest.mark.portable
def test_column_names_give_node_gpu_and_ib_device():
    assert parse_column_name("10.140.0.131") == ("10.140.0.131", None, None, None)
    assert parse_column_name("10.140.0.131-7") == ("10.140.0.131", 7, None, None)
    assert parse_column_name("10.140.0.131-mlx5_0") == ("10.140.0.131", None, "mlx5_0", None)
    assert parse_column_name("10.140.0.131.1") == ("10.140.0.131.1", None, None, None)  # bad window
    assert parse_column_name("bad name")[3] == "column 'bad name' is not <node>[-<gpu>][-<ib device>]"


# ------------------------------------------------------------------ parser, portable

@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_hand_written_fixture_gives_exact_rows_and_reasons(spark, tmp_path_factory):
    parsed = _parse(spark, FIXTURE, UTIL, tmp_path_factory)
    good = spark.createDataFrame([
        ("seren", "NODE_MEMORY_UTILIZATION", _t(2023, 7, 19, 0), "10.140.0.1", None, None, 0.4, "ratio", "NODE_MEMORY_UTILIZATION.csv"),
        ("seren", "NODE_MEMORY_UTILIZATION", _t(2023, 7, 19, 5), "10.140.0.1.1", None, None, 0.41, "ratio", "NODE_MEMORY_UTILIZATION.csv"),
        ("seren", "NODE_MEMORY_UTILIZATION", _t(2023, 7, 19, 7), "10.140.0.1", None, None, 0.42, "ratio", "NODE_MEMORY_UTILIZATION.csv"),
        ("seren", "GPU_UTIL", _t(2023, 7, 31, 23, 59, 30), "10.140.0.1", 0, None, 10.0, "percent", "GPU_UTIL-2023-07.csv"),
        ("seren", "GPU_UTIL", _t(2023, 7, 31, 23, 59, 30), "10.140.0.1", 1, None, 20.0, "percent", "GPU_UTIL-2023-07.csv"),
        ("seren", "GPU_UTIL", _t(2023, 7, 31, 23, 59, 30), "10.140.0.2", 0, None, 30.0, "percent", "GPU_UTIL-2023-07.csv"),
        ("seren", "GPU_UTIL", _t(2023, 7, 31, 23, 59, 45), "10.140.0.1", 0, None, 11.0, "percent", "GPU_UTIL-2023-07.csv"),
        # empty in July's copy of this row, so August's value is the only sample: kept
        ("seren", "GPU_UTIL", _t(2023, 7, 31, 23, 59, 45), "10.140.0.1", 1, None, 21.0, "percent", "GPU_UTIL-2023-08.csv"),
        ("seren", "GPU_UTIL", _t(2023, 7, 31, 23, 59, 45), "10.140.0.2", 0, None, 31.0, "percent", "GPU_UTIL-2023-07.csv"),
        ("seren", "GPU_UTIL", _t(2023, 8, 1, 0), "10.140.0.1", 0, None, 12.0, "percent", "GPU_UTIL-2023-08.csv"),
        ("seren", "GPU_UTIL", _t(2023, 8, 1, 0), "10.140.0.2", 0, None, 32.0, "percent", "GPU_UTIL-2023-08.csv"),
        ("kalos", "NODE_CPU_UTILIZATION", _t(2023, 8, 1, 0), "10.150.0.1", None, None, 0.5, "ratio", "NODE_CPU_UTILIZATION.csv"),
        ("kalos", "NODE_CPU_UTILIZATION", _t(2023, 8, 1, 0), "10.150.0.2", None, None, 2.39, "ratio", "NODE_CPU_UTILIZATION.csv"),
        ("kalos", "NODE_IB_SEND", _t(2023, 8, 1, 0), "10.150.0.1", None, "mlx5_0", 1.5e9, "B/s", "NODE_IB_SEND.csv"),
        ("kalos", "NODE_IB_SEND", _t(2023, 8, 1, 0), "10.150.0.2", None, "mlx5_0", 2000.0, "B/s", "NODE_IB_SEND.csv"),
    ], GOOD_UTIL)
    good = good.withColumn("source_file", F.concat(
        F.lit("utilization/"), F.col("cluster"), F.lit("/"), F.col("source_file")))
    assert_same_rows(_good(parsed, good.columns), good)

    seren, kalos = "utilization/seren/", "utilization/kalos/"
    time_error = "Time: 'yesterday' is not epoch seconds or a yyyy-MM-dd HH:mm:ss[XXX] time"
    bad_column = "column 'bad name' is not <node>[-<gpu>][-<ib device>]"
    bad = spark.createDataFrame([
        (f"{seren}GPU_UTIL-2023-08.csv", None, '{"Time":"1690847985","10.140.0.1-0":"11"}', ["duplicate Time row"]),
        (f"{seren}GPU_UTIL-2023-08.csv", None, '{"Time":"1690847985","10.140.0.2-0":"99"}',
         ["duplicate Time row with a different value (kept '31')"]),
        (f"{seren}GPU_UTIL-2023-08.csv", None, '{"Time":"1690848000","10.140.0.1-1":"n/a"}', ["value: 'n/a' is not a number"]),
        (f"{seren}NODE_MEMORY_UTILIZATION.csv", None, '{"Time":"yesterday","10.140.0.1":"0.5"}', [time_error]),
        (f"{seren}NODE_MEMORY_UTILIZATION.csv", None, '{"Time":"yesterday","10.140.0.1.1":"0.6"}', [time_error]),
        (f"{kalos}NODE_IB_SEND.csv", None, '{"Time":"1690848000","10.150.0.1-mlx5_0":"1500000000"}', ["duplicate Time row"]),
        (f"{kalos}NODE_IB_SEND.csv", None, '{"Time":"1690848000","10.150.0.2-mlx5_0":"2000"}', ["duplicate Time row"]),
        (f"{kalos}NODE_IB_SEND.csv", None, '{"Time":"1690848000","bad name":"7"}', [bad_column]),
        (f"{kalos}NODE_IB_SEND.csv", None, '{"Time":"1690848000","bad name":"7"}', [bad_column]),
        # a short line: every header position is set aside with the whole line
        (f"{kalos}NODE_CPU_UTILIZATION.csv", "1690848015,0.6", '{"Time":"1690848015","10.150.0.1":"0.6"}',
         ["expected 3 fields, found 2"]),
        (f"{kalos}NODE_CPU_UTILIZATION.csv", "1690848015,0.6", '{"Time":"1690848015","10.150.0.2":null}',
         ["expected 3 fields, found 2"]),
    ], BAD)
    assert_same_rows(_bad(parsed), bad)
    # cells read = kept + quarantined, against the files read in plain Python
    cells, distinct = reference_cells(FIXTURE)[UTIL]
    assert (parsed.count(), cells) == (26, 26)
    # one kept row per key; of the 19 distinct (file series, Time, column) keys, 'n/a', the two
    # 'yesterday' cells and the 'bad name' column are set aside for their own reasons
    assert _good(parsed, UTIL_KEYS).distinct().count() == 15 == distinct - 4


@pytest.mark.portable
def test_ipmi_rows_become_readings_and_type_b_has_no_mem_power(spark, tmp_path_factory):
    parsed = _parse(spark, FIXTURE, POWER, tmp_path_factory)
    cols = "cluster string, kind string, ts timestamp, node string, component string, value double, unit string"
    at0, at15 = _t(2023, 7, 19, 0), _t(2023, 7, 19, 0, 0, 15)  # naive times are Asia/Shanghai
    expected = spark.createDataFrame([
        ("seren", "GPU_AB", at0, "10.140.0.1", "CPU_Power", 350.0, "W"),
        ("seren", "GPU_AB", at0, "10.140.0.1", "MEM_Power", 120.0, "W"),
        ("seren", "GPU_AB", at0, "10.140.0.1", "Sys_Total_Power", 4200.0, "W"),
        ("seren", "GPU_AB", at0, "10.140.0.2", "CPU_Power", 340.0, "W"),          # type B: no MEM_Power
        ("seren", "GPU_AB", at0, "10.140.0.2", "Sys_Total_Power", 4100.0, "W"),
        ("seren", "GPU_AB", at15, "10.140.0.1", "MEM_Power", 121.0, "W"),
        ("seren", "GPU_AB", at15, "10.140.0.1", "Sys_Total_Power", 4210.0, "W"),
    ], cols)
    assert_same_rows(_good(parsed, expected.columns), expected)
    ipmi = "utilization/ipmi/GPU_AB_Power.csv"
    bad = spark.createDataFrame([
        (ipmi, None, '{"Time":"2023-07-19 08:00:00","IP":"10.140.0.2","CPU_Power":"340"}', ["duplicate Time row"]),
        (ipmi, None, '{"Time":"2023-07-19 08:00:00","IP":"10.140.0.2","Sys_Total_Power":"4100"}', ["duplicate Time row"]),
        (ipmi, None, '{"Time":"2023-07-19 08:00:15","IP":"10.140.0.1","CPU_Power":"x"}', ["value: 'x' is not a number"]),
    ], BAD)
    assert_same_rows(_bad(parsed), bad)
    # 10 readings, 8 distinct keys: one is a duplicate pair, one is 'x'
    assert (parsed.count(), reference_cells(FIXTURE)[POWER]) == (10, (10, 8))


@pytest.mark.portable
def test_gzipped_files_and_iso_times_parse_the_same(spark, tmp_path, tmp_path_factory):
    folder = tmp_path / "utilization" / "seren"
    folder.mkdir(parents=True)
    with gzip.open(folder / "GPU_UTIL.csv.gz", "wt") as fh:
        fh.write("Time,10.0.0.1-0\r\n1690848000,5\r\n2023-08-01 08:00:15+08:00,6\r\n1690848030.0,7\r\n")
    got = _good(_parse(spark, tmp_path, UTIL, tmp_path_factory), ["ts", "value", "source_file"])
    name = "utilization/seren/GPU_UTIL.csv.gz"
    expected = spark.createDataFrame(
        [(_t(2023, 8, 1, 0), 5.0, name), (_t(2023, 8, 1, 0, 0, 15), 6.0, name), (_t(2023, 8, 1, 0, 0, 30), 7.0, name)],
        "ts timestamp, value double, source_file string")
    assert_same_rows(got, expected)


@pytest.fixture(scope="module")
def month(tmp_path_factory) -> Path:
    """A generated month, 2023-07-15..08-15, split into monthly files with repeated Time rows."""
    out = tmp_path_factory.mktemp("acme-util-month")
    generate_util.generate(out, 0.5, 7)
    return out


@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_generated_month_keeps_one_row_per_distinct_cell(spark, month, tmp_path_factory):
    manifest = json.loads((month / "utilization" / "manifest.json").read_text())
    cells, distinct = reference_cells(month)[UTIL]
    assert (cells, distinct) == (49_498, 48_979)
    meta = manifest[UTIL]
    assert (meta["cells"], meta["distinct_cells"], meta["duplicate_cells"]) == (cells, distinct, cells - distinct)
    assert sorted({p.name for p in (month / "utilization" / "seren").iterdir()})[:3] == [
        "FB_USED-2023-07.csv", "FB_USED-2023-08.csv", "GPU_UTIL-2023-07.csv"]

    parsed = _parse(spark, month, UTIL, tmp_path_factory)
    good = _good(parsed, UTIL_KEYS)
    reasons = parsed.filter(F.size(PARSE_ERRORS) > 0).groupBy(F.col(PARSE_ERRORS)[0].alias("r")).count()
    assert parsed.count() == cells
    assert good.count() == good.distinct().count() == distinct
    assert [tuple(r) for r in reasons.collect()] == [("duplicate Time row", cells - distinct)]


@pytest.mark.portable
@pytest.mark.slow_on_classic
@pytest.mark.parametrize("inline_keys", [unpivot.MAX_INLINE_KEYS, pytest.param(0, marks=pytest.mark.e2e)],
                         ids=["in-list", "joined-keys"])
def test_parse_staged_one_file_at_a_time_equals_the_one_plan_parse(spark, month, tmp_path, tmp_path_factory,
                                                                   monkeypatch, inline_keys):
    """A large input is exploded one group of files at a time and its duplicates ranked in parts
    (utilization.unpivot_files): same rows, reasons and lineage as the plan's parse (for
    utilization the one pass, whose exact parts are single plans here), duplicates across the
    monthly files included."""
    one_plan = {t: _parse(spark, month, t, tmp_path_factory) for t in (UTIL, POWER)}
    monkeypatch.setattr(utilization, "GROUP_BYTES", 1)  # every file a group, staged
    monkeypatch.setattr(utilization, "RANK_ROWS", 100)  # the duplicates ranked in several parts
    monkeypatch.setattr(unpivot, "MAX_INLINE_KEYS", inline_keys)  # 0: the repeated keys are joined
    exact = {UTIL: utilization.parse_utilization, POWER: utilization.parse_power}  # the ingest's utilization parser is the one pass
    for item in plan(month, tmp_path):
        staged = exact[item.table](spark, item.files, load_schema(item.table), staging=tmp_path)
        assert_same_rows(_staged(spark, _given(staged), [], tmp_path / "settled", item.table), one_plan[item.table])
    assert len(list(tmp_path.glob("acme-cells-*/cells"))) == 2  # both tables went the staged way
    assert len(list(tmp_path.glob("acme-cells-*/ranked"))) == 2  # both have duplicates to rank


@pytest.mark.portable
def test_generator_is_deterministic_and_scales(tmp_path, month):
    again = tmp_path / "again"
    generate_util.generate(again, 0.5, 7)
    for path in sorted((month / "utilization").rglob("*.*")):
        assert (again / path.relative_to(month)).read_bytes() == path.read_bytes(), path.name
    assert generate_util.sizes(0.5) == (2, 7200) and generate_util.sizes(1) == (4, 3600)
    assert generate_util.sizes(35) == (140, 105)


# ------------------------------------------------------------------ the one pass against the exact parse

def _pass_and_exact(spark, raw_dir: Path, tmp_path: Path):
    [item] = [i for i in plan(raw_dir, tmp_path / "pass") if i.table == UTIL]
    schema = load_schema(UTIL)
    assert isinstance(item.parser.parse(spark, item.files, schema, scratch=Scratch(str(tmp_path / "pass"))), FastParse)
    exact = utilization.parse_utilization(spark, item.files, schema)
    return (_staged(spark, item.parser, item.files, tmp_path / "pass", UTIL),
            _staged(spark, _given(exact), [], tmp_path / "exact", UTIL))


@pytest.mark.e2e  # ten seconds or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
@pytest.mark.portable
@pytest.mark.slow_on_classic
def test_one_pass_equals_the_exact_parse_row_for_row(spark, month, tmp_path):
    """Generated month: every file read by the pass; the repeated Time rows, within a file and
    across the monthly files, taken from the exact parse of those lines alone."""
    fast, exact = _pass_and_exact(spark, month, tmp_path)
    assert_same_rows(fast, exact)
    cells, distinct = reference_cells(month)[UTIL]
    assert (fast.count(), fast.filter(F.size(PARSE_ERRORS) == 0).count()) == (cells, distinct)
    assert list(tmp_path.glob("pass/acme-raw-*/ranked"))  # the repeated lines went the exact way
    assert not list(tmp_path.glob("pass/acme-cells-*"))  # and no file was parsed exactly whole


@pytest.mark.e2e  # ten seconds or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
@pytest.mark.portable
@pytest.mark.slow_on_classic
def test_one_pass_sends_a_series_with_a_bad_cell_to_the_exact_parse(spark, month, tmp_path):
    """A non-finite cell and a short line in one monthly file: that metric's files are parsed
    line by line (reasons as before); every other file still goes through the pass."""
    raw = tmp_path / "raw"
    shutil.copytree(month / "utilization", raw / "utilization")
    path = raw / "utilization" / "seren" / "GPU_UTIL-2023-08.csv"
    lines = path.read_text().splitlines()
    fields = lines[5].split(",")
    fields[1] = "inf"
    lines[5] = ",".join(fields)
    lines[9] = lines[9].rsplit(",", 1)[0]
    path.write_text("\n".join(lines) + "\n")
    fast, exact = _pass_and_exact(spark, raw, tmp_path)
    assert_same_rows(fast, exact)
    reasons = {r[0] for r in fast.filter(F.size(PARSE_ERRORS) > 0).select(F.col(PARSE_ERRORS)[0]).collect()}
    assert {"duplicate Time row", "value: 'inf' is not a finite number",
            f"expected {len(fields)} fields, found {len(fields) - 1}"} <= reasons
    assert len(list(tmp_path.glob("pass/acme-cells-*"))) == 0  # one group: the exact parse in one plan
    marked = [r for r in widepass.one_file(_file_row(path, month)) if r.column(widepass.KIND)[0].as_py() == widepass.MARKER]
    assert len(marked) == 1


def _file_row(path: Path, month: Path, dictionary: bool = False) -> dict:
    """widepass's input row for one generated file (utilization.pass_rows)."""
    header = utilization.read_header(str(path), path.name)
    raw = RawFile(str(path), path.name, {"cluster": "seren", "metric": "GPU_UTIL", "month": "2023-08", "unit": "percent"})
    entry = {"time_pos": header.names.index("Time"), "n_cols": len(header.names), "series_id": 0, "file_id": 0, "id_pos": -1}
    [row] = utilization.pass_rows([raw], [entry], [utilization.utilization_header_rows(0, raw, header)], dictionary)
    return dict(zip(widepass.FILE_COLUMNS, row))


@pytest.mark.portable
def test_wide_pass_reads_a_file_in_blocks_as_the_exact_cells(month, monkeypatch):
    """widepass alone, no engine: blocks of a few lines give the same cells as one block, the
    lines of a repeated Time handed over whole (never cut by a block's end) and no marker for a
    good file; strings as dictionaries or decoded alike."""
    path = month / "utilization" / "seren" / "GPU_UTIL-2023-07.csv"
    whole = pa.concat_tables([t.cast(widepass.OUTPUT) for t in widepass.one_file(_file_row(path, month, True))])
    monkeypatch.setattr(widepass, "BLOCK_BYTES", 1024)
    blocks = list(widepass.one_file(_file_row(path, month)))
    assert len(blocks) > 10
    both = pa.concat_tables(blocks)
    assert widepass.MARKER not in both.column(widepass.KIND).to_pylist()
    lines = path.read_text().splitlines()[1:]
    times = [line.split(",")[0] for line in lines]
    repeated = [line for line in lines if times.count(line.split(",")[0]) > 1]
    assert len(repeated) >= 2
    for table in (whole, both):
        handed = table.filter(pa.compute.equal(table.column(widepass.KIND), widepass.RAW))
        assert sorted(handed.column(widepass.LINE).to_pylist()) == sorted(repeated)
    key = ["ts", "node_ip", "gpu_index", "value"]
    cells = [t.filter(pa.compute.equal(t.column(widepass.KIND), widepass.CELL)).select(key) for t in (whole, both)]
    assert sorted(cells[0].to_pylist(), key=str) == sorted(cells[1].to_pylist(), key=str)
    written = sum(1 for line in lines if line not in repeated for v in line.split(",")[1:] if v)
    assert cells[0].num_rows == written


@pytest.mark.portable
def test_wide_pass_hands_over_the_lines_where_another_file_has_times_too(month, tmp_path):
    """The July and August files of a metric share a stretch of Times: each file's lines in it
    are handed over whole, the rest unpivoted; a file whose Times go back is a marker."""
    folder = month / "utilization" / "seren"
    files = [RawFile(str(folder / f"GPU_UTIL-2023-0{m}.csv"), f"GPU_UTIL-2023-0{m}.csv",
                     {"cluster": "seren", "metric": "GPU_UTIL", "month": f"2023-0{m}", "unit": "percent"}) for m in (7, 8)]
    entries, per_file = [], []
    for i, raw in enumerate(files):
        header = utilization.read_header(raw.path, raw.name)
        entries.append({"time_pos": 0, "n_cols": len(header.names), "series_id": 0, "file_id": i, "id_pos": -1})
        per_file.append(utilization.utilization_header_rows(i, raw, header))
    spans, overlaps = utilization.time_spans(files, entries)
    july, august = ([int(line.split(",")[0]) for line in Path(f.path).read_text().splitlines()[1:]] for f in files)
    assert spans == [[july[0], july[-1]], [august[0], august[-1]]]
    assert overlaps == [[[august[0], july[-1]]], [[august[0], july[-1]]]]
    rows = {r[1]: dict(zip(widepass.FILE_COLUMNS, r)) for r in utilization.pass_rows(files, entries, per_file, False)}
    shared = set(july) & set(august)
    for name, times in (("GPU_UTIL-2023-07.csv", july), ("GPU_UTIL-2023-08.csv", august)):
        out = pa.concat_tables(widepass.one_file(rows[name]))
        handed = out.filter(pa.compute.equal(out.column(widepass.KIND), widepass.RAW))
        expected = [t for t in times if t in shared or times.count(t) > 1]
        assert sorted(int(line.split(",")[0]) for line in handed.column(widepass.LINE).to_pylist()) == sorted(expected)
    out_of_order = {**rows["GPU_UTIL-2023-07.csv"], "span_json": None, "overlaps_json": "[]"}
    text = Path(files[0].path).read_text().splitlines()
    bad = tmp_path / "out_of_order.csv"
    bad.write_text("\n".join([text[0], text[3], text[1], *text[4:]]) + "\n")
    kinds = pa.concat_tables(widepass.one_file({**out_of_order, "path": str(bad)})).column(widepass.KIND).to_pylist()
    assert kinds[-1] == widepass.MARKER


@pytest.mark.portable
def test_wide_pass_reads_gzip_and_marks_what_it_cannot_take(month, tmp_path):
    """A .gz file gives the rows of the plain one; a cell 'nan', a Time with a fraction, a
    quoted value or a trailing comma each make the file a single marker after what it yielded."""
    path = month / "utilization" / "seren" / "GPU_UTIL-2023-07.csv"
    packed = tmp_path / "GPU_UTIL-2023-07.csv.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))

    def rows(p: Path) -> list:
        return sorted(pa.concat_tables(widepass.one_file({**_file_row(path, month), "path": str(p)})).to_pylist(), key=str)
    assert rows(packed) == rows(path)
    lines = path.read_text().splitlines()
    for spoil in (lambda f: f[:1] + ["nan"] + f[2:], lambda f: [f[0] + ".5"] + f[1:],
                  lambda f: f[:1] + ['"1"'] + f[2:], lambda f: [*f, ""]):
        bad = tmp_path / "bad.csv"
        bad.write_text("\n".join([*lines[:3], ",".join(spoil(lines[3].split(","))), *lines[4:]]) + "\n")
        kinds = [t.column(widepass.KIND).to_pylist() for t in widepass.one_file({**_file_row(path, month), "path": str(bad)})]
        assert kinds[-1] == [widepass.MARKER] and widepass.MARKER not in sum(kinds[:-1], [])


def _rule(ident: str) -> dict:
    [rule] = [e for e in load_suite(UTIL)["expectations"] if e["meta"].get("id") == ident]
    return rule


def _gpu_util_renamed(month: Path, rename) -> tuple[list[str], list[str]]:
    """(the month's July GPU_UTIL lines, its header names with the first value column renamed by `rename`)."""
    lines = (month / "utilization" / "seren" / "GPU_UTIL-2023-07.csv").read_text().splitlines()
    names = lines[0].split(",")
    first = next(i for i, n in enumerate(names) if n != "Time")
    names[first] = rename(names[first])
    return lines, names


@pytest.mark.portable
def test_the_pass_marks_the_cells_node_ip_is_ipv4_would_return(month, tmp_path):
    """widepass proves node_ip_is_ipv4 (meta.proven_by): its column is true on the cells of a
    column named as no IPv4 address, exactly those the rule's query returns, and the pattern is
    the rule's; in a file of IPv4 columns only it is null."""
    rule = _rule("node_ip_is_ipv4")
    assert rule["kwargs"]["unexpected_rows_query"] == (
        f"SELECT * FROM {{batch}} WHERE NOT node_ip RLIKE '^{widepass.IPV4.pattern}$'")
    assert rule["meta"]["proven_by"] == {"parser": "acme.utilization", "column": widepass.NOT_IPV4}
    # '<IP>.1-<gpu>', as the release's bad window
    lines, names = _gpu_util_renamed(month, lambda name: name.replace("-", ".1-", 1))
    bad = names.index(next(n for n in names if n != "Time"))
    path = tmp_path / "GPU_UTIL-2023-07.csv"
    path.write_text("\n".join([",".join(names), *lines[1:6]]) + "\n")
    cells = pa.concat_tables(t.cast(widepass.OUTPUT) for t in widepass.one_file(_file_row(path, month))).to_pylist()
    flagged = {c["node_ip"] for c in cells if c[widepass.NOT_IPV4]}
    assert flagged == {names[bad].split("-")[0]} and len(flagged.pop().split(".")) == 5
    assert sum(c[widepass.NOT_IPV4] for c in cells) == sum(c["node_ip"].count(".") == 4 for c in cells) == 5
    assert not any(c[widepass.NOT_IPV4] for c in cells if c["node_ip"].count(".") == 3)
    # a file whose every column names an IPv4 address: null, no true row, next to nothing to write
    path.write_text("\n".join(lines[:6]) + "\n")
    clean = pa.concat_tables(t.cast(widepass.OUTPUT) for t in widepass.one_file(_file_row(path, month)))
    assert clean.num_rows == len(cells) and clean.column(widepass.NOT_IPV4).null_count == len(cells)


@pytest.mark.portable
def test_the_pass_marks_the_cells_metric_known_and_shaped_would_return(month, tmp_path):
    """widepass proves metric_known_and_shaped: its column is true on a GPU metric's column with no
    GPU index, on a node metric's column with one, and on every cell of a metric with no unit;
    the rule's GPU family is widepass's; in a file where no cell is, it is null."""
    rule = _rule("metric_known_and_shaped")
    family = ", ".join(f"'{m}'" for m in widepass.GPU_METRICS)
    assert rule["kwargs"]["unexpected_rows_query"] == (
        f"SELECT * FROM {{batch}} WHERE unit IS NULL OR (gpu_index IS NULL) = (metric IN ({family}))")
    assert rule["meta"]["proven_by"] == {"parser": "acme.utilization", "column": widepass.OFF_SHAPE}
    # '<IP>': a GPU metric's column without its GPU
    lines, names = _gpu_util_renamed(month, lambda name: name.split("-")[0])
    path = tmp_path / "GPU_UTIL-2023-07.csv"
    path.write_text("\n".join([",".join(names), *lines[1:6]]) + "\n")

    def flags(row):
        cells = pa.concat_tables(t.cast(widepass.OUTPUT) for t in widepass.one_file(row)).to_pylist()
        return cells, [c[widepass.OFF_SHAPE] for c in cells]

    cells, marked = flags(_file_row(path, month))
    assert marked.count(True) == sum(c["gpu_index"] is None for c in cells) == 5
    assert set(marked) == {True, False}
    cells, marked = flags({**_file_row(path, month), "unit": None})  # a metric tracelake has no unit for
    assert marked == [True] * len(cells)
    cells, marked = flags({**_file_row(path, month), "metric": "NODE_CPU_UTILIZATION"})  # a node metric
    assert marked.count(False) == 5 and marked.count(True) == len(cells) - 5
    path.write_text("\n".join(lines[:6]) + "\n")
    cells, marked = flags(_file_row(path, month))
    assert cells and marked == [None] * len(cells)


# ------------------------------------------------------------------ ingest with Delta

def _table(spark, config, layer, table):
    return spark.read.format("delta").load(config.table_path(layer, table))


def _warnings(spark, config, table):
    results = _table(spark, config, "ops", "quality_results").filter(
        (F.col("table_name") == table) & (F.col("severity") == "warning"))
    return {r.expectation_id: r.unexpected_count for r in results.collect()}


def _counting_queries(monkeypatch) -> dict[str, int]:
    """rule -> the rows its query read, filled as the gate runs its queries."""
    from tracelake.quality import gate

    read: dict[str, int] = {}
    query = gate._query_rows
    monkeypatch.setattr(gate, "_query_rows", lambda df, ident, sql: read.setdefault(ident, df.count()) is None
                        or query(df, ident, sql))
    return read


def _recorded(spark, config, ident: str) -> list[tuple]:
    """(success, unexpected, element count) of each result the run recorded for utilization's rule `ident`."""
    results = _table(spark, config, "ops", "quality_results").filter(
        (F.col("table_name") == UTIL) & (F.col("expectation_id") == ident)).collect()
    return [(r.success, r.unexpected_count, r.element_count) for r in results]


def test_fixture_ingest_flags_the_bad_window_and_cpu_above_100pct(engine, spark, config):
    stats = {s.table: s for s in run_ingest(engine, config, "acme", str(FIXTURE))}
    util, power = stats[UTIL], stats[POWER]
    assert (util.rows_read, util.rows_kept, util.rows_quarantined) == (26, 15, 11)
    assert (power.rows_read, power.rows_kept, power.rows_quarantined) == (10, 7, 3)
    assert _table(spark, config, "bronze", "acme_utilization").count() == 15
    assert _table(spark, config, "quarantine", "acme_utilization").count() == 11
    assert _warnings(spark, config, UTIL) == {
        "node_memory_bad_window": 1, "node_ip_is_ipv4": 1, "cpu_utilization_above_100pct": 1,
        "value_outside_metric_range": 0, "metric_known_and_shaped": 0, "ts_in_release_period": 0}
    assert _warnings(spark, config, POWER) == {
        "power_positive": 0, "sys_total_power_plausible": 0, "node_is_ipv4": 0, "ts_in_release_period": 0}

    before = sorted(_table(spark, config, "bronze", "acme_utilization").collect())
    run_ingest(engine, config, "acme", str(FIXTURE))  # identical inputs: nothing changes
    assert sorted(_table(spark, config, "bronze", "acme_utilization").collect()) == before


def test_a_clean_input_clears_node_ip_is_ipv4_from_the_pass_files_without_its_query(
        engine, spark, config, month, monkeypatch):
    """The files the pass wrote say no cell's node is other than an IPv4 address: the rule is
    recorded as passed with no rows (the figures its query gives) without running its query,
    which reads every cell's node."""
    raw = Path(config.lake_root).parent / "clean"
    (raw / "utilization" / "seren").mkdir(parents=True)
    shutil.copy(month / "utilization" / "seren" / "GPU_UTIL-2023-07.csv", raw / "utilization" / "seren")
    read = _counting_queries(monkeypatch)
    stats = {s.table: s for s in run_ingest(engine, config, "acme", str(raw))}
    kept = stats[UTIL].rows_kept
    assert kept > 1000 and stats[UTIL].rows_quarantined > 0  # repeated Times: cells the exact parse ranks
    assert _recorded(spark, config, "node_ip_is_ipv4") == [(True, 0, kept)]
    assert _recorded(spark, config, "metric_known_and_shaped") == [(True, 0, kept)]
    if config.profile == "local":  # the pass writes its files itself: the query reads the exactly parsed cells only
        assert 0 < read["node_ip_is_ipv4"] < kept / 10
        assert 0 < read["metric_known_and_shaped"] < kept / 10


def test_metric_known_and_shaped_counts_a_bare_gpu_column_and_a_metric_without_unit(engine, spark, config, month,
                                                                                     monkeypatch):
    """The rule proven by the pass still counts what its query over the whole table counts: the
    cells of a GPU_UTIL column named without its GPU, and every cell of a metric tracelake has no
    unit for; its query reads those files' cells, not the clean file's."""
    raw = Path(config.lake_root).parent / "off-shape"
    seren = raw / "utilization" / "seren"
    seren.mkdir(parents=True)
    shutil.copy(month / "utilization" / "seren" / "NODE_MEMORY_UTILIZATION-2023-07.csv", seren)
    lines, names = _gpu_util_renamed(month, lambda name: name.split("-")[0])
    (seren / "GPU_UTIL-2023-07.csv").write_text("\n".join([",".join(names), *lines[1:40]]) + "\n")
    (seren / "FAN_SPEED-2023-07.csv").write_text("\n".join(lines[:20]) + "\n")
    read = _counting_queries(monkeypatch)
    kept = {s.table: s for s in run_ingest(engine, config, "acme", str(raw))}[UTIL].rows_kept
    table = _table(spark, config, "bronze", "acme_utilization")
    table.createOrReplaceTempView("acme_off_shape")
    off = spark.sql(_rule("metric_known_and_shaped")["kwargs"]["unexpected_rows_query"].replace(
        "{batch}", "acme_off_shape")).count()
    spark.catalog.dropTempView("acme_off_shape")
    fan = table.filter(F.col("metric") == "FAN_SPEED")
    bare_cells = table.filter((F.col("metric") == "GPU_UTIL") & F.col("gpu_index").isNull()).count()
    assert (fan.count(), fan.filter(F.col("unit").isNull()).count()) == (19 * (len(names) - 1), 19 * (len(names) - 1))
    assert bare_cells == 39 and off == fan.count() + bare_cells
    assert _recorded(spark, config, "metric_known_and_shaped") == [(False, off, kept)]
    if config.profile == "local":  # one sink file per raw file: the NODE_MEMORY file's is left unread
        memory = table.filter(F.col("metric") == "NODE_MEMORY_UTILIZATION").count()
        assert kept - memory <= read["metric_known_and_shaped"] < kept - memory + memory / 10


def test_node_ip_is_ipv4_reads_only_the_file_with_a_bad_window_column(engine, spark, config, month, monkeypatch):
    """One file whose header has a '<IP>.1' column no longer makes the rule's query read every
    cell of the run: it reads that file's cells and the exactly parsed ones, and counts what the
    query over the whole table counts."""
    raw = Path(config.lake_root).parent / "one-bad"
    (raw / "utilization" / "seren").mkdir(parents=True)
    for name in ("GPU_UTIL-2023-07.csv", "NODE_MEMORY_UTILIZATION-2023-07.csv"):
        shutil.copy(month / "utilization" / "seren" / name, raw / "utilization" / "seren")
    read = _counting_queries(monkeypatch)
    kept = {s.table: s for s in run_ingest(engine, config, "acme", str(raw))}[UTIL].rows_kept
    table = _table(spark, config, "bronze", "acme_utilization")
    bad = table.filter(~F.col("node_ip").rlike(f"^{widepass.IPV4.pattern}$")).count()
    assert _recorded(spark, config, "node_ip_is_ipv4") == [(False, 2, kept)]
    assert bad == 2 and table.count() == kept
    if config.profile == "local":  # one sink file per raw file: the GPU_UTIL file's is left unread
        memory = table.filter(F.col("metric") == "NODE_MEMORY_UTILIZATION").count()
        assert memory <= read["node_ip_is_ipv4"] < memory + (kept - memory) / 10

def test_generated_month_ingest_counts_match_the_files(engine, spark, config, month):
    stats = {s.table: s for s in run_ingest(engine, config, "acme", str(month))}
    cells, distinct = reference_cells(month)[UTIL]
    util = stats[UTIL]
    assert (util.rows_read, util.rows_kept, util.rows_quarantined) == (cells, distinct, cells - distinct)
    table = _table(spark, config, "bronze", "acme_utilization")
    assert table.count() == distinct
    assert table.groupBy(*UTIL_KEYS).count().filter(F.col("count") > 1).count() == 0
    quarantine = _table(spark, config, "quarantine", "acme_utilization")
    assert quarantine.filter(F.col("reasons") == F.array(F.lit("duplicate Time row"))).count() == cells - distinct

    window = (F.col("ts") >= _t(2023, 7, 19, 3, 35)) & (F.col("ts") <= _t(2023, 7, 19, 6, 1))
    in_window = table.filter((F.col("metric") == "NODE_MEMORY_UTILIZATION") & window)
    cpu_over = table.filter((F.col("metric") == "NODE_CPU_UTILIZATION") & (F.col("value") > 1))
    assert {r.cluster for r in cpu_over.select("cluster").distinct().collect()} == {"kalos"}
    warnings = _warnings(spark, config, UTIL)
    assert (warnings["node_memory_bad_window"], in_window.count()) == (6, 6)
    wrong_names = in_window.filter(F.size(F.split("node_ip", "[.]")) == 5)  # '<IP>.1' columns
    assert warnings["node_ip_is_ipv4"] == wrong_names.count() == 2
    assert warnings["cpu_utilization_above_100pct"] == cpu_over.count() == 16

    if config.profile == "local":  # the table's files are the ones the pass wrote, added as they lie
        _assert_files_are_the_pass_own(config, month, distinct)

    power_cells, power_distinct = reference_cells(month)[POWER]
    power = stats[POWER]
    assert (power.rows_read, power.rows_kept) == (power_cells, power_distinct)
    manifest = json.loads((month / "utilization" / "manifest.json").read_text())[POWER]["files"]
    readings = _table(spark, config, "bronze", "acme_power")
    mem = readings.filter(F.col("component") == "MEM_Power").groupBy("kind").count()
    assert {r.kind: r["count"] for r in mem.collect()} == {
        k.split("/")[1]: v["mem_power_cells"] for k, v in manifest.items()}


def _assert_files_are_the_pass_own(config, month: Path, distinct: int) -> None:
    """One data file per metric file the pass read, its statistics one metric (a reader skips the
    others), plus the few exactly parsed cells beside them; the log's row counts add up to the
    table's rows."""
    from deltalake import DeltaTable

    log = DeltaTable(config.table_path("bronze", "acme_utilization"))
    adds = pa.table(log.get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == distinct
    own = [a for a in adds if a["min.metric"] == a["max.metric"]]  # a file per metric file
    metric_files = [p for p in (month / "utilization").glob("*/*.csv") if p.parent.name in ("seren", "kalos")]
    assert len(metric_files) - 1 <= len(own) <= len(metric_files)  # a file of bad-window columns only may go exactly
    assert all(a["null_count.value"] == 0 and a["min.ts"] < a["max.ts"] for a in own)
    assert sum(a["num_records"] for a in own) > 0.95 * distinct  # the exactly parsed cells: the rest
