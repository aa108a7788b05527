"""Tables built from several traces: silver.jobs (every job source in one shape) and the gold
job characterization read from it. Rebuilt whenever one of their inputs changes, whichever
source's ingest changed it; no source imports this package."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from tracelake.api.contract import Derived, derived
from tracelake.api.source import Source
from tracelake.api.tables import read_tables
from tracelake.config import Config
from tracelake.crosstrace import characterize
from tracelake.crosstrace.failures import job_failures
from tracelake.crosstrace.unify import unify_jobs

JOB_SOURCES = ("bronze.acme_jobs", "bronze.itp_jobs", "bronze.elasticflow_jobs")


def build_silver_jobs(spark: SparkSession, config: Config) -> DataFrame | None:
    """Whichever job tables exist (unify_jobs skips absent ones); the commit's conform keeps the
    declared nullability."""
    return unify_jobs(*read_tables(spark, config, *JOB_SOURCES))


DERIVED = (
    Derived("silver.jobs", JOB_SOURCES, build_silver_jobs),
    derived("gold.jobs_characterization", characterize.job_characterization, ("silver.jobs",)),
    derived("gold.jobs_duration_comparison", characterize.duration_comparison, ("silver.jobs",)),
    derived("gold.jobs_duration_quantiles", characterize.duration_quantiles, ("silver.jobs",)),
    derived("gold.jobs_gpu_count_cdf", characterize.gpu_count_cdf, ("silver.jobs",)),
    derived("gold.jobs_failures", job_failures, ("silver.jobs",)),
)
SOURCE = Source("crosstrace", None, DERIVED, report="tracelake.crosstrace.report")
