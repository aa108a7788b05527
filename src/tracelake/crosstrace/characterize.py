"""Gold job characterization from silver.jobs (the AcmeTrace paper's views, for every trace).

Percentiles are exact (Spark's `percentile`, linear interpolation between the two nearest
ranks, the same definition as numpy's default), so they equal a reference computed in plain
Python on the same rows. A GPU job is a job with gpu_num > 0. Traces without job types or
final states (ITP, ElasticFlow) appear under `unknown`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracelake.api.exact import exact_mean, exact_sum

UNKNOWN = "unknown"
ALL = "all"
GROUP = ["trace", "cluster", "job_type", "final_state"]
# GPU-count buckets of the characterization: (column suffix, lowest, highest GPU count)
GPU_BUCKETS = (("1", 1, 1), ("2_8", 2, 8), ("9_64", 9, 64), ("65_256", 65, 256), ("257_plus", 257, None))
QUANTILE_POINTS = 101  # 0 %, 1 %, …, 100 %


def _labelled(jobs: DataFrame) -> DataFrame:
    return jobs.withColumn("job_type", F.coalesce("job_type", F.lit(UNKNOWN))).withColumn(
        "final_state", F.coalesce("final_state", F.lit(UNKNOWN))
    )


def _is_gpu_job() -> Column:
    return F.col("gpu_num") > 0


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("bigint")


def _stats(column: str, prefix: str) -> list[Column]:
    """mean, exact median and p90 of a column (nulls ignored)."""
    return [
        exact_mean(F.col(column)).alias(f"{prefix}_mean_s"),
        F.percentile(F.col(column), F.lit(0.5)).alias(f"{prefix}_median_s"),
        F.percentile(F.col(column), F.lit(0.9)).alias(f"{prefix}_p90_s"),
    ]


def _bucket(low: int, high: int | None) -> Column:
    cond = F.col("gpu_num") >= low
    return cond if high is None else cond & (F.col("gpu_num") <= high)


def _share(part: str, keys: list[str]) -> Column:
    total = exact_sum(F.col(part), over=Window.partitionBy(*keys))
    return F.when(total > 0, F.col(part) / total)


def job_characterization(jobs: DataFrame) -> DataFrame:
    """Per trace, cluster, job type, final state: counts, shares within the trace/cluster,
    duration and queue statistics over all jobs of the group, GPU jobs per GPU-count bucket."""
    grouped = _labelled(jobs).groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("jobs"),
        _count_if(_is_gpu_job()).alias("gpu_jobs"),
        F.coalesce(exact_sum(F.col("gpu_hours")), F.lit(0.0)).alias("gpu_hours"),
        *_stats("duration_s", "duration"),
        *_stats("queue_s", "queue"),
        *[_count_if(_bucket(lo, hi)).alias(f"gpu_jobs_{name}") for name, lo, hi in GPU_BUCKETS],
    )
    keys = ["trace", "cluster"]
    return grouped.select(
        *GROUP, "jobs", "gpu_jobs", "gpu_hours",
        _share("jobs", keys).alias("job_share"),
        _share("gpu_jobs", keys).alias("gpu_job_share"),
        _share("gpu_hours", keys).alias("gpu_hour_share"),
        "duration_mean_s", "duration_median_s", "duration_p90_s",
        "queue_mean_s", "queue_median_s", "queue_p90_s",
        *[f"gpu_jobs_{name}" for name, _, _ in GPU_BUCKETS],
    )


def _gpu_job_durations() -> list[Column]:
    return [
        F.count(F.lit(1)).alias("gpu_jobs"),
        F.coalesce(exact_sum(F.col("gpu_hours")), F.lit(0.0)).alias("gpu_hours"),
        *_stats("duration_s", "duration"),
    ]


def duration_comparison(jobs: DataFrame) -> DataFrame:
    """GPU-job duration per trace and cluster, plus one `all` row per trace."""
    gpu = jobs.filter(_is_gpu_job())
    per_cluster = gpu.groupBy("trace", "cluster").agg(*_gpu_job_durations())
    per_trace = gpu.groupBy("trace").agg(*_gpu_job_durations()).withColumn("cluster", F.lit(ALL))
    return per_cluster.unionByName(per_trace)


def duration_quantiles(jobs: DataFrame, points: int = QUANTILE_POINTS) -> DataFrame:
    """The GPU-job duration CDF as exact quantiles, per trace, cluster and job type (and `all`
    types): row q holds the q/(points-1) quantile. Jobs without a duration are left out."""
    gpu = _labelled(jobs).filter(_is_gpu_job() & F.col("duration_s").isNotNull())
    levels = F.array(*[F.lit(i / (points - 1)) for i in range(points)])
    quantiles = [F.percentile(F.col("duration_s"), levels).alias("values"), F.count(F.lit(1)).alias("gpu_jobs")]
    by_type = gpu.groupBy("trace", "cluster", "job_type").agg(*quantiles)
    all_types = gpu.groupBy("trace", "cluster").agg(*quantiles).withColumn("job_type", F.lit(ALL))
    both = by_type.unionByName(all_types)
    return both.select(
        "trace", "cluster", "job_type", "gpu_jobs", F.posexplode("values").alias("q", "duration_s")
    ).select(
        "trace", "cluster", "job_type", F.col("q").cast("int").alias("q"),
        (F.col("q") / F.lit(points - 1)).alias("quantile"), "duration_s", "gpu_jobs",
    )


def gpu_count_cdf(jobs: DataFrame) -> DataFrame:
    """Per trace, cluster and GPU count: GPU jobs and GPU-hours, and the cumulative share of
    GPU jobs and of GPU time of jobs using at most that many GPUs."""
    counts = jobs.filter(_is_gpu_job()).groupBy("trace", "cluster", "gpu_num").agg(
        F.count(F.lit(1)).alias("gpu_jobs"),
        F.coalesce(exact_sum(F.col("gpu_hours")), F.lit(0.0)).alias("gpu_hours"),
    )
    keys = ["trace", "cluster"]
    upto = Window.partitionBy(*keys).orderBy("gpu_num").rowsBetween(Window.unboundedPreceding, 0)
    whole = Window.partitionBy(*keys)

    def cumulative(col: str) -> Column:
        total = exact_sum(F.col(col), over=whole)
        return F.when(total > 0, exact_sum(F.col(col), over=upto) / total)

    return counts.select(
        *keys, "gpu_num", "gpu_jobs", "gpu_hours",
        cumulative("gpu_jobs").alias("job_cdf"), cumulative("gpu_hours").alias("gpu_time_cdf"),
    )
