"""gold.zj_task_time_lost: the seconds a task's run lost, and to what.

The three parts never hold the same second, so they add up:
  restarts     pause_s + redone_s of each restart (silver.zj_task_restarts): time without
               training and the steps thrown away. Neither is in an iteration of
               gold.zj_iteration_network (a pause is no step; a thrown-away record is replaced
               by the step's later one).
  network      duration_s - baseline_s of the iterations the correlation explains
               (correlate.explained_by_network, the definition of slow_explained_by_network).
  unexplained  the same over the other slow iterations: a quiet path (a checkpoint save), the
               first step after a restart (never blamed), no network data.
So time_lost_s = Σ over slow iterations (duration_s - baseline_s) + Σ pause_s + Σ redone_s.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tracelake.api.exact import exact_sum
from tracelake.sources.zhejiang.transforms.correlate import explained_by_network


def _count(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1))).cast("int")


def _seconds(value: Column) -> Column:
    """An exact sum (api.exact), 0 over no rows: every part is a number, so the total is their sum."""
    return F.coalesce(exact_sum(value), F.lit(0.0))


def task_time_lost(gold: DataFrame, restarts: DataFrame) -> DataFrame:
    """gold.zj_task_time_lost from gold.zj_iteration_network and silver.zj_task_restarts."""
    explained = explained_by_network()
    unexplained = F.col("is_slow") & ~explained
    excess = F.col("duration_s") - F.col("baseline_s")
    steps = gold.groupBy("task_id").agg(
        F.min("start_ts").alias("window_start_ts"), F.max("end_ts").alias("window_end_ts"),
        _count(F.lit(True)).alias("iterations"),
        _count(F.col("is_slow")).alias("slow_iterations"),
        _count(explained).alias("slow_explained_by_network"),
        _count(unexplained).alias("slow_unexplained"),
        _count(unexplained & F.col("is_checkpoint")).alias("slow_checkpoints"),
        _seconds(F.when(explained, excess)).alias("network_lost_s"),
        _seconds(F.when(unexplained, excess)).alias("unexplained_lost_s"),
        _seconds(F.when(unexplained & F.col("is_checkpoint"), excess)).alias("checkpoint_lost_s"),
    )
    runs = restarts.groupBy("task_id").agg(
        _count(F.lit(True)).alias("restarts"),
        F.sum("redone_iterations").cast("int").alias("redone_iterations"),
        _count(F.col("pause_s").isNull()).alias("pauses_unknown"),
        _seconds(F.col("pause_s")).alias("pause_s"),
        _seconds(F.col("redone_s")).alias("redone_s"),
    )
    # full: a restart's seconds are kept even in the moment its task has no verdicts yet
    both = steps.join(runs, "task_id", "full")

    def zero(name: str, kind: str = "int") -> Column:
        return F.coalesce(F.col(name), F.lit(0).cast(kind)).alias(name)

    counts = ["iterations", "slow_iterations", "slow_explained_by_network", "slow_unexplained", "slow_checkpoints",
              "restarts", "redone_iterations", "pauses_unknown"]
    seconds = ["pause_s", "redone_s", "network_lost_s", "unexplained_lost_s", "checkpoint_lost_s"]
    both = both.select("task_id", "window_start_ts", "window_end_ts", *[zero(c) for c in counts],
                       *[zero(c, "double") for c in seconds])
    restart_lost = F.col("pause_s") + F.col("redone_s")
    total = restart_lost + F.col("network_lost_s") + F.col("unexplained_lost_s")
    wall = (F.unix_micros("window_end_ts") - F.unix_micros("window_start_ts")) / 1e6
    return both.select(
        "task_id", "window_start_ts", "window_end_ts", wall.alias("wall_s"),
        "iterations", "restarts", "redone_iterations", "pauses_unknown",
        "slow_iterations", "slow_explained_by_network", "slow_unexplained", "slow_checkpoints",
        "pause_s", "redone_s", restart_lost.alias("restart_lost_s"), "network_lost_s", "unexplained_lost_s",
        "checkpoint_lost_s", total.alias("time_lost_s"),
        F.when(wall > 0, total / wall).alias("lost_share"),
    )
