"""Zhejiang cross-layer correlation tables: task paths, per-iteration network evidence, a
per-task summary and the time each task lost. No raw files of its own; its tables are derived
from the task, topology and traffic parts.

A network input that is not in the lake yet (no traffic ingested) is read as an empty table of
its schema, so every iteration still gets a row: coverage 0, suspect_reason 'none'.
Rules: tracelake.sources.zhejiang.transforms.correlate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from tracelake.api.contract import PartialBuild, TableInput, derived
from tracelake.api.tables import lake_holds, partition_predicate, read_tables
from tracelake.config import Config
from tracelake.io.frames import union_plain
from tracelake.io.staging import Scratch, stage
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.clock import CST, cst_hour, hour_start_utc, shift_hour
from tracelake.sources.zhejiang.transforms.correlate import (
    Rules,
    iteration_counters,
    iteration_flows,
    iteration_port_minutes,
    may_blame,
    network_hour,
    network_verdicts,
    path_port_evidence,
    task_network_summary,
    task_paths,
    verdicts,
)
from tracelake.sources.zhejiang.transforms.timelost import task_time_lost

PATHS = "silver.zj_task_paths"
ITERATION_NETWORK = "gold.zj_iteration_network"
SUMMARY = "gold.zj_task_network_summary"
TIME_LOST, RESTARTS = "gold.zj_task_time_lost", "silver.zj_task_restarts"
RATES = "silver.zj_port_rates"
MINUTE, FLOW, LINK = "bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link"
ITERATION_COUNTERS = "silver.zj_iteration_counters"
PORT_MINUTES = "silver.zj_iteration_port_minutes"
ITERATION_FLOWS = "silver.zj_iteration_flows"
EVIDENCE = (ITERATION_COUNTERS, PORT_MINUTES, ITERATION_FLOWS)  # network_verdicts' order


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return []


ITERATIONS = "silver.zj_task_iterations"


# How far outside its CST hour folder a record of that folder can cover time: its instant may lie
# up to 5 minutes outside (further raises the bronze warning *_within_hour_folder /
# samples_in_hour_folder), and its span reaches back from there at most a minute (port.csv,
# flow and link minutes) or 2 x MAX_GAP_S (a rate interval: a longer gap has no rate).
REACH = timedelta(minutes=10)


def task_hours(first: datetime, last: datetime) -> set[str]:
    """The CST hour folders whose records can touch the time from `first` to `last` (UTC): the
    hours that span widened by REACH on each side overlaps."""
    def folder(instant: datetime) -> str:
        return instant.replace(tzinfo=instant.tzinfo or UTC).astimezone(CST).strftime("%Y%m%d%H")

    hours, hour, end = set(), folder(first - REACH), folder(last + REACH)
    while hour <= end:
        hours.add(hour)
        hour = shift_hour(hour, 1)
    return hours


def _near_changed_hours(
    iterations: DataFrame, changed_hours: set[str],
) -> tuple[DataFrame, list[tuple], set[str], datetime | None]:
    """(the iterations that a record of a changed hour can touch: those overlapping the hour
    widened by REACH; the (task_id, hour_cst) partitions they lie in; the hours whose
    records can touch them; the first of them's start). One small query over the iterations."""
    near = F.lit(False)
    for hour in sorted(changed_hours):
        start = hour_start_utc(hour) - REACH
        end = hour_start_utc(hour) + timedelta(hours=1) + REACH
        near = near | ((F.col("start_ts") < F.lit(end)) & (F.col("end_ts") > F.lit(start)))
    affected = iterations.filter(near)
    spans = (affected.groupBy("task_id", cst_hour(F.col("start_ts")).alias("hour_cst"))
             .agg(F.unix_micros(F.min("start_ts")).alias("first"), F.unix_micros(F.max("end_ts")).alias("last"))
             .collect())
    partitions = sorted((r.task_id, r.hour_cst) for r in spans)
    hours = set().union(*[task_hours(_utc_instant(r.first), _utc_instant(r.last)) for r in spans])
    return affected, partitions, hours, min((_utc_instant(r.first) for r in spans), default=None)


def _utc_instant(micros: int) -> datetime:
    """An instant collected as epoch microseconds: a collected timestamp is a naive datetime in
    the Python process's local zone (Spark Connect, measured), not UTC."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def _evidence_rebuild(table: str, inputs: tuple[str, ...], compute: Callable[..., DataFrame],
                      ends: Mapping[str, str] | None = None) -> PartialBuild:
    """The rebuild of a per-iteration evidence table (silver.zj_iteration_*): the iterations a
    changed hour of its `inputs` can touch are recomputed from those inputs' partitions of the
    hours around them only, and replace their rows in the (task_id, hour_cst) partitions
    they lie in; the other rows of those partitions are kept. So an hourly ingest reads and
    writes a few hours of evidence, however long the task has run. `ends` names an input's
    column where a record's span ends: its records ending before the first of those iterations
    starts are left out, as no overlap could take them (the hour before a changed hour is read
    for its last minutes only; measured on the 15th hour of a two-task day, in process, 2 runs
    each: silver.zj_iteration_counters took 2.2-2.3 s of the engine's CPU against 2.5-2.8 s,
    the same rows). A table not in the lake yet, or laid out
    before its hour partition, is built whole."""

    def rebuild(spark: SparkSession, config: Config, changed: dict, scratch: Scratch) -> tuple[DataFrame, tuple | None] | None:
        paths, iterations, stored = read_tables(spark, config, PATHS, ITERATIONS, table)
        if paths is None or iterations is None:
            return None
        frames = [frame if frame is not None else spark.createDataFrame([], load_schema(name).spark_schema())
                  for frame, name in zip(read_tables(spark, config, *inputs), inputs)]
        if stored is None or "hour_cst" not in stored.columns:
            return compute(paths, iterations, *frames), None
        affected, partitions, hours, first = _near_changed_hours(iterations, {v[0] for t in inputs for v in changed.get(t, ())})
        if not partitions:
            return spark.createDataFrame([], load_schema(table).spark_schema()), ()
        tasks = sorted({task for task, _ in partitions})
        near = [f.filter(F.col("hour_cst").isin(sorted(hours))) for f in frames]
        near = [f.filter(F.col(ends[name]) > F.lit(first)) if name in (ends or {}) else f for f, name in zip(near, inputs)]
        fresh = compute(paths.filter(F.col("task_id").isin(tasks)), affected, *near)
        kept = (stored.filter(partition_predicate(load_schema(table), partitions))
                .join(affected.select("task_id", "iteration"), ["task_id", "iteration"], "left_anti"))
        return union_plain(kept, fresh.select(*kept.columns)), tuple(partitions)

    return rebuild


def _around(parts: set[tuple], hours: int) -> set[tuple]:
    """The (task_id, hour_cst) partitions within `hours` hours of one of `parts`."""
    return {(task, shift_hour(hour, d)) for task, hour in parts if hour is not None for d in range(-hours, hours + 1)}


def _among(parts: set[tuple]) -> Column:
    """A filter: the rows of these (task_id, hour_cst) partitions."""
    return F.expr(partition_predicate(load_schema(ITERATION_NETWORK), sorted(parts, key=str)))


def _judged_partitions(iterations: DataFrame, changed: set[tuple], rules: Rules) -> tuple[set[tuple], set[tuple]]:
    """(the partitions of gold.zj_iteration_network whose rows evidence of the `changed`
    partitions can move; the partitions of the iterations those rows' centred windows read).
    A row moves when its own evidence changed, when it lies within baseline_k records of such
    an iteration (the windows of comm_busy_baseline_s), or when a port may be blamed for it and
    its typical levels read a changed hour (within typical_hours of it). Two small queries over
    the tasks' iterations."""
    window = Window.partitionBy("task_id", "restarts_before").orderBy("iteration").rowsBetween(
        -rules.baseline_k, rules.baseline_k)
    its = iterations.select("task_id", "iteration", "restarts_before", network_hour().alias("hour_cst"))

    def within(parts: set[tuple], also: Column | None = None) -> set[tuple]:
        """The partitions of the iterations within baseline_k records of one in `parts` (or `also`)."""
        near = its.select("task_id", "hour_cst", (F.lit(False) if also is None else also).alias("_also"),
                          F.max(_among(parts).cast("int")).over(window).alias("_near"))
        return {tuple(r) for r in near.filter("_also OR _near = 1").select("task_id", "hour_cst").distinct().collect()}

    moved = within(changed, _among(_around(changed, rules.typical_hours)))
    return moved, within(moved)


def rebuild_iteration_network(
    spark: SparkSession, config: Config, changed: dict, scratch: Scratch
) -> tuple[DataFrame, tuple | None] | None:
    """The partitions whose rows the changed evidence partitions can move (_judged_partitions),
    from the evidence of the hours around them alone (the per-iteration tables; no network
    table is read). Within them only the iterations of the changed partitions and those a port
    can be blamed for (may_blame) are judged from the evidence; the others keep the
    per-iteration figures of the stored rows, and the rows their windows read come from the
    store too. So an hourly ingest judges a few hours of a task, however long it has run. A
    table not in the lake yet or laid out otherwise, or a change of the iterations (the
    pipeline builds it whole then anyway: the paths change with them), builds it whole."""
    frames = read_tables(spark, config, PATHS, ITERATIONS, *EVIDENCE)
    if any(f is None for f in frames):
        return None
    if ITERATIONS in changed:
        return network_verdicts(*frames), None
    parts = {values for table in EVIDENCE for values in changed.get(table, ())}
    tasks = sorted({values[0] for values in parts})
    if not tasks and lake_holds(spark, config, ITERATION_NETWORK):
        # an hour without a task's evidence: no snapshot or schema of the stored table to read
        return spark.createDataFrame([], load_schema(ITERATION_NETWORK).spark_schema()), ()
    stored, = read_tables(spark, config, ITERATION_NETWORK)
    if stored is None or "hour_cst" not in stored.columns:
        return network_verdicts(*frames), None
    paths, iterations, counters, port_minutes, flows = (f.filter(F.col("task_id").isin(tasks)) for f in frames)
    rules = Rules()
    moved, read = _judged_partitions(iterations, parts, rules)
    iterations = iterations.withColumn("hour_cst", network_hour())
    context = iterations.filter(_among(read))
    judged = context.filter(_among(parts)).select("task_id", "iteration")
    blamable = may_blame(context.drop("hour_cst"), rules).join(
        context.filter(_among(moved)).select("task_id", "iteration"), ["task_id", "iteration"], "left_semi")
    only = stage(judged.unionByName(blamable), scratch / f"{ITERATION_NETWORK}.iterations")  # read three times
    known = stored.filter(_among(read)).join(only, ["task_id", "iteration"], "left_anti")
    typical = _around(moved, rules.typical_hours)
    ports = stage(path_port_evidence(paths, iterations.filter(_among(typical)).drop("hour_cst"),
                                     counters.filter(_among(typical)), port_minutes.filter(_among(typical)),
                                     rules, only=only),
                  scratch / f"{ITERATION_NETWORK}.ports")
    rows = verdicts(paths, context.drop("hour_cst"), ports, flows.filter(_among(read)), rules, known=known)
    return rows.filter(_among(moved)), tuple(sorted(moved, key=str))


DERIVED = [
    derived(PATHS, task_paths, ("silver.zj_task_ranks",), optional=(ITERATIONS,)),
    replace(derived(ITERATION_COUNTERS, iteration_counters, (PATHS, ITERATIONS), optional=(RATES,)),
            rebuild=_evidence_rebuild(ITERATION_COUNTERS, (RATES,), iteration_counters, {RATES: "save_time_utc"})),
    replace(derived(PORT_MINUTES, iteration_port_minutes, (PATHS, ITERATIONS), optional=(MINUTE, FLOW)),
            rebuild=_evidence_rebuild(PORT_MINUTES, (MINUTE, FLOW), iteration_port_minutes,
                                      {MINUTE: "time", FLOW: "time"})),
    replace(derived(ITERATION_FLOWS, iteration_flows, (PATHS, ITERATIONS), optional=(FLOW, LINK)),
            rebuild=_evidence_rebuild(ITERATION_FLOWS, (FLOW, LINK), iteration_flows,
                                      {FLOW: "time", LINK: "start_time"})),
    replace(derived(ITERATION_NETWORK, network_verdicts, (PATHS, ITERATIONS, *EVIDENCE)),
            rebuild=rebuild_iteration_network),
    derived(SUMMARY, task_network_summary, (ITERATION_NETWORK,)),
    derived(TIME_LOST, task_time_lost, (ITERATION_NETWORK,), optional=(RESTARTS,)),
]
