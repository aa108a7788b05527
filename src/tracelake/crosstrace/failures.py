"""gold.jobs_failures from silver.jobs: how often jobs fail, what the failures cost in GPU time,
and how long failed jobs ran first (the AcmeTrace paper: most failures come early, infrastructure
failures cost the most GPU time).

A failed job ended FAILED (its own error) or NODE_FAIL (its node's: infrastructure, as far as the
states tell). Shares are of the jobs that ended: a RUNNING job has no outcome yet. Only a trace that
records final states has rows (AcmeTrace; ITP and ElasticFlow record none). Percentiles are exact,
as in characterize.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tracelake.api.exact import exact_sum
from tracelake.crosstrace.characterize import ALL, UNKNOWN

FAILED_STATES = ("FAILED", "NODE_FAIL")
INFRASTRUCTURE = "NODE_FAIL"
EARLY_S = 600  # "early": within the first 10 minutes of run time
QUANTILES = ((25, 0.25), (50, 0.5), (75, 0.75), (90, 0.9))


def _count_if(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1)))


def _hours(condition: Column) -> Column:
    return F.coalesce(exact_sum(F.when(condition, F.col("gpu_hours"))), F.lit(0.0))


def _share(part: str, whole: str) -> Column:
    return F.when(F.col(whole) > 0, F.col(part) / F.col(whole))


def _figures() -> list[Column]:
    failed = F.col("final_state").isin(*FAILED_STATES)
    node = F.col("final_state") == INFRASTRUCTURE
    failed_run = F.when(failed, F.col("duration_s"))
    return [
        F.count(F.lit(1)).alias("jobs"),
        _count_if(failed).alias("failed_jobs"),
        _count_if(node).alias("node_fail_jobs"),
        _hours(F.lit(True)).alias("gpu_hours"),
        _hours(failed).alias("failed_gpu_hours"),
        _hours(node).alias("node_fail_gpu_hours"),
        *[F.percentile(failed_run, F.lit(q)).alias(f"failed_duration_p{p}_s") for p, q in QUANTILES],
        _count_if(failed & (F.col("duration_s") <= EARLY_S)).alias("_early"),
        F.count(failed_run).alias("_timed"),
        F.percentile(F.when(F.col("final_state") == "COMPLETED", F.col("duration_s")), F.lit(0.5))
        .alias("completed_duration_p50_s"),
    ]


def job_failures(jobs: DataFrame) -> DataFrame:
    """Per trace, cluster and job type (and `all` types): ended jobs, the failed share of them and
    of their GPU time, the run time before failure as quantiles, the share of failures within
    EARLY_S, and the completed jobs' median run time to compare with."""
    ended = (jobs.filter(F.col("final_state").isNotNull() & (F.col("final_state") != "RUNNING"))
             .withColumn("job_type", F.coalesce("job_type", F.lit(UNKNOWN))))
    by_type = ended.groupBy("trace", "cluster", "job_type").agg(*_figures())
    all_types = ended.groupBy("trace", "cluster").agg(*_figures()).withColumn("job_type", F.lit(ALL))
    both = by_type.unionByName(all_types)
    return both.select(
        "trace", "cluster", "job_type", "jobs", "failed_jobs", "node_fail_jobs",
        _share("failed_jobs", "jobs").alias("failed_job_share"),
        "gpu_hours", "failed_gpu_hours", "node_fail_gpu_hours",
        _share("failed_gpu_hours", "gpu_hours").alias("failed_gpu_hour_share"),
        *[f"failed_duration_p{p}_s" for p, _ in QUANTILES],
        _share("_early", "_timed").alias(f"failed_within_{EARLY_S // 60}min_share"),
        "completed_duration_p50_s",
    )
