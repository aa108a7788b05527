"""Zhejiang cross-layer correlation tables: task paths, per-iteration network evidence and a
per-task summary. No raw files of its own; its tables are derived from the task, topology and
traffic parts.

A network input that is not in the lake yet (no traffic ingested) is read as an empty table of
its schema, so every iteration still gets a row: coverage 0, suspect_reason 'none'.
Rules: tracelake.sources.zhejiang.transforms.correlate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.contract import PartialBuild, TableInput, derived
from tracelake.lake import read_tables
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.clock import CST, hour_start_utc, shift_hour
from tracelake.sources.zhejiang.transforms.correlate import (
    iteration_counters,
    iteration_flows,
    iteration_port_minutes,
    network_verdicts,
    task_network_summary,
    task_paths,
)

PATHS = "silver.zj_task_paths"
ITERATION_NETWORK = "gold.zj_iteration_network"
SUMMARY = "gold.zj_task_network_summary"
RATES = "silver.zj_port_rates"
MINUTE, FLOW, LINK = "bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link"
ITERATION_COUNTERS = "silver.zj_iteration_counters"
PORT_MINUTES = "silver.zj_iteration_port_minutes"
ITERATION_FLOWS = "silver.zj_iteration_flows"
EVIDENCE = (ITERATION_COUNTERS, PORT_MINUTES, ITERATION_FLOWS)  # network_verdicts' order


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return []


ITERATIONS = "silver.zj_task_iterations"


def task_hours(first: datetime, last: datetime) -> set[str]:
    """The CST hour folders whose records can touch a task running from `first` to `last` (UTC),
    with the hour on each side: a rate row or a minute record at an hour's edge covers time
    just across it."""
    start = (first.replace(tzinfo=first.tzinfo or UTC).astimezone(CST) - timedelta(hours=1)).strftime("%Y%m%d%H")
    end = (last.replace(tzinfo=last.tzinfo or UTC).astimezone(CST) + timedelta(hours=1)).strftime("%Y%m%d%H")
    hours, hour = set(), start
    while hour <= end:
        hours.add(hour)
        hour = shift_hour(hour, 1)
    return hours


def _hour_windows(hours: set[str], margin: timedelta) -> list[tuple[datetime, datetime]]:
    """The UTC spans of CST hour folders, widened by `margin` on each side."""
    return [(hour_start_utc(h) - margin, hour_start_utc(h) + timedelta(hours=1) + margin) for h in sorted(hours)]


def _near_changed_hours(iterations: DataFrame, changed_hours: set[str]) -> tuple[DataFrame, dict[str, set[str]]]:
    """(the iterations within an hour of a changed hour, per task the hours their records can
    lie in): a record in a changed hour can only touch those iterations."""
    near = F.lit(False)
    for start, end in _hour_windows(changed_hours, timedelta(hours=1)):
        near = near | ((F.col("start_ts") < F.lit(end)) & (F.col("end_ts") > F.lit(start)))
    affected = iterations.filter(near)
    spans = affected.groupBy("task_id").agg(F.min("start_ts").alias("first"), F.max("end_ts").alias("last"))
    return affected, {r.task_id: task_hours(r.first, r.last) for r in spans.collect() if r.first and r.last}


def _evidence_rebuild(table: str, inputs: tuple[str, ...], compute: Callable[..., DataFrame]) -> PartialBuild:
    """The rebuild of a per-iteration evidence table (silver.zj_iteration_*): the iterations
    within an hour of a changed hour of its `inputs` are recomputed from those inputs' partitions
    of the hours around them only; the tasks' other iterations keep their stored rows. Replaces
    the touched tasks' partitions. A table not in the lake yet (a lake made before it existed)
    is built whole."""

    def rebuild(spark: SparkSession, config: Config, changed: dict) -> tuple[DataFrame, tuple] | None:
        paths, iterations, stored = read_tables(spark, config, PATHS, ITERATIONS, table)
        if paths is None or iterations is None:
            return None
        frames = [frame if frame is not None else spark.createDataFrame([], load_schema(name).spark_schema())
                  for frame, name in zip(read_tables(spark, config, *inputs), inputs)]
        if stored is None:
            tasks = sorted(r.task_id for r in iterations.select("task_id").distinct().collect())
            return compute(paths, iterations, *frames), tuple((t,) for t in tasks)
        affected, hours = _near_changed_hours(iterations, {v[0] for t in inputs for v in changed.get(t, ())})
        if not hours:
            return spark.createDataFrame([], load_schema(table).spark_schema()), ()
        tasks = sorted(hours)
        mine, needed = F.col("task_id").isin(tasks), sorted(set().union(*hours.values()))
        fresh = compute(paths.filter(mine), affected, *[f.filter(F.col("hour_cst").isin(needed)) for f in frames])
        kept = stored.filter(mine).join(affected.select("task_id", "iteration"), ["task_id", "iteration"], "left_anti")
        return kept.unionByName(fresh.select(*kept.columns)), tuple((t,) for t in tasks)

    return rebuild


def rebuild_iteration_network(
    spark: SparkSession, config: Config, changed: dict
) -> tuple[DataFrame, tuple] | None:
    """The rows of the tasks whose evidence changed, from that evidence alone (the per-iteration
    tables), replacing those tasks' partitions. No network table is read: the cost follows the
    task's iterations, not the hours of traffic it ran through."""
    frames = read_tables(spark, config, PATHS, ITERATIONS, *EVIDENCE)
    if any(f is None for f in frames):
        return None
    tasks = sorted({values[0] for table in EVIDENCE for values in changed.get(table, ())})
    if not tasks:
        return spark.createDataFrame([], load_schema(ITERATION_NETWORK).spark_schema()), ()
    mine = F.col("task_id").isin(tasks)
    return network_verdicts(*[f.filter(mine) for f in frames]), tuple((task,) for task in tasks)


DERIVED = [
    derived(PATHS, task_paths, ("silver.zj_task_ranks",), optional=(ITERATIONS,)),
    replace(derived(ITERATION_COUNTERS, iteration_counters, (PATHS, ITERATIONS), optional=(RATES,)),
            rebuild=_evidence_rebuild(ITERATION_COUNTERS, (RATES,), iteration_counters)),
    replace(derived(PORT_MINUTES, iteration_port_minutes, (PATHS, ITERATIONS), optional=(MINUTE, FLOW)),
            rebuild=_evidence_rebuild(PORT_MINUTES, (MINUTE, FLOW), iteration_port_minutes)),
    replace(derived(ITERATION_FLOWS, iteration_flows, (PATHS, ITERATIONS), optional=(FLOW, LINK)),
            rebuild=_evidence_rebuild(ITERATION_FLOWS, (FLOW, LINK), iteration_flows)),
    replace(derived(ITERATION_NETWORK, network_verdicts, (PATHS, ITERATIONS, *EVIDENCE)),
            rebuild=rebuild_iteration_network),
    derived(SUMMARY, task_network_summary, (ITERATION_NETWORK,)),
]
