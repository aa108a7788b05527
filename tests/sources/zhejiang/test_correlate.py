"""Zhejiang cross-layer correlation: task paths, per-iteration network evidence and the
port blamed for a slow iteration.

(a) hand-built frames for the transforms (portable); (b) a generated world with injected
congestion/loss episodes, decoys and checkpoint-slow iterations, scored against its
ground_truth.json; (c) the real task and the real traffic hour (../shared/data/zhejiang, Zhejiang
Lab LLM Trace Program, https://github.com/zhejianglab/Zhejiang-Lab-Cluster-Traces, CC-BY 4.0),
which do not overlap in time: every real iteration has coverage 0 and no suspect.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from conftest import make_config, shared
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.delta.catalog import read_tables
from tracelake.run.pipeline import run_ingest
from tracelake.run.registry import generate
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.synth.truth import check_against_truth
from tracelake.sources.zhejiang.transforms.correlate import (
    UPLINK_PORTS,
    Rules,
    iteration_counters,
    iteration_flows,
    iteration_network,
    iteration_port_minutes,
    may_blame,
    network_verdicts,
    overlap_join,
    path_port_evidence,
    task_network_summary,
    task_paths,
    verdicts,
    with_baseline,
)

T0 = datetime(2024, 5, 23, 16, 0, 0, tzinfo=UTC)
LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1.GPU.S9825"
LEAF5 = "NH-DC-NM129-D03-ROCE-Leaf-5.GPU.S9825"
PORT_A, PORT_B = "TwoHundredGigE1/0/1:1", "TwoHundredGigE1/0/1:2"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def frame(spark, rows: list[tuple], ddl: str):
    """A frame built through pandas (Arrow): on classic Spark a plain row list becomes a Python
    RDD that every stage re-reads through Python workers, which makes a big plan slow."""
    schema = spark.createDataFrame([], ddl).schema
    return spark.createDataFrame(pd.DataFrame(rows, columns=schema.names), schema)


# ---------------------------------------------------------------- (a) transforms, hand-built

@pytest.mark.portable
def test_bucketed_overlap_join_keeps_each_overlapping_pair_once(spark):
    left = spark.createDataFrame(
        [("a", 1, at(0), at(10)), ("a", 2, at(10), at(130)), ("b", 3, at(0), at(10))],
        "k string, id int, l_start timestamp, l_end timestamp")
    right = spark.createDataFrame(
        [("a", "x", at(5), at(15)), ("a", "y", at(100), at(125)), ("a", "z", at(200), at(210)),
         ("b", "w", at(9), at(70)), ("c", "v", at(0), at(500))],
        "k string, rid string, r_start timestamp, r_end timestamp")
    # id 2 spans buckets 0..2 and y spans 1..2: one pair, counted in its first common bucket
    pairs = overlap_join(left, right, ["k"], 60).select("k", "id", "rid", "overlap_s")
    expected = spark.createDataFrame(
        [("a", 1, "x", 5.0), ("a", 2, "x", 5.0), ("a", 2, "y", 25.0), ("b", 3, "w", 1.0)],
        "k string, id int, rid string, overlap_s double")
    assert_same_rows(pairs, expected)


ITERATIONS_DDL = ("task_id string, iteration int, start_ts timestamp, end_ts timestamp, duration_s double, "
                  "is_checkpoint boolean, restarts_before int, after_restart boolean")


@pytest.mark.portable
def test_baseline_and_slow_flags_work_within_a_run_segment(spark):
    """Steps 1-5 at 10 s, a restart, steps 6-10 at 20 s (a run resumed on slower hardware): each
    segment is measured against itself, so no step after the restart is slow; one at 30 s is."""
    durations = [10.0] * 5 + [20.0, 20.0, 30.0, 20.0, 20.0]
    its = spark.createDataFrame(
        [("t", i + 1, at(10 * i), at(10 * i + d), d, False, int(i >= 5), i == 5) for i, d in enumerate(durations)],
        ITERATIONS_DDL)
    got = with_baseline(its, Rules(baseline_k=2)).orderBy("iteration").select("iteration", "baseline_s", "is_slow")
    assert [tuple(r) for r in got.collect()] == [
        (1, 10.0, False), (2, 10.0, False), (3, 10.0, False), (4, 10.0, False), (5, 10.0, False),
        (6, 20.0, False), (7, 20.0, False), (8, 20.0, True), (9, 20.0, False), (10, 20.0, False)]


@pytest.mark.portable
def test_baseline_is_the_median_of_the_surrounding_iterations(spark):
    # k = 2, lower quartile: 4 sees 10, 10, 30, 10, 10; 7 is 5 % over its baseline, not slow
    durations = [10.0, 10.0, 10.0, 30.0, 10.0, 10.0, 10.5]
    its = spark.createDataFrame(
        [("t", i + 1, at(10 * i), at(10 * i + d), d, False, 0, False) for i, d in enumerate(durations)], ITERATIONS_DDL)
    got = with_baseline(its, Rules(baseline_k=2)).select("iteration", "baseline_s", "slowdown", "is_slow")
    expected = spark.createDataFrame(
        [(1, 10.0, 1.0, False), (2, 10.0, 1.0, False), (3, 10.0, 1.0, False), (4, 10.0, 3.0, True),
         (5, 10.0, 1.0, False), (6, 10.0, 1.0, False), (7, 10.0, 1.05, False)],
        "iteration int, baseline_s double, slowdown double, is_slow boolean")
    assert_same_rows(got, expected)


RANK_DDL = ("task_id string, rank int, pod string, host_name string, host_ip string, rail_group int, "
            "device_name string, leaf string, port_name string, nic_ip string")


@pytest.mark.portable
def test_task_paths_hold_access_ports_nic_ips_and_the_uplinks_of_every_leaf(spark):
    ranks = spark.createDataFrame([
        # task "x": two hosts in rail groups 1 and 2 -> its traffic crosses spines
        ("x", 0, "x-master", "GPU-1", "10.107.254.1", 1, LEAF1, "Leaf-1", PORT_A, "10.107.222.1"),
        ("x", 1, "x-master", "GPU-1", "10.107.254.1", 1, LEAF1, "Leaf-1", PORT_A, "10.107.222.1"),
        ("x", 2, "x-worker-1", "GPU-61", "10.107.254.61", 2, LEAF5, "Leaf-5", PORT_A, "10.107.226.1"),
        ("x", 3, "x-worker-1", "GPU-61", "10.107.254.61", 2, None, None, None, None),  # NIC unknown
        # task "y": one host -> NVLink only, nothing on the network
        ("y", 0, "y-master", "GPU-2", "10.107.254.2", 1, LEAF1, "Leaf-1", PORT_B, "10.107.222.2"),
    ], RANK_DDL)
    its = spark.createDataFrame([("x", 1, at(0), at(10)), ("x", 2, at(10), at(25))],
                                "task_id string, iteration int, start_ts timestamp, end_ts timestamp")
    paths = task_paths(ranks, its)
    access = paths.filter("role = 'access'").select(
        "task_id", "window_start_ts", "window_end_ts", "device_name", "port_name", "nic_ip", "ranks",
        "carries_task_traffic", "line_rate_bps")
    expected = spark.createDataFrame([
        ("x", at(0), at(25), LEAF1, PORT_A, "10.107.222.1", 2, True, 200_000_000_000),
        ("x", at(0), at(25), LEAF5, PORT_A, "10.107.226.1", 1, True, 200_000_000_000),
        ("y", None, None, LEAF1, PORT_B, "10.107.222.2", 1, False, 200_000_000_000),
    ], "task_id string, window_start_ts timestamp, window_end_ts timestamp, device_name string, port_name string, "
       "nic_ip string, ranks int, carries_task_traffic boolean, line_rate_bps bigint")
    assert_same_rows(access, expected)
    uplinks = paths.filter("role = 'uplink'").groupBy("task_id", "device_name", "carries_task_traffic").agg(
        F.count(F.lit(1)).alias("n"), F.min("port_name").alias("lo"), F.max("port_name").alias("hi"))
    assert_same_rows(uplinks, spark.createDataFrame([
        ("x", LEAF1, True, 30, "FourHundredGigE1/0/33", "FourHundredGigE1/0/62"),
        ("x", LEAF5, True, 30, "FourHundredGigE1/0/33", "FourHundredGigE1/0/62"),
        ("y", LEAF1, False, 30, "FourHundredGigE1/0/33", "FourHundredGigE1/0/62"),
    ], "task_id string, device_name string, carries_task_traffic boolean, n long, lo string, hi string"))
    assert len(UPLINK_PORTS) == 30


# One task on two hosts of rail group 1 (NICs on Leaf-1 ports A and B, uplinks carry nothing).
# Iterations of 10 s whose all-reduce is their last 3 s at 0.7 of line rate on both ports, except:
#   5  (20 s)  port A congested: its all-reduce takes 13 s at 0.97 (B at 0.25) -> access_saturation A
#   8  (18 s)  checkpoint: a normal all-reduce, then 8 s quiet; port A lost packets in that minute
#              -> slow, but its path was quiet: no suspect
#   12 (15 s)  loss on port B: the all-reduce takes 8 s at 0.4, B lost packets -> loss B
#   19 (30 s)  after the end of all network data -> coverage 0, no suspect although slow
DURATIONS = [10] * 4 + [20, 10, 10, 18, 10, 10, 10, 15] + [10] * 6 + [30]


def _scenario_iterations() -> list[tuple[int, float, float, float, float, float]]:
    """(iteration, start, end, comm start, comm end, comm util on A / on B via _util)."""
    rows, t = [], 0.0
    for i, d in enumerate(DURATIONS, start=1):
        comm = {5: 13.0, 8: 3.0, 12: 8.0}.get(i, 3.0)
        comm_start = t + 7.0 if i == 8 else t + d - comm
        rows.append((i, t, t + d, comm_start, comm_start + comm))
        t += d
    return rows


def _util(port: str, second: float) -> float:
    for i, start, end, c0, c1 in _scenario_iterations():
        if start <= second < end:
            if not (c0 <= second < c1):
                return 0.01
            if i == 5:
                return 0.97 if port == PORT_A else 0.25
            return 0.4 if i == 12 else 0.7
    return 0.01


def _scenario(spark, restart_at: int | None = None):
    """The scenario's task, its network records; with `restart_at`, the run restarted just
    before that iteration (which is then the first after a restart)."""
    ranks = frame(spark, [
        ("t", 0, "t-master", "GPU-1", "10.107.254.1", 1, LEAF1, "Leaf-1", PORT_A, "10.107.222.1"),
        ("t", 1, "t-worker-1", "GPU-2", "10.107.254.2", 1, LEAF1, "Leaf-1", PORT_B, "10.107.222.2"),
    ], RANK_DDL)
    its = frame(
        spark, [("t", i, at(s), at(e), float(e - s), i == 8, int(restart_at is not None and i >= restart_at), i == restart_at)
                for i, s, e, _, _ in _scenario_iterations()], ITERATIONS_DDL)
    # counters: one rated row per second up to 180 s, both directions alike
    rates = frame(
        spark, [(LEAF1, p, at(s), at(s - 1), _util(p, s - 0.5), _util(p, s - 0.5),
          _util(p, s - 0.5) * 25e9, _util(p, s - 0.5) * 25e9) for p in (PORT_A, PORT_B) for s in range(1, 181)],
        "device_name string, port_name string, save_time_utc timestamp, interval_start_utc timestamp, "
        "in_util double, out_util double, in_bytes_per_s double, out_bytes_per_s double")
    loss = {(PORT_A, 120): 300, (PORT_B, 180): 500}
    minutes = frame(
        spark, [(LEAF1, p, at(m), loss.get((p, m), 0), 0, 20.0, 20.0)
                for p in (PORT_A, PORT_B) for m in (60, 120, 180)],
        "device_name string, port_name string, time timestamp, in_pkts_loss bigint, out_pkts_loss bigint, "
        "in_use_ratio double, out_use_ratio double")
    flows = frame(spark, [
        ("10.107.222.1", "10.107.222.2", 5000, 0, at(60)), ("10.107.222.2", "10.107.222.1", 5000, 0, at(60)),
        ("10.107.222.1", "10.107.231.29", 99999, 7, at(60)),  # not intra-task: ignored
    ], "source_ip string, dest_ip string, rtt_ns bigint, nak_pkts bigint, time timestamp")
    links = spark.createDataFrame([], load_schema("bronze.zj_link").spark_schema())
    paths = task_paths(ranks, its)
    return paths, its, rates, minutes, flows, links


def _computed(spark, frame):
    """Run a plan once; the tests then read its rows (as the pipeline reads the stored table)."""
    return spark.createDataFrame(frame.collect(), frame.schema)


@pytest.fixture(scope="module")
def scenario(spark):
    paths, its, rates, minutes, flows, links = _scenario(spark)
    return _computed(spark, iteration_network(paths, its, rates, minutes, flows, links))


@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_suspects_come_from_excess_over_each_ports_own_level(spark, scenario):
    blamed = {5: (LEAF1, PORT_A, "access_saturation"), 12: (LEAF1, PORT_B, "loss")}
    rows = []
    for i, start, _end, _, _ in _scenario_iterations():
        ports = 2 if start < 180 else 0  # counters and port.csv minutes end at 180 s
        nics = 2 if start < 60 else 0  # flows only in the first minute
        switch, port, reason = blamed.get(i, (None, None, "none"))
        rows.append(("t", i, i in (5, 8, 12, 19), (ports + nics) / 4, switch, port, reason))
    expected = spark.createDataFrame(
        rows, "task_id string, iteration int, is_slow boolean, coverage double, suspect_device_name string, "
              "suspect_port_name string, suspect_reason string")
    got = scenario.select("task_id", "iteration", "is_slow", "coverage", "suspect_device_name", "suspect_port_name",
                          "suspect_reason")
    assert_same_rows(got, expected)
    by_it = {r["iteration"]: r for r in scenario.collect()}
    assert by_it[5]["access_util_max"] == pytest.approx(0.97) and by_it[5]["network_shaped"] is True
    assert by_it[8]["network_shaped"] is False and by_it[8]["loss_pkts"] == 300  # quiet path, not blamed
    assert by_it[12]["loss_pkts"] == 500 and by_it[12]["network_shaped"] is True
    assert by_it[1]["flow_rtt_p99_ns"] == 5000 and by_it[1]["flow_nak_pkts"] == 0  # the foreign flow is not the task's
    assert by_it[1]["access_util_mean"] == pytest.approx(0.3 * 0.7 + 0.7 * 0.01)
    assert by_it[1]["comm_busy_s"] == pytest.approx(3.0) and by_it[5]["comm_busy_s"] == pytest.approx(13.0)
    assert (by_it[19]["coverage"], by_it[19]["access_util_max"], by_it[19]["loss_pkts"], by_it[19]["ecn_marks"]) == (
        0.0, None, None, None)
    assert by_it[19]["slowdown"] == pytest.approx(3.0)


@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_task_summary_counts_slow_and_explained_iterations(spark, scenario):
    got = task_network_summary(scenario).select(
        "task_id", "iterations", "iterations_with_data", "slow_iterations", "slow_with_data",
        "slow_explained_by_network", "share_explained_by_network", "slow_checkpoints", "top_suspect_ports",
        "suspect_reasons")
    expected = spark.createDataFrame(
        [("t", 19, 16, 4, 3, 2, 2 / 3, 1,
          [f"{LEAF1} {PORT_A}: 1 (access_saturation)", f"{LEAF1} {PORT_B}: 1 (loss)"],
          ["access_saturation: 1", "loss: 1"])],
        "task_id string, iterations int, iterations_with_data int, slow_iterations int, slow_with_data int, "
        "slow_explained_by_network int, share_explained_by_network double, slow_checkpoints int, "
        "top_suspect_ports array<string>, suspect_reasons array<string>")
    assert_same_rows(got, expected)


def test_the_first_step_after_a_restart_is_never_blamed_on_the_network(spark, scenario):
    """Iteration 5 is slow with its access port saturated (blamed in the scenario); as the first
    step after a restart (its warm-up) it is named on no port, and the others keep their verdicts."""
    paths, its, rates, minutes, flows, links = _scenario(spark, restart_at=5)
    got = {r.iteration: (r.is_slow, r.suspect_reason) for r in iteration_network(paths, its, rates, minutes, flows, links).collect()}
    before = {r.iteration: (r.is_slow, r.suspect_reason) for r in scenario.collect()}
    assert before[5] == (True, "access_saturation")
    assert got[5] == (True, "none")
    assert {i: v for i, v in got.items() if i < 5 or i > 7} == {i: v for i, v in before.items() if i < 5 or i > 7}


@pytest.mark.portable
@pytest.mark.slow_on_classic
def test_verdicts_of_a_few_iterations_against_the_whole_tasks_levels_equal_the_whole_verdicts(spark, scenario):
    """The hourly rebuild's shape: gold was made when only iterations 1-10 had evidence; then
    11-19 get theirs. Judging again only those and the iterations a port can be blamed for
    (may_blame), with the others' own figures taken from the earlier gold, gives the whole
    rebuild's rows. Leaving out may_blame's iteration 5 (slow, evidence unchanged) loses its
    suspect: a suspect comes from the iteration's port evidence against the ports' typical
    levels, which the kept per-iteration figures do not hold."""
    paths, its, rates, minutes, flows, links = _scenario(spark)
    evidence = [_computed(spark, f) for f in (iteration_counters(paths, its, rates),
                                              iteration_port_minutes(paths, its, minutes, flows),
                                              iteration_flows(paths, its, flows, links))]
    early = _computed(spark, network_verdicts(paths, its, *[f.filter("iteration <= 10") for f in evidence]))
    whole = network_verdicts(paths, its, *evidence)
    assert_same_rows(whole, scenario.select(*whole.columns))
    assert sorted(r.iteration for r in may_blame(its).collect()) == [5, 8, 12, 19]
    fresh = its.filter("iteration > 10").select("task_id", "iteration")

    def rebuilt(only):
        ev = _computed(spark, path_port_evidence(paths, its, evidence[0], evidence[1], only=only))
        known = early.join(only, ["task_id", "iteration"], "left_anti")
        return ev, verdicts(paths, its, ev, evidence[2], known=known)

    ev, got = rebuilt(fresh.unionByName(may_blame(its)))
    assert sorted({r.iteration for r in ev.collect()}) == [5, 8, *range(11, 17)]  # the data ends at 180 s
    assert_same_rows(got, whole)
    _, without = rebuilt(fresh)
    assert {r.iteration: r.suspect_reason for r in without.collect() if r.suspect_reason != "none"} == {12: "loss"}


@pytest.mark.parametrize("changed, held, whole", [
    ({"silver.zj_task_iterations": (("t1",),)}, True, True),  # new iterations, no new traffic
    ({"silver.zj_iteration_counters": ()}, True, False),  # an hour without a task's evidence
    ({"silver.zj_iteration_counters": ()}, False, True),  # ... and gold not in the lake yet
])
def test_the_network_rebuild_builds_whole_on_changed_iterations_or_a_missing_table(
        spark, tmp_path, monkeypatch, changed, held, whole):
    """rebuild_iteration_network: a change of the iterations, or a gold table not in the lake
    yet, builds gold whole (partitions None), even when no evidence partition changed; an hour
    with no task's evidence changes no partition, and reads no stored gold."""
    from tracelake.sources.zhejiang import correlate

    built = spark.createDataFrame([(1,)], "whole int")
    monkeypatch.setattr(correlate, "read_tables", lambda spark, config, *names: [built for _ in names])
    monkeypatch.setattr(correlate, "lake_holds", lambda spark, config, name: held)
    monkeypatch.setattr(correlate, "network_verdicts", lambda *frames: built if len(frames) == 5 else None)
    if not held:
        monkeypatch.setattr(correlate, "read_tables", lambda spark, config, *names: [
            None if name == correlate.ITERATION_NETWORK else built for name in names])
    frame, partitions = correlate.rebuild_iteration_network(spark, make_config(tmp_path), changed, None)
    if whole:
        assert (frame is built, partitions) == (True, None)
    else:
        assert (frame.count(), frame.columns, partitions) == (
            0, load_schema(correlate.ITERATION_NETWORK).spark_schema().fieldNames(), ())


def test_no_network_data_means_coverage_zero_and_no_suspect(spark):
    """The pipeline's case before any traffic is ingested (local only: one more full plan is slow
    on classic Spark; iterations 17-19 of the scenario cover the rule there)."""
    paths, its, rates, minutes, flows, links = _scenario(spark)
    empty = [df.limit(0) for df in (rates, minutes, flows, links)]
    rows = iteration_network(paths, its, *empty).collect()
    assert len(rows) == len(DURATIONS)
    assert all(r["coverage"] == 0 and r["suspect_reason"] == "none" and r["suspect_port_name"] is None for r in rows)
    assert sorted(r["iteration"] for r in rows if r["is_slow"]) == [5, 8, 12, 19]  # still told apart


# ---------------------------------------------------------------- (b) a generated world

@pytest.fixture(scope="module")
def world(engine, tmp_path_factory):
    """3 tasks, 21 episodes on their paths, 7 decoys, 3 checkpoint-slow iterations in one hour."""
    root = tmp_path_factory.mktemp("zj-correlate")
    generate("zhejiang", root / "raw", scale=0.05, seed=7, hours=1, tasks=3)
    config = make_config(root / "lake")
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(root / "raw"))}
    truth = json.loads((root / "raw" / "ground_truth.json").read_text(encoding="utf-8"))
    return stats, config, truth


def _gold(spark, config) -> dict[tuple[str, int], dict]:
    [gold] = read_tables(spark, config, "gold.zj_iteration_network")
    return {(r["task_id"], r["iteration"]): r.asDict() for r in gold.collect()}


def test_generated_episodes_are_found_on_the_right_port(spark, world):
    stats, config, truth = world
    assert len(truth["tasks"]) >= 3 and len(truth["episodes"]) >= 20 and truth["decoys"]
    iterations = sum(len(t["iterations"]) for t in truth["tasks"])
    assert stats["gold.zj_iteration_network"].rows_kept == iterations
    assert stats["bronze.zj_port_counters"].rows_read > 300_000  # the per-port files were found
    gold = _gold(spark, config)
    episodes = {e["id"]: e for e in truth["episodes"]}
    causes = {(t["task_id"], it["iteration"]): it["causes"] for t in truth["tasks"] for it in t["iterations"]}

    check = check_against_truth(gold.values(), truth)
    found = check.found
    flagged = [(k, r) for k, r in gold.items() if r["suspect_reason"] != "none"]
    wrong = [k for k, r in flagged if (r["suspect_device_name"], r["suspect_port_name"]) not in
             {(episodes[c]["switch"], episodes[c]["port"]) for c in causes[k] if c in episodes}]
    recall, precision = len(found) / len(episodes), 1 - len(wrong) / len(flagged)
    print(f"\nzj correlate: recall {len(found)}/{len(episodes)} = {recall:.3f}, "
          f"precision {len(flagged) - len(wrong)}/{len(flagged)} = {precision:.3f}, wrong {wrong}")
    assert recall >= 0.95 and precision >= 0.95

    assert check.decoys_blamed == ()
    assert check.line() == (f"correlation vs the generator's ground truth: {len(found)} of {len(episodes)} "
                            "injected episodes found at the right port, no decoy blamed")
    quiet = [(q["task_id"], q["iteration"]) for q in truth["quiet_slow_iterations"]]
    assert quiet and all(gold[k]["is_slow"] and gold[k]["suspect_reason"] == "none" for k in quiet)


def test_generated_summary_and_paths(spark, world):
    _, config, truth = world
    paths, summary = read_tables(spark, config, "silver.zj_task_paths", "gold.zj_task_network_summary")
    for t in truth["tasks"]:
        access = {(n["switch"], n["access_port"], n["nic_ip"]) for h in t["hosts"] for n in h["nics"]}
        mine = paths.filter(F.col("task_id") == t["task_id"])
        got = {(r[0], r[1], r[2]) for r in mine.filter("role = 'access'").select(
            "device_name", "port_name", "nic_ip").collect()}
        assert got == access
        assert mine.filter("role = 'uplink'").count() == 30 * len(t["switches"])
        assert mine.filter("role = 'uplink' AND carries_task_traffic").count() == (
            30 * len(t["switches"]) if t["crosses_spine"] else 0)
    rows = {r["task_id"]: r for r in summary.collect()}
    assert set(rows) == {t["task_id"] for t in truth["tasks"]}
    for r in rows.values():
        assert r["slow_with_data"] >= r["slow_explained_by_network"] > 0 and r["top_suspect_ports"]
        assert 0 < r["nic_gbps_median"] < 200


def test_report_draws_one_figure_per_task(engine, world, tmp_path):
    from tracelake.sources.zhejiang import report

    _, config, truth = world
    section = report.render(engine, config, tmp_path)
    names = sorted(p.name for p in section.figures)
    assert names == sorted(f"zj_task_{t['task_id']}.png" for t in truth["tasks"])
    assert all(p.stat().st_size > 20_000 for p in section.figures)
    assert "top suspect ports" in section.tables_html[0]


def test_explain_names_the_injected_port_and_the_rule_that_picked_it(engine, world):
    from helpers import tracelake_in_process

    from tracelake.sources.zhejiang.explain import explain

    _, config, truth = world
    gold = _gold(engine.spark, config)
    episode = truth["episodes"][0]
    hit = episode["slowed_iterations"][0]
    key = next((hit["task_id"], i) for i in hit["iterations"]
               if (gold[(hit["task_id"], i)]["suspect_device_name"], gold[(hit["task_id"], i)]["suspect_port_name"])
               == (episode["switch"], episode["port"]))
    row = gold[key]
    lines = explain(engine.spark, config, *key)
    assert lines[0] == f"task {key[0]}, iteration {key[1]} (one step), run segment 1 (0 restarts before it)"
    assert f"slowdown {row['slowdown']:.2f}x: slow (slow at >= 1.10x)" in lines[2]
    assert (f"suspect: {row['suspect_reason']} at {episode['switch']} {episode['port']} "
            f"(score {row['suspect_score']:.2f})") in lines
    suspect_rows = [line for line in lines if line.startswith("* ")]
    assert len(suspect_rows) == 1 and f" {episode['port']} (" in suspect_rows[0]
    why = lines[lines.index(next(line for line in lines if line.startswith("suspect: "))) + 1]
    assert why.startswith("  why: ")
    assert lines[-2 if lines[-1].startswith("  no data from") else -1].startswith(
        f"coverage {row['coverage']:.2f}: {row['ports_with_data']} of {row['ports_expected']} path ports")

    done = tracelake_in_process(engine, "explain", key[0], str(key[1]), "--lake", config.lake_root)
    assert (done.returncode, done.stdout) == (0, "\n".join(lines) + "\n")


def test_explain_of_a_quiet_slow_iteration_and_of_an_unknown_one(engine, world):
    from helpers import tracelake_in_process

    from tracelake.sources.zhejiang.explain import explain

    _, config, truth = world
    gold = _gold(engine.spark, config)
    quiet = truth["quiet_slow_iterations"][0]
    key = (quiet["task_id"], quiet["iteration"])
    lines = explain(engine.spark, config, *key)
    said = next(line for line in lines if line.startswith("no suspect: "))
    assert said.startswith("no suspect: its path stayed quiet: communication grew by ")
    assert said.endswith(" (a checkpoint save)") == gold[key]["is_checkpoint"]

    iterations = sorted(i for t, i in gold if t == key[0])
    past = iterations[-1] + 1000
    done = tracelake_in_process(engine, "explain", key[0], str(past), "--lake", config.lake_root)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"tracelake: error: explain: task {key[0]} has no record ending at iteration {past} "
                                   "(a record names the last step it covers); nearest: "
                                   f"{', '.join(map(str, iterations[-3:]))}")
    done = tracelake_in_process(engine, "explain", key[0] + "x", "1", "--lake", config.lake_root)
    assert done.returncode == 2 and f"explain: no task {key[0]}x in gold.zj_iteration_network" in done.stderr
    assert key[0] in done.stderr  # the nearest task named


def test_explain_words_each_reason_from_the_figures():
    from tracelake.sources.zhejiang.explain import Chain, render

    verdict = {"task_id": "t", "iteration": 12, "start_ts": datetime(2024, 5, 23, 3, 0, tzinfo=UTC),
               "end_ts": datetime(2024, 5, 23, 3, 1, 4, 500000, tzinfo=UTC), "duration_s": 64.5, "baseline_s": 40.0,
               "slowdown": 1.6125, "is_slow": True, "is_checkpoint": False, "comm_busy_s": 30.0,
               "comm_busy_baseline_s": 10.0, "network_shaped": True, "coverage": 0.5, "ports_with_data": 1,
               "ports_expected": 2, "nics_with_flows": 1, "nics_expected": 2, "suspect_device_name": "X-Leaf-2.GPU",
               "suspect_port_name": "FourHundredGigE1/0/40", "suspect_reason": "uplink_saturation", "suspect_score": 0.4}
    port = {"device_name": "X-Leaf-2.GPU", "port_name": "FourHundredGigE1/0/40", "leaf": "Leaf-2", "role": "uplink",
            "counted": True, "counter_rows": 120, "minute_rows": 2, "util_max": 0.97, "typical_util_max": 0.2,
            "hot_share": 0.5, "typical_hot_share": 0.1, "loss_pkts": 0, "typical_loss_pkts": 0.0,
            "minute_util_max": 0.7, "typical_minute_util_max": 0.1, "elevated_flows": 0}
    path = [{"device_name": "X-Leaf-2.GPU", "port_name": p, "leaf": "Leaf-2", "role": "uplink"}
            for p in ("FourHundredGigE1/0/40", "FourHundredGigE1/0/9")]
    parties = [{"device_name": "X-Leaf-2.GPU", "port_name": "FourHundredGigE1/0/40", "party": party, "share": share,
                "is_top": top} for party, share, top in (("t", 0.25, False), ("u", 0.7, True), ("unattributed", 0.05, False))]
    chain = Chain(verdict, {"iterations_in_record": 2, "restarts_before": 1, "after_restart": False}, [port], path,
                  parties, True)
    assert render(chain) == [
        "task t, iteration 12 (steps 11–12 in one record), run segment 2 (1 restart before it)",
        "  2024-05-23 03:00:00.000 -> 2024-05-23 03:01:04.500 UTC",
        "  duration 64.50 s, baseline 40.00 s (lower quartile of the 21 records around it in its segment), "
        "slowdown 1.61x: slow (slow at >= 1.10x)",
        "  communication: 30.00 s busy on its access ports against a baseline of 10.00 s; the extra time spent "
        "communicating: yes",
        "",
        "evidence on the task's path (2 ports carry its traffic, 1 with data; typical = the port's median over the "
        "task's iterations within 3 hours; * the suspect):",
        "  port (role)                            counted  util max (typ)  time >= 0.90 (typ)  loss pkts (typ)  "
        "minute util (typ)  elevated flows",
        "* Leaf-2 FourHundredGigE1/0/40 (uplink)  yes      0.97 (0.20)     50% (10%)           0 (0)            "
        "0.70 (0.10)        0",
        "",
        "suspect: uplink_saturation at X-Leaf-2.GPU FourHundredGigE1/0/40 (score 0.40)",
        "  why: its counters reached 0.97 utilisation against a typical 0.20, 50% of the rated time at >= 0.90 "
        "against a typical 10%; the task's own access ports come before shared uplinks, saturation before loss, RTT last",
        "",
        "parties on its shared ports (share of the inter-leaf traffic in the overlapping minutes):",
        "  Leaf-2 FourHundredGigE1/0/40:",
        "    u                              70%  <- top",
        "    t                              25%",
        "    unattributed                    5%",
        "",
        "coverage 0.50: 1 of 2 path ports with counters or port.csv rows, 1 of 2 NICs seen in intra-task flows",
        "  no data from: Leaf-2 FourHundredGigE1/0/9 (uplink)",
    ]


@pytest.mark.portable
def test_the_report_names_the_task_top_in_the_most_seconds_of_a_victims_slowdown(spark):
    from tracelake.sources.zhejiang.report import top_interferers

    rows = spark.createDataFrame([("a", "b", "task", 3, 10.0), ("a", "c", "task", 5, 8.0),
                                  ("a", "unattributed", "unattributed", 9, 50.0), ("d", "a", "task", 1, 2.5)],
                                 "task_id string, party string, party_kind string, slow_iterations int, slowdown_s double")
    assert top_interferers(rows) == {"a": "b: 3 iterations, 10.0 s", "d": "a: 1 iteration, 2.5 s"}
    assert top_interferers(None) == {}


def test_a_cropped_task_figure_says_how():
    import pandas as pd

    from tracelake.sources.zhejiang.report import crop_note

    every = pd.DataFrame({"iteration": [1, 2, 3, 4, 5]})
    assert crop_note(every, every) == ""
    assert crop_note(every, every[every["iteration"].between(2, 4)]) == \
        "showing iterations 2–4 of 1–5: those with network data"


# ---------------------------------------------------------------- (c) the real files

@pytest.fixture(scope="module")
def real(engine, tmp_path_factory):
    """One ingest of the workbook, the real task and the real traffic hour (350 port files)."""
    parts = [shared("zhejiang", name) for name in ("cluster_2000_A100.xlsx", "taskinfo", "trafficinfo")]
    root = tmp_path_factory.mktemp("zj-correlate-real")
    (root / "raw").mkdir()
    for part in parts:
        os.symlink(part, root / "raw" / part.name)
    config = make_config(root / "lake")
    return {s.table: s for s in run_ingest(engine, config, "zhejiang", str(root / "raw"))}, config


@pytest.mark.e2e  # a quarter of a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
def test_real_task_and_traffic_hour_do_not_overlap(spark, real):
    stats, config = real
    paths, gold, summary, rates = read_tables(
        spark, config, "silver.zj_task_paths", "gold.zj_iteration_network", "gold.zj_task_network_summary",
        "silver.zj_port_rates")
    assert stats["bronze.zj_port_counters"].rows_read == 1_861_310
    # 4 hosts x 4 NICs; 12 leafs (3 rail groups) x 30 uplinks, all carrying the task's traffic
    assert paths.count() == 16 + 360 and paths.filter("carries_task_traffic").count() == 376
    rank0 = paths.filter("nic_ip = '10.107.223.31'").select("device_name", "port_name").collect()
    assert [tuple(r) for r in rank0] == [("NH-DC-NM129-B04-ROCE-Leaf-2.GPU.S9825", "TwoHundredGigE1/0/16:1")]
    task_end = gold.agg(F.max("end_ts")).first()[0]
    assert task_end < rates.agg(F.min("save_time_utc")).first()[0]  # 2024-04-30 vs 2024-05-23 16:00Z
    assert gold.count() == 2436
    assert gold.filter("coverage = 0 AND suspect_reason = 'none' AND suspect_port_name IS NULL").count() == 2436
    # the first step (50.4 s) and the four checkpoint saves (~79 s): slow, but nothing to judge them by
    slow = {r[0] for r in gold.filter("is_slow").select("iteration").collect()}
    assert slow == {1, 501, 1001, 1501, 2001}
    [row] = summary.collect()
    assert (row["iterations"], row["iterations_with_data"], row["slow_iterations"], row["slow_with_data"],
            row["slow_checkpoints"], row["share_explained_by_network"], row["top_suspect_ports"],
            row["median_duration_s"]) == (2436, 0, 5, 0, 4, None, [], 45.786)


@pytest.mark.portable
def test_a_ports_typical_level_is_the_median_of_the_iterations_within_three_hours(spark):
    """One port, one iteration an hour for ten hours, util_max 0.1 x the hour: the typical
    level of an iteration is the median of the hours within 3 of its own (hour 0: hours 0-3,
    median 0.15; hour 5: hours 2-8, 0.5; hour 9: hours 6-9, 0.75), not the task's 0.45."""
    from tracelake.sources.zhejiang.transforms.correlate import path_members, typical_levels

    its = frame(spark, [("t", h, at(h * 3600 + 10), at(h * 3600 + 40), 30.0) for h in range(10)],
                "task_id string, iteration int, start_ts timestamp, end_ts timestamp, duration_s double")
    paths = frame(spark, [("t", "access", LEAF1, PORT_A, True)],
                  "task_id string, role string, device_name string, port_name string, carries_task_traffic boolean")
    counters = frame(spark, [("t", h, LEAF1, PORT_A, h / 10, 30.0, 3.0) for h in range(10)],
                     "task_id string, iteration int, device_name string, port_name string, util_max double, "
                     "rated_s double, hot_s double")
    minutes = frame(spark, [("t", h, LEAF1, PORT_A, h, 0.2, 1000 * h) for h in range(10)],
                    "task_id string, iteration int, device_name string, port_name string, loss_pkts long, "
                    "minute_util_max double, rtt_max_ns long")
    members, ports = path_members(paths, its.withColumn("is_checkpoint", F.lit(False)))
    first = members.agg(F.min("_hour")).first()[0]
    got = {(r._hour - first): (round(r.typical_util_max, 6), r.typical_loss_pkts, r.typical_rtt_max_ns)
           for r in typical_levels(members, ports, counters, minutes, Rules()).collect()}
    assert got[0] == (0.15, 1.5, 1500.0)
    assert got[5] == (0.5, 5.0, 5000.0)
    assert got[9] == (0.75, 7.5, 7500.0)
    assert sorted(got) == list(range(-3, 13))  # every hour a row's stretch reaches
