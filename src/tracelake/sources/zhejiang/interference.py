"""Zhejiang cross-task interference: who else's traffic crossed the leaf of a shared port while a
slow iteration ran there (gold.zj_iteration_interference), and per victim task who was top on the
ports its slowdowns were blamed on (gold.zj_task_interference). No raw files of its own.
Rules: tracelake.sources.zhejiang.transforms.interference.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.contract import TableInput, derived
from tracelake.api.tables import partition_predicate, read_tables
from tracelake.config import Config
from tracelake.io.frames import union_plain
from tracelake.io.staging import Scratch, stage
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.clock import cst_hour, hour_start_utc
from tracelake.sources.zhejiang.correlate import (
    FLOW,
    ITERATION_COUNTERS,
    ITERATION_NETWORK,
    PATHS,
    PORT_MINUTES,
    REACH,
    _utc_instant,
    task_hours,
)
from tracelake.sources.zhejiang.transforms.interference import (
    KEYS,
    interference,
    iteration_interference,
    leaf_traffic,
    nic_owners,
    shared_ports,
    task_interference,
)

ITERATION_INTERFERENCE = "gold.zj_iteration_interference"
TASK_INTERFERENCE = "gold.zj_task_interference"
RANKS = "silver.zj_task_ranks"
REQUIRED = (ITERATION_NETWORK, PATHS, RANKS)
OPTIONAL = (ITERATION_COUNTERS, PORT_MINUTES, FLOW)
# what a row's shared port is made of: a row is computed again when its port's changes
PORT_FACTS = (*KEYS, "start_ts", "end_ts", "slowdown_s", "is_blamed", "util_max", "minute_util_max")


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return []


def _near(hours: set[str], start: str = "start_ts", end: str = "end_ts") -> Column:
    """Rows whose window a record of one of `hours` (CST folders) can touch: the hour widened by REACH."""
    near = F.lit(False)
    for hour in sorted(hours):
        lo, hi = hour_start_utc(hour) - REACH, hour_start_utc(hour) + timedelta(hours=1) + REACH
        near = near | ((F.col(start) < F.lit(hi)) & (F.col(end) > F.lit(lo)))
    return near


def _same(left: DataFrame, right: DataFrame, columns: tuple[str, ...]) -> Column:
    """A join condition: every column equal, a null equal to a null (a port may have no counters)."""
    condition = F.lit(True)
    for c in columns:
        condition = condition & left[c].eqNullSafe(right[c])
    return condition


def rebuild_interference(
    spark: SparkSession, config: Config, changed: dict, scratch: Scratch,
) -> tuple[DataFrame, tuple | None] | None:
    """Only what changed: the shared ports of the slow iterations in the (task_id, hour_cst)
    partitions whose verdicts or evidence changed and of every task's iterations near a changed
    flow hour are found again (from gold.zj_iteration_network and the evidence of those
    iterations' partitions alone);
    the parties are computed again for the ports that are new or whose facts changed, and for
    those near a changed flow hour, from the flow partitions of the hours around them only; rows
    of ports no longer shared-and-slow go. Those rows replace theirs in the (task_id, hour_cst)
    partitions they lie in, the partitions' other rows kept. So an hourly ingest reads a few
    hours of flows, however long the lake. A table not in the lake yet, or laid out otherwise,
    is built whole; a change of the task tables (paths, ranks) builds it whole (the pipeline's
    build: those tables name no partitions)."""
    gold, paths, ranks = read_tables(spark, config, *REQUIRED)
    if gold is None or paths is None or ranks is None:
        return None
    counters, port_minutes, flows = (
        frame if frame is not None else spark.createDataFrame([], load_schema(name).spark_schema())
        for frame, name in zip(read_tables(spark, config, *OPTIONAL), OPTIONAL))
    stored, = read_tables(spark, config, ITERATION_INTERFERENCE)
    if stored is None or "hour_cst" not in stored.columns:
        return interference(gold, paths, ranks, counters, port_minutes, flows), None
    parts = sorted({tuple(values) for table in (ITERATION_NETWORK, ITERATION_COUNTERS, PORT_MINUTES)
                    for values in changed.get(table, ())}, key=str)
    flow_hours = {values[0] for values in changed.get(FLOW, ())}
    in_scope = F.expr(partition_predicate(load_schema(ITERATION_INTERFERENCE), parts)) | _near(flow_hours)
    scope = gold.filter(in_scope)
    slow_parts = sorted(tuple(r) for r in scope.filter("is_slow AND start_ts IS NOT NULL").select(
        "task_id", cst_hour(F.col("start_ts")).alias("hour_cst")).distinct().collect())
    evidence_parts = partition_predicate(load_schema(ITERATION_COUNTERS), slow_parts)
    fresh = stage(shared_ports(scope, paths, counters.filter(evidence_parts), port_minutes.filter(evidence_parts)),
                  scratch / f"{ITERATION_INTERFERENCE}.ports")  # read four times
    known = stored.filter(in_scope).select(*PORT_FACTS).distinct()
    new_facts = fresh.join(known, _same(fresh, known, PORT_FACTS), "left_anti")
    affected = new_facts.unionByName(fresh.filter(_near(flow_hours))).distinct()
    gone = known.join(fresh.select(*KEYS), KEYS, "left_anti")
    redo = affected.select(*KEYS, "start_ts").unionByName(gone.select(*KEYS, "start_ts"))
    partitions = sorted(tuple(r) for r in redo.select("task_id", cst_hour(F.col("start_ts")).alias("hour_cst"))
                        .distinct().collect())
    if not partitions:
        return spark.createDataFrame([], load_schema(ITERATION_INTERFERENCE).spark_schema()), ()
    near_spans = (affected.groupBy(cst_hour(F.col("start_ts")).alias("hour_cst"))
                  .agg(F.unix_micros(F.min("start_ts")).alias("first"), F.unix_micros(F.max("end_ts")).alias("last"))
                  .collect())
    hours = set().union(set(), *[task_hours(_utc_instant(r.first), _utc_instant(r.last)) for r in near_spans])
    traffic = leaf_traffic(flows.filter(F.col("hour_cst").isin(sorted(hours))), nic_owners(ranks, paths), affected)
    rows = iteration_interference(affected, traffic)
    kept = (stored.filter(partition_predicate(load_schema(ITERATION_INTERFERENCE), partitions))
            .join(redo.select(*KEYS), KEYS, "left_anti"))
    return union_plain(kept, rows.select(*kept.columns)), tuple(partitions)


DERIVED = [
    replace(derived(ITERATION_INTERFERENCE, interference, REQUIRED, optional=OPTIONAL), rebuild=rebuild_interference),
    derived(TASK_INTERFERENCE, task_interference, (ITERATION_INTERFERENCE,)),
]
