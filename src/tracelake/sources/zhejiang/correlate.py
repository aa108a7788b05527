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
from tracelake.sources.zhejiang.clock import CST, shift_hour
from tracelake.sources.zhejiang.transforms.correlate import iteration_network, task_network_summary, task_paths

PATHS = "silver.zj_task_paths"
ITERATION_NETWORK = "gold.zj_iteration_network"
SUMMARY = "gold.zj_task_network_summary"
NETWORK_INPUTS = ("silver.zj_port_rates", "bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link")


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


def rebuild_iteration_network(
    spark: SparkSession, config: Config, changed: dict
) -> tuple[DataFrame, tuple] | None:
    """The rows of the tasks whose hours overlap the traffic hours that changed, from those
    tasks' hours of the network tables only (their partitions), replacing those tasks' partitions.
    Tasks that do not overlap a changed hour are neither read nor rewritten."""
    paths, iterations = read_tables(spark, config, PATHS, ITERATIONS)
    if paths is None or iterations is None:
        return None
    changed_hours = {values[0] for table, parts in changed.items() if table in NETWORK_INPUTS for values in parts}
    spans = iterations.groupBy("task_id").agg(F.min("start_ts").alias("first"), F.max("end_ts").alias("last"))
    affected = {r.task_id: task_hours(r.first, r.last) for r in spans.collect() if r.first and r.last}
    affected = {task: hours for task, hours in affected.items() if hours & changed_hours}
    tasks = sorted(affected)
    if not tasks:
        return spark.createDataFrame([], load_schema(ITERATION_NETWORK).spark_schema()), ()
    hours = sorted(set().union(*affected.values()))
    network = [
        frame.filter(F.col("hour_cst").isin(hours)) if frame is not None
        else spark.createDataFrame([], load_schema(name).spark_schema())
        for frame, name in zip(read_tables(spark, config, *NETWORK_INPUTS), NETWORK_INPUTS)
    ]
    mine = F.col("task_id").isin(tasks)
    frame = iteration_network(paths.filter(mine), iterations.filter(mine), *network)
    return frame, tuple((task,) for task in tasks)


DERIVED = [
    derived(PATHS, task_paths, ("silver.zj_task_ranks",), optional=(ITERATIONS,)),
    replace(derived(ITERATION_NETWORK, iteration_network, (PATHS, ITERATIONS), optional=NETWORK_INPUTS),
            rebuild=rebuild_iteration_network),
    derived(SUMMARY, task_network_summary, (ITERATION_NETWORK,)),
]
