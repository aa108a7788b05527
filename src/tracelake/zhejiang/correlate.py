"""Zhejiang cross-layer correlation tables (issue 6): task paths, per-iteration network evidence
and a per-task summary. No raw files of its own; its tables are derived and rebuilt after the
task, topology and traffic parts (it is last in sources.zhejiang.PARTS).

A network input that is not in the lake yet (no traffic ingested) is read as an empty table of
its schema, so every iteration still gets a row: coverage 0, suspect_reason 'none'.
Rules: tracelake.transforms.zhejiang_correlate.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tracelake.config import Config
from tracelake.lake import read_tables
from tracelake.schema import load_schema
from tracelake.sources import TableInput
from tracelake.transforms.zhejiang_correlate import iteration_network, task_network_summary, task_paths

PATHS = "silver.zj_task_paths"
ITERATION_NETWORK = "gold.zj_iteration_network"
SUMMARY = "gold.zj_task_network_summary"
NETWORK_INPUTS = ("silver.zj_port_rates", "bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link")


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return []


def _or_empty(spark: SparkSession, frame: DataFrame | None, table: str) -> DataFrame:
    if frame is not None:
        return frame
    return spark.createDataFrame([], load_schema(table).spark_schema())


def _build_paths(spark: SparkSession, config: Config) -> DataFrame | None:
    ranks, iterations = read_tables(spark, config, "silver.zj_task_ranks", "silver.zj_task_iterations")
    if ranks is None:
        return None
    return task_paths(ranks, _or_empty(spark, iterations, "silver.zj_task_iterations"))


def _build_iteration_network(spark: SparkSession, config: Config) -> DataFrame | None:
    paths, iterations, *network = read_tables(spark, config, PATHS, "silver.zj_task_iterations", *NETWORK_INPUTS)
    if paths is None or iterations is None:
        return None
    rates, minutes, flows, links = (_or_empty(spark, f, t) for f, t in zip(network, NETWORK_INPUTS))
    return iteration_network(paths, iterations, rates, minutes, flows, links)


def _build_summary(spark: SparkSession, config: Config) -> DataFrame | None:
    [gold] = read_tables(spark, config, ITERATION_NETWORK)
    return None if gold is None else task_network_summary(gold)


DERIVED = [
    (PATHS, _build_paths, ("silver.zj_task_ranks", "silver.zj_task_iterations")),
    (ITERATION_NETWORK, _build_iteration_network, (PATHS, "silver.zj_task_iterations", *NETWORK_INPUTS)),
    (SUMMARY, _build_summary, (ITERATION_NETWORK,)),
]
