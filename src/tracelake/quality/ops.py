"""The rows ops.quality_results receives, and the lines a run prints for warnings."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, SparkSession

from tracelake.quality.gate import RuleResult
from tracelake.schema import load_schema

PARSE_EXPECTATION = "tracelake_parse"
REPEAT_EXPECTATION = "repeated_rows"


def quality_rows(
    spark: SparkSession, run_id: str, started: datetime, table: str, results: list[RuleResult]
) -> DataFrame:
    """One row per rule result, as ops.quality_results stores them."""
    return run_quality_rows(spark, run_id, started, [(table, results)])


def run_quality_rows(
    spark: SparkSession, run_id: str, started: datetime, per_table: list[tuple[str, list[RuleResult]]]
) -> DataFrame:
    """The rows of every table's results of a run, in one frame (one commit)."""
    schema = load_schema("ops.quality_results")
    rows = [
        (run_id, started, table, r.expectation_id, r.expectation, r.kwargs_json,
         r.severity, r.success, r.element_count, r.unexpected_count, r.unexpected_percent,
         r.observed_value)
        for table, results in per_table for r in results
    ]
    return spark.createDataFrame(rows, schema.spark_schema())


def parse_result(rows_read: int, parse_failed: int) -> RuleResult:
    return RuleResult(
        expectation_id=PARSE_EXPECTATION,
        expectation=PARSE_EXPECTATION,
        kwargs_json="{}",
        severity="quarantine",
        success=parse_failed == 0,
        element_count=rows_read,
        unexpected_count=parse_failed,
        unexpected_percent=(100.0 * parse_failed / rows_read) if rows_read else None,
        observed_value=None,
    )


def repeat_result(rows_read: int, repeated: int, files: list[str]) -> RuleResult:
    """Rows that repeat an earlier row of their file exactly (a re-delivery): each is kept once,
    and the copies are counted here, a warning naming the first files that hold them."""
    return RuleResult(
        expectation_id=REPEAT_EXPECTATION,
        expectation=REPEAT_EXPECTATION,
        kwargs_json="{}",
        severity="warning",
        success=False,
        element_count=rows_read,
        unexpected_count=repeated,
        unexpected_percent=(100.0 * repeated / rows_read) if rows_read else None,
        observed_value="rows repeat an earlier row of their file exactly (each kept once), in " + ", ".join(files),
    )


def warning_lines(results: list[RuleResult]) -> tuple[str, ...]:
    """One line per warning rule that saw anything unexpected (rate, never a drop)."""
    lines = []
    for r in results:
        if r.severity != "warning" or (r.success and not r.unexpected_count):
            continue
        if r.expectation_id == REPEAT_EXPECTATION:
            lines.append(f"{r.expectation_id}: {r.unexpected_count} {r.observed_value}")
        elif r.unexpected_count is not None and r.counts != "rows":  # a share of rows would be of other things
            lines.append(f"{r.expectation_id}: {r.unexpected_count} {r.counts}")
        elif r.unexpected_count is not None and r.unexpected_percent is not None:
            lines.append(f"{r.expectation_id}: {r.unexpected_count} rows ({r.unexpected_percent:.2f}%)")
        else:
            lines.append(f"{r.expectation_id}: observed {r.observed_value}")
    return tuple(lines)
