"""Zhejiang cross-layer correlation tables: task paths, per-iteration network evidence and a
per-task summary. No raw files of its own; its tables are derived from the task, topology and
traffic parts.

A network input that is not in the lake yet (no traffic ingested) is read as an empty table of
its schema, so every iteration still gets a row: coverage 0, suspect_reason 'none'.
Rules: tracelake.sources.zhejiang.transforms.correlate.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.contract import TableInput, derived
from tracelake.lake import read_tables
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.clock import CST, hour_start_utc, shift_hour
from tracelake.sources.zhejiang.transforms.correlate import (
    iteration_counters,
    network_verdicts,
    task_network_summary,
    task_paths,
)

PATHS = "silver.zj_task_paths"
ITERATION_NETWORK = "gold.zj_iteration_network"
SUMMARY = "gold.zj_task_network_summary"
RATES = "silver.zj_port_rates"
ITERATION_COUNTERS = "silver.zj_iteration_counters"
MINUTE_INPUTS = ("bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link")  # small: read per task
NETWORK_INPUTS = (RATES, *MINUTE_INPUTS)


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


def rebuild_iteration_counters(
    spark: SparkSession, config: Config, changed: dict
) -> tuple[DataFrame, tuple] | None:
    """The counter evidence of the iterations that run within an hour of a changed rate hour,
    from the rate partitions of those iterations' hours only; the tasks' other iterations keep
    their stored rows. Replaces the touched tasks' partitions."""
    paths, iterations, rates, stored = read_tables(spark, config, PATHS, ITERATIONS, RATES, ITERATION_COUNTERS)
    if paths is None or iterations is None or rates is None or stored is None:
        return None
    windows = _hour_windows({values[0] for values in changed.get(RATES, ())}, timedelta(hours=1))
    near = F.lit(False)
    for start, end in windows:
        near = near | ((F.col("start_ts") < F.lit(end)) & (F.col("end_ts") > F.lit(start)))
    affected = iterations.filter(near)
    spans = affected.groupBy("task_id").agg(F.min("start_ts").alias("first"), F.max("end_ts").alias("last"))
    hours = {r.task_id: task_hours(r.first, r.last) for r in spans.collect()}
    if not hours:
        return spark.createDataFrame([], load_schema(ITERATION_COUNTERS).spark_schema()), ()
    tasks = sorted(hours)
    mine = F.col("task_id").isin(tasks)
    needed = rates.filter(F.col("hour_cst").isin(sorted(set().union(*hours.values()))))
    fresh = iteration_counters(paths.filter(mine), affected, needed)
    kept = stored.filter(mine).join(affected.select("task_id", "iteration"), ["task_id", "iteration"], "left_anti")
    return kept.unionByName(fresh.select(*kept.columns)), tuple((t,) for t in tasks)


def rebuild_iteration_network(
    spark: SparkSession, config: Config, changed: dict
) -> tuple[DataFrame, tuple] | None:
    """The rows of the tasks whose counter evidence changed or whose hours overlap a changed
    hour of the per-minute network tables, from those tasks' evidence and those hours'
    partitions only, replacing those tasks' partitions. Other tasks are neither read nor
    rewritten."""
    paths, iterations, counters = read_tables(spark, config, PATHS, ITERATIONS, ITERATION_COUNTERS)
    if paths is None or iterations is None or counters is None:
        return None
    changed_hours = {values[0] for table, parts in changed.items() if table in MINUTE_INPUTS for values in parts}
    spans = iterations.groupBy("task_id").agg(F.min("start_ts").alias("first"), F.max("end_ts").alias("last"))
    every = {r.task_id: task_hours(r.first, r.last) for r in spans.collect() if r.first and r.last}
    touched = {values[0] for values in changed.get(ITERATION_COUNTERS, ())}
    affected = {task: h for task, h in every.items() if h & changed_hours or task in touched}
    tasks = sorted(affected)
    if not tasks:
        return spark.createDataFrame([], load_schema(ITERATION_NETWORK).spark_schema()), ()
    hours = sorted(set().union(*affected.values()))
    network = [
        frame.filter(F.col("hour_cst").isin(hours)) if frame is not None
        else spark.createDataFrame([], load_schema(name).spark_schema())
        for frame, name in zip(read_tables(spark, config, *MINUTE_INPUTS), MINUTE_INPUTS)
    ]
    mine = F.col("task_id").isin(tasks)
    frame = network_verdicts(paths.filter(mine), iterations.filter(mine), counters.filter(mine), *network)
    return frame, tuple((task,) for task in tasks)


DERIVED = [
    derived(PATHS, task_paths, ("silver.zj_task_ranks",), optional=(ITERATIONS,)),
    replace(derived(ITERATION_COUNTERS, iteration_counters, (PATHS, ITERATIONS), optional=(RATES,)),
            rebuild=rebuild_iteration_counters),
    replace(derived(ITERATION_NETWORK, network_verdicts, (PATHS, ITERATIONS, ITERATION_COUNTERS),
                    optional=MINUTE_INPUTS), rebuild=rebuild_iteration_network),
    derived(SUMMARY, task_network_summary, (ITERATION_NETWORK,)),
]
