"""gold.zj_task_time_lost: the seconds a task lost to restarts, to slowdowns the network explains
and to the other slowdowns, and that they add up to Σ(duration - baseline) over the slow
iterations + the restarts' pauses and thrown-away steps.

(a) hand-built rows (portable); (b) a generated world whose first HF task is made to restart (its
step numbers go back R steps after step P, as a run resumed from a checkpoint logs them),
ingested whole: every part has seconds in that task; (c) the real task.
"""

from __future__ import annotations

import json
import math
import os
import re
from datetime import UTC, datetime, timedelta

import pytest
from conftest import make_config, shared
from same_rows import assert_same_rows

from tracelake.delta.catalog import read_tables
from tracelake.run.pipeline import run_ingest
from tracelake.run.registry import generate
from tracelake.sources.zhejiang.transforms.timelost import task_time_lost

T0 = datetime(2024, 5, 23, 16, 0, 0, tzinfo=UTC)
GOLD_DDL = ("task_id string, iteration int, start_ts timestamp, end_ts timestamp, duration_s double, "
            "baseline_s double, is_slow boolean, is_checkpoint boolean, suspect_reason string")
RESTARTS_DDL = "task_id string, restart int, redone_iterations int, pause_s double, redone_s double"
OUT = [
    "task_id", "window_start_ts", "window_end_ts", "wall_s", "iterations", "restarts", "redone_iterations",
    "pauses_unknown", "slow_iterations", "slow_explained_by_network", "slow_unexplained", "slow_checkpoints",
    "pause_s", "redone_s", "restart_lost_s", "network_lost_s", "unexplained_lost_s", "checkpoint_lost_s",
    "time_lost_s", "lost_share"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# ---------------------------------------------------------------- (a) hand-built

@pytest.mark.portable
def test_each_second_lost_is_counted_once_by_its_cause(spark):
    """Task a: step 2 blamed on a port (15 s over its baseline), step 3 a quiet checkpoint (8 s),
    step 4 slow with no port named (3 s), step 5 the first after a restart (start unknown: no
    duration, not slow); two restarts, one without a known pause. Task b lost nothing; task c has
    a restart and no verdicts yet."""
    gold = spark.createDataFrame([
        ("a", 1, at(0), at(10), 10.0, 10.0, False, False, "none"),
        ("a", 2, at(10), at(35), 25.0, 10.0, True, False, "access_saturation"),
        ("a", 3, at(35), at(53), 18.0, 10.0, True, True, "none"),
        ("a", 4, at(53), at(66), 13.0, 10.0, True, False, "none"),
        ("a", 5, None, at(100), None, 10.0, False, False, "none"),
        ("b", 1, at(0), at(10), 10.0, 10.0, False, False, "none"),
        ("b", 2, at(10), at(20), 10.0, 10.0, False, False, "none"),
    ], GOLD_DDL)
    restarts = spark.createDataFrame([("a", 1, 2, 40.0, 20.0), ("a", 2, 1, None, 5.0), ("c", 1, 1, 7.0, 3.0)], RESTARTS_DDL)
    got = task_time_lost(gold, restarts)
    assert got.columns == OUT
    expected = spark.createDataFrame([
        ("a", at(0), at(100), 100.0, 5, 2, 3, 1, 3, 1, 2, 1, 40.0, 25.0, 65.0, 15.0, 11.0, 8.0, 91.0, 0.91),
        ("b", at(0), at(20), 20.0, 2, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        ("c", None, None, None, 0, 1, 1, 0, 0, 0, 0, 0, 7.0, 3.0, 10.0, 0.0, 0.0, 0.0, 10.0, None),
    ], got.schema)
    assert_same_rows(got, expected, rtol=1e-12)


# ---------------------------------------------------------------- (b) a generated world with a restart

REDONE = 3  # steps gone back at the restart
ON_LOG = re.compile(r"(\[hf_trainer\.py:\d+:on_log\] .* iter: )(\d+)/")


def _restart(log: str, after: int, back: int) -> str:
    """The HF log with every step record past `after` numbered `back` lower: the run went back
    `back` steps there (no training start logged after it, so its first step's start is unknown)."""
    def renumber(m: re.Match) -> str:
        step = int(m.group(2))
        return f"{m.group(1)}{step - back if step > after else step}/"
    return ON_LOG.sub(renumber, log)


def _ends(task: dict) -> dict[int, datetime]:
    return {it["iteration"]: datetime.fromisoformat(it["end_utc"].replace("Z", "+00:00")) for it in task["iterations"]}


@pytest.fixture(scope="module")
def world(engine, tmp_path_factory):
    root = tmp_path_factory.mktemp("zj-time-lost")
    raw = root / "raw"
    generate("zhejiang", raw, scale=0.05, seed=11, hours=1, tasks=3)
    truth = json.loads((raw / "ground_truth.json").read_text(encoding="utf-8"))
    task = next(t for t in truth["tasks"] if t["style"] == "hf")
    stop = len(task["iterations"]) - 40
    [master] = (raw / "taskinfo" / task["task_id"]).glob("*-master.log")
    master.write_text(_restart(master.read_text(encoding="utf-8"), stop, REDONE), encoding="utf-8")
    config = make_config(root / "lake")
    run_ingest(engine, config, "zhejiang", str(raw))
    return config, truth, task, stop


def _tables(spark, config):
    lost, gold, restarts, summary = read_tables(spark, config, "gold.zj_task_time_lost", "gold.zj_iteration_network",
                                                "silver.zj_task_restarts", "gold.zj_task_network_summary")
    return ({r.task_id: r for r in lost.collect()}, gold.collect(), restarts.collect(),
            {r.task_id: r for r in summary.collect()})


def test_the_restart_is_accounted_from_the_log(spark, world):
    config, truth, task, stop = world
    lost, _, restarts, _ = _tables(spark, config)
    assert set(lost) == {t["task_id"] for t in truth["tasks"]}
    ends = _ends(task)
    row = lost[task["task_id"]]
    # steps stop-2..stop were thrown away; the pause is the first step after the restart (start unknown)
    assert (row.restarts, row.redone_iterations, row.pauses_unknown, row.iterations) == (
        1, REDONE, 0, len(task["iterations"]) - REDONE)
    assert row.redone_s == pytest.approx((ends[stop] - ends[stop - REDONE]).total_seconds(), abs=1e-9)
    assert row.pause_s == pytest.approx((ends[stop + 1] - ends[stop]).total_seconds(), abs=1e-9)
    assert row.restart_lost_s == row.pause_s + row.redone_s
    assert [(r.task_id, r.restart, r.stopped_iteration, r.resumed_iteration) for r in restarts] == [
        (task["task_id"], 1, stop, stop - REDONE + 1)]
    for other in truth["tasks"]:
        if other is not task:
            r = lost[other["task_id"]]
            assert (r.restarts, r.restart_lost_s, r.iterations) == (0, 0.0, len(other["iterations"]))


def test_time_lost_adds_up_to_the_slowdowns_and_the_restarts(spark, world):
    """restart + network + unexplained = Σ(duration - baseline) over slow iterations + pauses +
    thrown-away steps, per task and over the lake, with each part summed here from its own table."""
    config, truth, task, _ = world
    lost, gold, restarts, summary = _tables(spark, config)
    for task_id, row in lost.items():
        steps = [g for g in gold if g.task_id == task_id]
        slow = [g.duration_s - g.baseline_s for g in steps if g.is_slow]
        explained = [g.duration_s - g.baseline_s for g in steps if g.suspect_reason != "none"]
        others = [g.duration_s - g.baseline_s for g in steps if g.is_slow and g.suspect_reason == "none"]
        checkpoints = [g.duration_s - g.baseline_s for g in steps
                       if g.is_slow and g.suspect_reason == "none" and g.is_checkpoint]
        runs = [r for r in restarts if r.task_id == task_id]
        pauses, redone = math.fsum(r.pause_s for r in runs), math.fsum(r.redone_s for r in runs)
        assert (row.slow_iterations, row.slow_explained_by_network, row.slow_unexplained, row.slow_checkpoints) == (
            len(slow), len(explained), len(others), len(checkpoints))
        assert row.slow_explained_by_network == summary[task_id].slow_explained_by_network  # one definition
        assert row.network_lost_s == pytest.approx(math.fsum(explained), abs=1e-9)
        assert row.unexplained_lost_s == pytest.approx(math.fsum(others), abs=1e-9)
        assert row.checkpoint_lost_s == pytest.approx(math.fsum(checkpoints), abs=1e-9)
        assert row.time_lost_s == row.restart_lost_s + row.network_lost_s + row.unexplained_lost_s
        assert row.time_lost_s == pytest.approx(math.fsum(slow) + pauses + redone, abs=1e-9)
        assert row.lost_share == pytest.approx(row.time_lost_s / row.wall_s, rel=1e-12)
        # every task has injected episodes the correlation finds and a checkpoint save it does not blame
        assert row.network_lost_s > 0 and row.checkpoint_lost_s > 0 and 0 < row.lost_share < 1
    restarted = lost[task["task_id"]]
    assert restarted.restart_lost_s > 0 and restarted.network_lost_s > 0 and restarted.unexplained_lost_s > 0
    # each checkpoint save the generator slowed (one a task here, one of them within an episode
    # too, which the correlation leaves unblamed: its extra time was not spent communicating)
    assert {t: r.slow_checkpoints for t, r in lost.items()} == {
        t["task_id"]: sum(1 for it in t["iterations"] if "checkpoint" in it["causes"]) for t in truth["tasks"]} == {
        t["task_id"]: 1 for t in truth["tasks"]}
    everything = math.fsum(g.duration_s - g.baseline_s for g in gold if g.is_slow) + math.fsum(
        r.pause_s + r.redone_s for r in restarts)
    assert math.fsum(r.time_lost_s for r in lost.values()) == pytest.approx(everything, abs=1e-8)


# ---------------------------------------------------------------- (c) the real task

@pytest.fixture(scope="module")
def real(engine, tmp_path_factory):
    """The workbook and the real task (../shared/data/zhejiang, Zhejiang Lab LLM Trace Program,
    CC-BY 4.0); no traffic: the real hour does not overlap the task, so nothing is explained."""
    parts = [shared("zhejiang", name) for name in ("cluster_2000_A100.xlsx", "taskinfo")]
    root = tmp_path_factory.mktemp("zj-time-lost-real")
    (root / "raw").mkdir()
    for part in parts:
        os.symlink(part, root / "raw" / part.name)
    config = make_config(root / "lake")
    run_ingest(engine, config, "zhejiang", str(root / "raw"))
    return config


def test_the_real_task_lost_its_first_step_and_four_checkpoint_saves(spark, real):
    """No restart in 31 hours; the five slow steps: the first (4.6285 s over its baseline) and the
    checkpoint saves at steps 501, 1001, 1501, 2001 (32.881 + 33.517 + 33.843 + 34.143 s)."""
    [lost] = read_tables(spark, real, "gold.zj_task_time_lost")
    [row] = lost.collect()
    assert (row.task_id, row.iterations, row.restarts, row.slow_iterations, row.slow_explained_by_network,
            row.slow_unexplained, row.slow_checkpoints) == ("20240429-0613-4", 2436, 0, 5, 0, 5, 4)
    assert (row.restart_lost_s, row.network_lost_s) == (0.0, 0.0)
    assert row.checkpoint_lost_s == pytest.approx(134.384, abs=1e-9)
    assert row.unexplained_lost_s == row.time_lost_s == pytest.approx(139.0125, abs=1e-9)
    assert row.wall_s == pytest.approx(111_725.022, abs=1e-6)
