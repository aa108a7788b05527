"""silver.jobs: one job table across traces, with the columns every trace can fill.

Definitions (the same for every trace, so the traces compare):
  duration_s  run time, end - start. AcmeTrace: recomputed from the timestamps, because the
              released Kalos `duration` is end - submit; the released value is used only when a
              timestamp is missing (never, after the bronze gate). ITP/ElasticFlow: as released.
  queue_s     start - submit (AcmeTrace only; ITP has no start time).
  gpu_hours   duration_s × gpu_num / 3600 (0 for CPU jobs; null while duration is unknown).
ITP and ElasticFlow carry relative submission seconds only (submit_rel_s), no instants, job
types or final states. From bronze.elasticflow_jobs only variant `elasticflow` is taken: the
`testbed` file is a slice of cluster02 with no cluster of its own. Its rows are the same jobs as
bronze.itp_jobs, kept as trace `elasticflow` so each bronze table has its own rows here;
cross-trace totals should pick one of the two.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tracelake.io.frames import union_all

COLUMNS = (
    ("trace", "string"), ("cluster", "string"), ("job_id", "string"),
    ("submit_ts", "timestamp"), ("start_ts", "timestamp"), ("end_ts", "timestamp"),
    ("submit_rel_s", "bigint"), ("duration_s", "double"), ("queue_s", "double"),
    ("gpu_num", "int"), ("gpu_hours", "double"), ("job_type", "string"), ("final_state", "string"),
)


def _seconds_between(later: str, earlier: str) -> Column:
    return (F.col(later).cast("bigint") - F.col(earlier).cast("bigint")).cast("double")


def _common(df: DataFrame, **exprs: Column) -> DataFrame:
    """Exactly COLUMNS, typed; gpu_hours from duration_s and gpu_num."""
    exprs.setdefault(
        "gpu_hours", exprs["duration_s"].cast("double") * exprs["gpu_num"].cast("double") / F.lit(3600.0)
    )
    return df.select(*[
        (exprs[name] if name in exprs else F.lit(None)).cast(kind).alias(name) for name, kind in COLUMNS
    ])


def acme_to_common(acme: DataFrame) -> DataFrame:
    run_time = F.coalesce(_seconds_between("end_time", "start_time"), F.col("duration").cast("double"))
    return _common(
        acme,
        trace=F.lit("acme"), cluster=F.col("cluster"), job_id=F.col("job_id"),
        submit_ts=F.col("submit_time"), start_ts=F.col("start_time"), end_ts=F.col("end_time"),
        duration_s=run_time, queue_s=_seconds_between("start_time", "submit_time"),
        gpu_num=F.col("gpu_num"), job_type=F.col("type"), final_state=F.col("state"),
    )


def itp_to_common(itp: DataFrame, trace: str = "itp") -> DataFrame:
    """bronze.itp_jobs, or bronze.elasticflow_jobs rows (same columns for these fields)."""
    return _common(
        itp,
        trace=F.lit(trace), cluster=F.col("cluster"), job_id=F.col("job_id"),
        submit_rel_s=F.col("submission_time"), duration_s=F.col("duration"), gpu_num=F.col("num_gpu"),
    )


def elasticflow_to_common(elasticflow: DataFrame) -> DataFrame:
    return itp_to_common(elasticflow.filter(F.col("variant") == "elasticflow"), trace="elasticflow")


def unify_jobs(
    acme: DataFrame | None, itp: DataFrame | None, elasticflow: DataFrame | None
) -> DataFrame | None:
    """The common job table from whichever bronze tables exist; None when none does."""
    parts = []
    if acme is not None:
        parts.append(acme_to_common(acme))
    if itp is not None:
        parts.append(itp_to_common(itp))
    if elasticflow is not None:
        parts.append(elasticflow_to_common(elasticflow))
    return union_all(parts) if parts else None
