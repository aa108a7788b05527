"""The one pass (filepass) against the window rates it replaces on the ingest path
(ports/window.port_rates, kept as the reference): row for row, on random series built to
hit every status, across an hour boundary with the carried state, and on real files."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.api.contract import limits_proven_by
from tracelake.io.frames import arrow_ddl
from tracelake.io.parse import EXACT, EXACT_REASON, PARSE_ERRORS, REPEATED, VERDICT
from tracelake.sources.zhejiang.layout import MGMT_PORT
from tracelake.sources.zhejiang.ports import RATES_TABLE, filepass, grouppass
from tracelake.sources.zhejiang.ports.parser import PortParser
from tracelake.sources.zhejiang.ports.rules import STATUSES
from tracelake.sources.zhejiang.ports.window import (
    carried_state,
    first_instants,
    port_rates,
    rates_from_pass,
    rates_of,
)

MAX_UTIL = limits_proven_by(RATES_TABLE, PortParser.name)["max_util"]  # the suite's, as the pass reads it
DEVICE = "NH-DC-NM129-B03-ROCE-Leaf-1.GPU.S9825"
PORTS = (MGMT_PORT, "TwoHundredGigE1/0/3:1", "FourHundredGigE1/0/40")
SILVER = ["hour_cst", "device_name", "port_name", "save_time_utc", "status", "interval_start_utc", "interval_s", "dt_s",
          "in_pkts", "in_octets", "out_pkts", "out_octets", "counter_wrapped", "line_rate_bps", "in_bytes_per_s",
          "out_bytes_per_s", "in_util", "out_util"]
COUNTERS = ("in_pkts", "in_octets", "out_pkts", "out_octets")


def _seeds(count: int) -> list:
    """Seed 0 on every profile; the rest, each up to half a minute on classic Spark, in its `bash dev e2e` set."""
    return [seed if seed < 1 else pytest.param(seed, marks=pytest.mark.slow_on_classic) for seed in range(count)]


def _series(rng: np.random.Generator, start_ms: int, n: int, port: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """Polls about every 0.5 s with short and long gaps, zero stretches of every length, negative
    counts, and a few rates above line rate. No instant twice in one hour: the window orders such
    a tie arbitrarily, and the bronze gate refuses it (re-delivered polls across hours are the
    boundary test's)."""
    steps = rng.choice([500, 499, 501, 1000, 3000, 5000, 5001, 8000], size=n,
                       p=[0.53, 0.1, 0.1, 0.1, 0.05, 0.04, 0.04, 0.04])
    ms = start_ms + np.cumsum(steps)
    zero = rng.random(n) < 0.45
    counts = [np.where(zero, 0, rng.integers(1, 50_000_000_000 if port != MGMT_PORT else 90_000, n)) for _ in COUNTERS]
    flip = rng.random(n) < 0.02
    counts[1] = np.where(flip, -counts[1] - 1, counts[1])
    return ms.astype(np.int64), [c.astype(np.int64) for c in counts]


def _rows(hour: str, port: str, ms: np.ndarray, counts: list[np.ndarray]) -> list[tuple]:
    return [(hour, DEVICE, port, int(t), *[int(c[i]) for c in counts]) for i, t in enumerate(ms)]


def _frame(spark, rows: list[tuple]):
    frame = spark.createDataFrame(rows, "hour_cst string, device_name string, port_name string, ms bigint, "
                                        + ", ".join(f"{c} bigint" for c in COUNTERS))
    return frame.select("hour_cst", "device_name", "port_name", F.timestamp_millis("ms").alias("save_time_utc"),
                        *COUNTERS)


def _last_poll_twice(path) -> None:
    """The file's last poll delivered once more: an exact copy, counted as repeated and not kept."""
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, lines[-1]]) + "\n", encoding="utf-8")


def _a_line_for_the_exact_parse(path) -> None:
    """A line that is no poll appended: the pass leaves the file to the exact parse."""
    path.write_text(path.read_text(encoding="utf-8") + "not,a,poll\n", encoding="utf-8")


def _pass_rows(spark, hour: str, series: dict[str, tuple[np.ndarray, list[np.ndarray]]], state: dict | None = None):
    """The rows as the one pass stages them: counters plus its rate columns (standalone, or
    continuing from `state`: filepass.state_of the hour before)."""
    tables = []
    for port, (ms, counts) in series.items():
        raw = pa.table({"SaveTime": ["x"] * len(ms), "SaveTimeUTC": ms, "DeviceName": [DEVICE] * len(ms),
                        "PortName": [port] * len(ms), **{k: c for k, c in zip(filepass.COUNTERS, counts)},
                        "InRatio": np.zeros(len(ms)), "OutRatio": np.zeros(len(ms))})
        tables.append(filepass.rated_rows(raw, {"hour_cst": hour, "folder_device_name": DEVICE, "file_port_name": port,
                                                "source_file": port}, (state or {}).get((DEVICE, port)), MAX_UTIL))
    table = pa.concat_tables(tables).cast(filepass.OUTPUT)
    ddl = arrow_ddl(table.schema)
    return spark.createDataFrame(table.to_pylist(), ddl)  # Python rows: a null stays null on every profile


@pytest.mark.portable
@pytest.mark.parametrize("seed", _seeds(4))
def test_the_pass_rates_an_hour_alone_as_the_window_does(spark, seed):
    rng = np.random.default_rng(seed)
    series = {port: _series(rng, 1_716_480_000_000, 400, port) for port in PORTS}
    got = _pass_rows(spark, "2024052400", series)
    expected = port_rates(_frame(spark, [r for p, (ms, c) in series.items() for r in _rows("2024052400", p, ms, c)]))
    statuses = {r[0] for r in expected.select("status").distinct().collect()}
    assert statuses >= {"first", "gap", "update", "no_new_data", "idle", "over_line_rate", "negative_counter"}
    assert_same_rows(
        got.select("hour_cst", "device_name", "port_name", "save_time_utc", "status", "interval_start_utc",
                   "interval_s", "dt_s", "in_bytes_per_s", "out_bytes_per_s", "in_util", "out_util"),
        expected.select("hour_cst", "device_name", "port_name", "save_time_utc", "status", "interval_start_utc",
                        "interval_s", "dt_s", "in_bytes_per_s", "out_bytes_per_s", "in_util", "out_util"))


@pytest.mark.portable
@pytest.mark.parametrize("seed", _seeds(6))
def test_the_hour_after_continues_from_the_carried_state_as_the_window_does(spark, seed):
    """The hour before ends with zeros, a gap or an overlap of re-delivered polls; the pass's
    rates with their opening prefix computed again equal the window over both hours."""
    rng = np.random.default_rng(100 + seed)
    before, after = {}, {}
    for port in PORTS:
        ms0, c0 = _series(rng, 1_716_480_000_000, 300, port)
        if seed % 3 == 0:  # the next hour starts with re-delivered polls of the last seconds
            start = int(ms0[-8])
        elif seed % 3 == 1:  # right after, within the carry window
            start = int(ms0[-1]) + 700
        else:  # after a gap
            start = int(ms0[-1]) + 9_000
        ms1, c1 = _series(rng, start, 300, port)
        if seed % 2:  # the next hour opens with zeros: the carry reaches back into the hour before
            for c in c1:
                c[:12] = 0
        before[port], after[port] = (ms0, c0), (ms1, c1)
    earlier = _frame(spark, [r for p, (ms, c) in before.items() for r in _rows("2024052400", p, ms, c)])
    later_rows = _pass_rows(spark, "2024052401", after)
    got = rates_from_pass(later_rows, carried_state(earlier), "2024052401")
    later = _frame(spark, [r for p, (ms, c) in after.items() for r in _rows("2024052401", p, ms, c)])
    expected = rates_of(later, carried_state(earlier), ["2024052401"])
    assert_same_rows(got.select(*SILVER), expected.select(*SILVER))
    if seed % 3:  # without re-delivered polls the carried state stands for the whole hour before (with
        # them it holds too few rows to find every copy's twin, today as before the one pass)
        whole = port_rates(earlier.unionByName(later)).filter(F.col("hour_cst") == "2024052401")
        assert_same_rows(got.select(*SILVER), whole.select(*SILVER))


def _hours_around(rng: np.random.Generator, seed: int) -> tuple[dict, dict]:
    """Two hours of every port: the second starts with re-delivered polls of the first's last
    seconds (seed % 3 == 0), right after it, or after a gap, and may open with zeros."""
    before, after = {}, {}
    for port in PORTS:
        ms0, c0 = _series(rng, 1_716_480_000_000, 300, port)
        start = int(ms0[-8]) if seed % 3 == 0 else int(ms0[-1]) + (700 if seed % 3 == 1 else 9_000)
        ms1, c1 = _series(rng, start, 300, port)
        if seed % 2:
            for c in c1:
                c[:12] = 0
        before[port], after[port] = (ms0, c0), (ms1, c1)
    return before, after


@pytest.mark.portable
@pytest.mark.parametrize("seed", _seeds(6))
def test_the_pass_rates_on_from_the_carried_state_as_the_window_does_or_sets_the_file_apart(spark, seed):
    """Given the carried state of the hour before (filepass.state_of of carried_state's rows),
    the pass rates a port's file as the window rates both hours, and marks it RERATE only when
    it cannot: its polls overlap the hour before, or it is the management port and its 32-bit
    counters wrapped (silver's counts differ from the delivered ones)."""
    rng = np.random.default_rng(200 + seed)
    before, after = _hours_around(rng, seed)
    earlier = _frame(spark, [r for p, (ms, c) in before.items() for r in _rows("2024052400", p, ms, c)])
    carried = carried_state(earlier).select("device_name", "port_name", F.unix_millis("save_time_utc"), "in_pkts")
    state = filepass.state_of([tuple(r) for r in carried.collect()])
    assert sorted(state) == [(DEVICE, p) for p in sorted(PORTS)] and all(len(v[0]) in (2, 3) for v in state.values())
    got = _pass_rows(spark, "2024052401", after, state)
    apart = {r[0] for r in got.filter(F.col(filepass.RERATE)).select("port_name").distinct().collect()}
    overlapping = {p for p in PORTS if after[p][0][0] <= before[p][0][-1]}
    assert apart == overlapping | {MGMT_PORT}  # _series wraps the management port's counts
    assert len(overlapping) == (0 if seed % 3 else {0: 2, 3: 3}[seed])
    later = _frame(spark, [r for p, (ms, c) in after.items() for r in _rows("2024052401", p, ms, c)])
    whole = port_rates(earlier.unionByName(later)).filter(F.col("hour_cst") == "2024052401")
    kept = [p for p in PORTS if p not in apart]
    columns = [c for c in SILVER if c not in COUNTERS]  # a kept file's counts are silver's too: no wrap
    assert_same_rows(got.filter(F.col("port_name").isin(kept)).select(*SILVER),
                         whole.filter(F.col("port_name").isin(kept)).select(*SILVER))
    again = rates_from_pass(got.filter(F.col(filepass.RERATE)), carried_state(earlier, first_instants(
        later, {"2024052401": "2024052400"})), "2024052401")
    expected = rates_of(later, carried_state(earlier, first_instants(later, {"2024052401": "2024052400"})),
                        ["2024052401"]).filter(F.col("port_name").isin(sorted(apart)))
    assert_same_rows(again.select(*columns, *COUNTERS), expected.select(*columns, *COUNTERS))


@pytest.mark.portable
def test_files_the_pass_did_not_rate_are_rated_by_the_window(spark):
    """Rows of a file parsed line by line carry no pass rates: their port is rated whole."""
    rng = np.random.default_rng(7)
    series = {port: _series(rng, 1_716_480_000_000, 200, port) for port in PORTS}
    passed = _pass_rows(spark, "2024052400", series)
    unrated = passed.withColumn("status", F.when(F.col("port_name") != MGMT_PORT, F.col("status")))
    state = _frame(spark, [("2024052323", DEVICE, p, 1_716_479_999_000, 5, 5, 5, 5) for p in PORTS])
    got = rates_from_pass(unrated, carried_state(state), "2024052400")
    expected = rates_of(_frame(spark, [r for p, (ms, c) in series.items() for r in _rows("2024052400", p, ms, c)]),
                        carried_state(state), ["2024052400"])
    assert_same_rows(got.select(*SILVER), expected.select(*SILVER))


# the rules the pass checks on every row it yields: recorded without their queries when it finds nothing
PROVEN = ("port_sample_unique", "save_time_matches_utc", "samples_in_hour_folder")


def test_the_key_rule_is_the_pass_own_check_with_the_figures_its_query_gives(engine, config, tmp_path, monkeypatch):
    """port_sample_unique, a group-by of the hour, is settled by the pass's per-file check when
    every file took the pass and none repeats an instant, save_time_matches_utc (a cast of
    every row's text) by its byte check and samples_in_hour_folder (another group-by) by a
    compare of each row's instant with its hour: all recorded with the figures their queries give,
    without running them; an exact copy of a poll is counted as repeated in the pass and the
    kept rows still need no query."""
    from tracelake.quality import gate
    from tracelake.run.pipeline import run_ingest
    from tracelake.sources.zhejiang.synth.ports import write_port_hour

    asked: list[str] = []
    real_query = gate._query_rows
    queried_rows: dict[str, int] = {}

    def query(df, ident, query):
        asked.append(ident)
        queried_rows[ident] = df.count()
        return real_query(df, ident, query)
    monkeypatch.setattr(gate, "_query_rows", query)
    scans: list[str] = []  # the map rules' scan, asked for bronze.zj_port_counters' name rules
    real_in_domain = gate.in_domain
    monkeypatch.setattr(gate, "in_domain", lambda exp: scans.append(exp["meta"]["id"]) or real_in_domain(exp))
    chosen = [("NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825", p) for p in PORTS]
    files = write_port_hour(tmp_path / "raw", "2024052400", chosen,
                            lambda folder, port, t: (np.full_like(t, 0.2), np.full_like(t, 0.1)), seed=5)
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path / "raw"))}
    rows = stats["bronze.zj_port_counters"].rows_read
    assert [r for r in PROVEN if r in asked] == [] and "counter_wrapped" in asked
    ops = engine.spark.read.format("delta").load(config.table_path("ops", "quality_results"))
    for rule in PROVEN:
        key = ops.filter(F.col("expectation_id") == rule).select(
            "success", "element_count", "unexpected_count", "unexpected_percent", "observed_value").collect()
        assert [tuple(r) for r in key] == [(True, rows, 0, 0.0, "0")]
    # the name rules the pass proved: their figures are the rows counted, with no scan of the gate's
    for rule in ("port_matches_file_name", "device_matches_folder"):
        proven = ops.filter(F.col("expectation_id") == rule).select(
            "success", "element_count", "unexpected_count", "unexpected_percent").collect()
        assert [tuple(r) for r in proven] == [(True, rows, 0, 0.0)]
    assert scans == []
    # silver's rows are the pass's files as they lie: its row count comes from their footers,
    # and its critical rule from the pass's own check (queried over the rows rated again only)
    has_rows = ops.filter((F.col("table_name") == "silver.zj_port_rates") & (F.col("expectation_id") == "has_rows"))
    assert [tuple(r) for r in has_rows.select("success", "observed_value").collect()] == [(True, str(rows))]
    bounds = ops.filter(F.col("expectation_id") == "rates_within_line_rate").select(
        "success", "element_count", "unexpected_count", "unexpected_percent", "observed_value").collect()
    assert [tuple(r) for r in bounds] == [(True, rows, 0, 0.0, "0")]
    assert queried_rows.get("rates_within_line_rate", 0) < rows

    _last_poll_twice(files[0])
    asked.clear()
    again = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path / "raw"))}["bronze.zj_port_counters"]
    assert (again.rows_read, again.rows_kept, again.rows_quarantined, again.rows_repeated) == (rows + 1, rows, 0, 1)
    assert "port_sample_unique" not in asked  # the copy is set apart in the pass: the kept rows hold the key
    assert "save_time_matches_utc" not in asked and "samples_in_hour_folder" not in asked
    latest = engine.spark.read.format("delta").load(config.table_path("ops", "quality_results")).filter(
        F.col("expectation_id") == "repeated_rows").select("severity", "element_count", "unexpected_count").collect()
    assert [tuple(r) for r in latest] == [("warning", rows + 1, 1)]


def test_the_save_time_check_leaves_unproven_every_row_the_rule_would_count(spark):
    """filepass.save_time_unproven against the suite's own query of save_time_matches_utc, on the
    same rows: the rows the query returns are exactly the ones shown off, and the rows of a file
    whose SaveTime has another layout are all unproven (the query then runs for them)."""
    from tracelake.quality.gate import load_suite

    at = 1716480001005  # 2024/05/24 00:00:01.005 in China
    texts = {  # SaveTime text -> (unproven by the check, returned by the query)
        "2024/05/24 星期五 00:00:01.005": (False, False),
        "2024/05/24 星期六 00:00:01.005": (False, False),  # the rule skips the weekday
        "2024/05/24 星期五 00:00:01.006": (True, True),
        "2024/05/24 星期五 00:00:02.005": (True, True),
        "2024/05/25 星期五 00:00:01.005": (True, True),
        "2024/05/24 星期五 24:00:01.005": (True, True),
        "2024/02/30 星期五 00:00:01.005": (True, True),
        "2024/05/24 星期五 00:00:01.0a5": (True, True),
        "2024-05-24 星期五 00:00:01.005": (True, False),  # the rule reads it anyway: the check is stricter
    }
    same_layout = list(texts)
    got = filepass.save_time_unproven(pa.array(same_layout), np.full(len(same_layout), at, np.int64))
    assert got.tolist() == [unproven for unproven, _ in texts.values()]
    other = ["2024/05/24 Fri 00:00:01.005", "2024/05/24 星期五 00:00:01.005"]  # one row's layout spoils the file
    assert filepass.save_time_unproven(pa.array(other), np.full(2, at, np.int64)).tolist() == [True, True]
    midnight = 1716480000000  # 2024/05/24 00:00:00.000 in China: a file across two days
    assert filepass.save_time_unproven(pa.array(["2024/05/23 星期四 23:59:59.999", "2024/05/24 星期五 00:00:00.000"]),
                                       np.array([midnight - 1, midnight])).tolist() == [False, False]

    rule = next(e for e in load_suite("bronze.zj_port_counters")["expectations"]
                if e["meta"].get("id") == "save_time_matches_utc")
    rows = spark.createDataFrame([(t, at) for t in texts], "save_time string, ms bigint").select(
        "save_time", F.timestamp_millis("ms").alias("save_time_utc"))
    rows.createOrReplaceTempView("save_times")
    query = rule["kwargs"]["unexpected_rows_query"].replace("{batch}", "save_times")
    returned = {r["save_time"] for r in spark.sql(query).collect()}
    assert returned == {t for t, (_, counted) in texts.items() if counted}


def test_the_rate_bounds_check_marks_exactly_the_rows_the_rule_would_return(spark):
    """filepass.rates_out_of_bounds against the query of silver's rates_within_line_rate on the
    same rows (a null rate is NaN in the pass's arrays and null in the table's)."""
    from tracelake.quality.gate import load_suite

    nan = float("nan")
    cases = [  # (status code, in_util, out_util, interval_s) -> returned by the rule
        ((3, 0.5, 0.2, 0.5), False), ((3, 1.05, 0.0, 0.5), False), ((0, nan, nan, nan), False),
        ((3, 1.0500001, 0.2, 0.5), True), ((3, 0.2, 1.2, 0.5), True), ((3, -0.01, 0.2, 0.5), True),
        ((3, 0.2, 0.2, 0.0), True), ((3, 0.2, 0.2, -1.0), True), ((len(STATUSES), 0.2, 0.2, 0.5), True),
        ((3, float("inf"), 0.2, 0.5), True),
    ]
    columns = {name: np.array([c[0][i] for c in cases], float) for i, name in
               enumerate(("status", "in_util", "out_util", "seconds"))}
    columns["status"] = columns["status"].astype(np.int64)
    assert filepass.rates_out_of_bounds(columns, MAX_UTIL).to_pylist() == [returned for _, returned in cases]

    rule = next(e for e in load_suite("silver.zj_port_rates")["expectations"]
                if e["meta"].get("id") == "rates_within_line_rate")
    named = [*STATUSES, "unknown"]
    rows = spark.createDataFrame([(i, named[s], None if u != u else u, None if o != o else o, None if t != t else t)
                                  for i, ((s, u, o, t), _) in enumerate(cases)],
                                 "n int, status string, in_util double, out_util double, interval_s double")
    rows.createOrReplaceTempView("rate_rows")
    returned = {r["n"] for r in spark.sql(rule["kwargs"]["unexpected_rows_query"].replace("{batch}", "rate_rows")).collect()}
    assert returned == {i for i, (_, flagged) in enumerate(cases) if flagged}
    assert rule["meta"]["limits"] == {"max_util": MAX_UTIL} and rule["kwargs"]["unexpected_rows_query"].count(f"{MAX_UTIL}D") == 2


def test_the_pass_yields_a_files_repeated_strings_as_dictionaries_of_the_same_values(tmp_path):
    """parse_files with `dictionary` (what Sail takes) hands over the same rows as without it (what
    classic Spark needs): a rated file, a file with a poll delivered twice, and a file that goes
    line by line (its marker row), in one batch."""
    from tracelake.sources.zhejiang.synth.ports import write_port_hour

    chosen = [("NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825", p) for p in PORTS]
    paths = write_port_hour(tmp_path, "2024052400", chosen, lambda folder, port, t: (np.full_like(t, 0.2),
                                                                                      np.full_like(t, 0.1)), seed=7)
    lines = paths[1].read_text(encoding="utf-8").splitlines()
    _last_poll_twice(paths[1])
    _a_line_for_the_exact_parse(paths[2])
    files = pa.RecordBatch.from_pylist([
        {"path": str(p), "source_file": p.name, "hour_cst": "2024052400", "folder_device_name": DEVICE,
         "file_port_name": port} for p, (_, port) in zip(paths, chosen)])
    plain = pa.Table.from_batches(list(grouppass.parse_files(iter([files]), max_util=MAX_UTIL)))
    coded = pa.Table.from_batches(list(grouppass.parse_files(iter([files]), max_util=MAX_UTIL, dictionary=True)))
    assert plain.schema == filepass.YIELDED and coded.schema == pa.schema([*filepass.PASS_OUTPUT, filepass.PROBLEMS])
    assert [pa.types.is_dictionary(f.type) for f in coded.schema] == [f.name in filepass.REPEATED_STRINGS
                                                                       for f in coded.schema]
    assert coded.cast(filepass.YIELDED).equals(plain)
    assert plain.num_rows == len(paths[0].read_text().splitlines()) - 1 + len(lines) + 1
    assert plain.column(VERDICT).to_pylist().count(EXACT) == 1
    # the marker's problem names the exact parse; no other row has one
    problems = plain.column(PARSE_ERRORS).to_pylist()
    assert [p for p in problems if p] == [[EXACT_REASON]] and problems.count([]) == plain.num_rows - 1
    assert plain.column(VERDICT).to_pylist().count(REPEATED) == 1
    assert set(plain.column("port_name").drop_null().to_pylist()) == {PORTS[0], PORTS[1]}


def test_a_group_of_files_gives_each_file_exactly_the_rows_it_gives_alone(tmp_path):
    """portgroup rates most of a group's files together; every file's rows (values, rates, flags,
    markers) equal filepass.one_file's for it alone. The group holds files in order, one ending
    without a newline, a poll delivered twice, two rows swapped, the management port, a row naming
    another port, a line that needs the exact parse, one SaveTime of another layout, a header
    alone, and files continuing from a carried state with and without an overlap."""
    from tracelake.sources.zhejiang.synth.ports import write_port_hour

    folder = "NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825"
    ports = [MGMT_PORT, *[f"TwoHundredGigE1/0/{n}:1" for n in range(1, 12)]]
    paths = write_port_hour(tmp_path, "2024052400", [(folder, p) for p in ports],
                            lambda f, port, t: (np.full_like(t, 0.3), np.full_like(t, 0.1)), seed=11)
    texts = {p: p.read_text(encoding="utf-8") for p in paths}
    lines = {p: t.splitlines() for p, t in texts.items()}
    files = [{"path": str(p), "source_file": p.name, "hour_cst": "2024052400", "folder_device_name": DEVICE,
              "file_port_name": next(port for port in ports if lines[p][1].split(",")[3] == port)} for p in paths]
    port_of = {f["path"]: f["file_port_name"] for f in files}
    named = {port_of[str(p)]: p for p in paths}

    def rewrite(port: str, body: list[str], end: str = "\n") -> None:
        named[port].write_text("\n".join(body) + end, encoding="utf-8")

    p1, p2, p3, p4, p5, p6, p7, p8, p9, p10 = (named[f"TwoHundredGigE1/0/{n}:1"] for n in range(1, 11))
    rewrite(port_of[str(p1)], lines[p1], end="")  # no newline at the end
    rewrite(port_of[str(p2)], [*lines[p2], lines[p2][-1]])  # a poll twice
    rewrite(port_of[str(p3)], [lines[p3][0], lines[p3][2], lines[p3][1], *lines[p3][3:]])  # two rows swapped
    rewrite(port_of[str(p4)], [*lines[p4][:5], lines[p4][5].replace(port_of[str(p4)], port_of[str(p5)]), *lines[p4][6:]])
    rewrite(port_of[str(p5)], [*lines[p5], "not,a,poll"])  # the exact parse
    other = lines[p6][3].split(",")
    other[0] = other[0].replace("/", "-")  # another layout of one SaveTime: only this file's rows are unproven
    rewrite(port_of[str(p6)], [*lines[p6][:3], ",".join(other), *lines[p6][4:]])
    rewrite(port_of[str(p7)], lines[p7][:1])  # the header alone
    first = {port_of[str(p)]: int(lines[p][1].split(",")[1]) for p in (p8, p9)}
    state = {(DEVICE, port_of[str(p8)]): ([first[port_of[str(p8)]] - 900, first[port_of[str(p8)]] - 400], [1, 0]),
             (DEVICE, port_of[str(p9)]): ([first[port_of[str(p9)]] - 400, first[port_of[str(p9)]]], [1, 1])}

    key = [("source_file", "ascending"), ("line_number", "ascending")]
    alone = pa.concat_tables([filepass.one_file(f, state, MAX_UTIL) for f in files]).cast(filepass.OUTPUT).sort_by(key)
    tables, rows = grouppass.one_group(files, state, MAX_UTIL)
    grouped = pa.concat_tables(tables).cast(filepass.OUTPUT).sort_by(key)
    assert grouped.equals(alone)
    assert len(tables) == 1 + 7  # the rated group, and each of: mgmt, twice, swapped, other port, exact, header, overlap
    assert rows == [alone.filter(pa.compute.equal(alone.column("source_file"), f["source_file"])).num_rows for f in files]
    assert sorted(alone.filter(pa.compute.equal(alone.column(VERDICT), EXACT)).column("source_file").to_pylist()) == sorted(
        p.name for p in (p4, p5, p7))  # another port, the exact parse, the header alone
    unproven = alone.filter(alone.column(filepass.SAVE_TIME_UNPROVEN)).column("source_file").unique().to_pylist()
    assert unproven == [p6.name]
    rerated = set(alone.filter(alone.column(filepass.RERATE)).column("source_file").unique().to_pylist())
    assert {p9.name, p8.name} & rerated == {p9.name}


def test_the_checks_judge_each_file_by_all_of_its_own_rows_whatever_its_chunks():
    """filepass.failed_checks per file, on tables of several chunks (a file over the CSV reader's
    1 MB block parses into more than one): a name or an instant that fails in a later chunk is
    found, and each file is judged by its own rows only."""
    at = 1_716_480_001_000

    def rows(port: str, ms: list[int], device: str = DEVICE, ratio: float = 0.5) -> pa.Table:
        n = len(ms)
        return pa.table({"SaveTime": ["x"] * n, "SaveTimeUTC": pa.array(ms, pa.int64()), "DeviceName": [device] * n,
                         "PortName": [port] * n, **{c: pa.array([1] * n, pa.int64()) for c in filepass.COUNTERS},
                         "InRatio": [ratio] * n, "OutRatio": [ratio] * n},
                        schema=pa.schema([(c, filepass.RAW_TYPES[c]) for c in filepass.RAW]))

    a, b = PORTS[1], PORTS[2]
    tables = [
        pa.concat_tables([rows(a, [at, at + 500]), rows(a, [at + 1000])]),  # holds, in two chunks
        pa.concat_tables([rows(b, [at, at + 500]), rows(a, [at + 1000])]),  # its second chunk names port a
        pa.concat_tables([rows(a, [at]), rows(a, [4_200_000_000_000])]),  # an instant after 2099, second chunk
        pa.concat_tables([rows(a, [at]), rows(a, [at + 500], device="other")]),  # another switch
        pa.concat_tables([rows(a, [at]), rows(a, [at + 500], ratio=float("nan"))]),  # a ratio not finite
        rows(a, []),  # no rows: the exact parse reads it
        rows(b, [at, at + 500]),  # holds
    ]
    ports = [a, b, a, a, a, a, b]
    assert [t.column("PortName").num_chunks for t in tables[:5]] == [2] * 5
    got = filepass.failed_checks(tables, [DEVICE] * len(tables), ports)
    assert got.tolist() == [False, True, True, True, True, True, False]
    assert [filepass._holds(t, DEVICE, p) for t, p in zip(tables, ports)] == [not g for g in got.tolist()]


def test_a_row_outside_its_cst_hour_folder_is_marked_as_the_hour_rule_tests_it():
    """filepass.outside_hour against samples_in_hour_folder's bounds: the folder's CST hour from
    its first millisecond, up to but not including the next hour's."""
    start = filepass.hour_start_ms("2024052400")
    assert start == int(datetime(2024, 5, 23, 16, tzinfo=UTC).timestamp()) * 1000
    ms = np.array([start - 1, start, start + filepass.HOUR_MS - 1, start + filepass.HOUR_MS])
    assert filepass.outside_hour(ms, np.full(4, start)).tolist() == [True, False, False, True]


def test_the_sink_takes_every_kept_row_not_set_apart_and_hands_over_the_rest(tmp_path):
    """parse_files with a sink, per group: a group whose rows are all kept and not set apart (the
    usual one) goes to the sink whole and hands nothing over; a group with a poll delivered twice
    and a file parsed line by line hands over exactly the copy and the file's marker. Sink + handed
    over = the rows parse_files gives without a sink, value for value."""
    import pyarrow.parquet as pq

    from tracelake.io.sinkfiles import sink_spec
    from tracelake.sources.zhejiang.synth.ports import write_port_hour

    folder = "NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825"
    ports = [f"TwoHundredGigE1/0/{n}:1" for n in range(1, 2 * grouppass.GROUP_FILES + 1)]
    paths = write_port_hour(tmp_path / "raw", "2024052400", [(folder, p) for p in ports],
                            lambda f, port, t: (np.full_like(t, 0.3), np.full_like(t, 0.1)), seed=5)
    files = [{"path": str(p), "source_file": p.name, "hour_cst": "2024052400", "folder_device_name": DEVICE,
              "file_port_name": p.read_text(encoding="utf-8").splitlines()[1].split(",")[3]} for p in paths]
    second = paths[grouppass.GROUP_FILES:]  # the second group: one poll twice, one line for the exact parse
    _last_poll_twice(second[0])
    _a_line_for_the_exact_parse(second[1])
    batch = pa.RecordBatch.from_pylist(files)

    whole = pa.Table.from_batches(list(grouppass.parse_files(iter([batch]), max_util=MAX_UTIL)))
    spec = sink_spec(str(tmp_path / "sink"), {"_tl_run": "r1"})
    handed = pa.Table.from_batches(list(grouppass.parse_files(iter([batch]), max_util=MAX_UTIL, sink_json=spec)),
                                   schema=filepass.YIELDED)
    (written,) = (tmp_path / "sink").iterdir()
    sunk = pq.read_table(written)
    verdicts = whole.column(VERDICT).to_pylist()
    assert handed.num_rows == verdicts.count(REPEATED) + verdicts.count(EXACT) == 2  # the copy, the marker
    assert sorted(set(handed.column("source_file").to_pylist())) == sorted(p.name for p in second[:2])
    assert sunk.num_rows + handed.num_rows == whole.num_rows
    assert set(sunk.column("_tl_run").to_pylist()) == {"r1"}
    footer = pq.ParquetFile(written).schema
    required = {footer.column(i).name for i in range(len(footer)) if footer.column(i).max_definition_level == 0}
    assert required == filepass.WRITTEN_REQUIRED | {"_tl_run"}
    key = [("source_file", "ascending"), ("save_time_utc", "ascending"), (VERDICT, "ascending")]
    columns = [name for name, _ in filepass.WRITTEN if name in filepass.OUTPUT.names]
    typed = pa.schema([filepass.OUTPUT.field(c) for c in columns])
    rejoined = pa.concat_tables([sunk.select(columns).cast(typed), handed.select(columns)])
    assert rejoined.sort_by(key).equals(whole.select(columns).sort_by(key))


def test_the_columns_written_required_are_those_no_table_lets_be_null_and_the_pass_own_flags():
    """The sink writes WRITTEN_REQUIRED as required Parquet columns: each is a column both tables it
    lands in declare non-null, or a flag of the pass (reserved prefix); the rates and intervals,
    null where no rate, stay optional."""
    from tracelake.schema import RESERVED_PREFIX, load_schema
    from tracelake.sources.zhejiang.ports import TABLE

    schemas = [load_schema(TABLE), load_schema(RATES_TABLE)]
    for name in filepass.WRITTEN_REQUIRED:
        if name.startswith(RESERVED_PREFIX):
            continue
        declared = [c.nullable for s in schemas for c in s.columns if c.name == name]
        assert declared and not any(declared), name
    assert not filepass.WRITTEN_REQUIRED & {"interval_start_utc", "interval_s", "dt_s", "line_rate_bps",
                                           "in_bytes_per_s", "out_bytes_per_s", "in_util", "out_util"}
