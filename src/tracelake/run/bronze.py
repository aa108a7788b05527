"""One ingest step for one table: read → parse → gate → quarantine, MERGE, record results.

Order matters for the guarantees: the gate runs before anything is written, so a critical
failure commits nothing to the target (only its results go to ops.quality_results); the target
then changes in a single commit: a MERGE on the key, or for a time-partitioned table the
replacement of exactly the partitions its files belong to (their partition values come from the
files, so a partition whose every row was set aside is emptied, not left stale).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.delta import commit as lake
from tracelake.delta.staged_files import commits_staged
from tracelake.errors import QualityGateFailed, TracelakeError
from tracelake.io.parse import (
    FLOAT_TYPES,
    PARSE_ERRORS,
    ROW_ID,
    Checked,
    RawFile,
    check_header,
    parse_lines,
    read_raw_lines,
    settle,
    stage,
    unreadable,
)
from tracelake.quality.gate import GateOutcome, RuleResult, expectation_id, load_suite, run_gate
from tracelake.quality.rowrules import rejects
from tracelake.schema import TableSchema, load_schema, quarantine_of

PARSE_EXPECTATION = "tracelake_parse"


@dataclass(frozen=True)
class Run:
    """Identity of one CLI/job invocation, shared by every table it writes."""

    run_id: str
    started: datetime
    staging: Path

    @classmethod
    def new(cls, config: Config) -> Run:
        """A run's identity and its staging folder, which must be a folder: this process unpacks
        raw files there and the engine reads them (a URL such as the default <lake>/_staging of an
        s3:// lake would become a local folder named `s3:/…`)."""
        if "://" in config.staging_dir:
            raise TracelakeError(
                f"staging folder {config.staging_dir} is a URL: an ingest unpacks raw files there, so it must be "
                "a folder this process and the engine both see (--conf staging_dir=/data/staging, deploy/README.md)"
            )
        started = datetime.now(UTC).replace(microsecond=0)
        run_id = f"{started:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        return cls(run_id, started, Path(config.staging_dir) / run_id)

    def cleanup(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


@dataclass(frozen=True)
class TableStats:
    table: str
    rows_read: int
    rows_kept: int
    rows_quarantined: int
    warnings: tuple[str, ...]
    critical_failures: tuple[str, ...] = ()
    partitions: tuple[tuple, ...] | None = None  # what changed: these partitions; None = the table


def _materialize(spark: SparkSession, df: DataFrame, run: Run, name: str) -> DataFrame:
    """Parse once: later counts, GX queries and the MERGE read the same stored rows."""
    return stage(df, run.staging / f"{name}.parquet")


def quality_rows(
    spark: SparkSession, run: Run, table: str, results: list[RuleResult]
) -> DataFrame:
    schema = load_schema("ops.quality_results")
    rows = [
        (run.run_id, run.started, table, r.expectation_id, r.expectation, r.kwargs_json,
         r.severity, r.success, r.element_count, r.unexpected_count, r.unexpected_percent,
         r.observed_value)
        for r in results
    ]
    return spark.createDataFrame(rows, schema.spark_schema())


def _record(spark: SparkSession, config: Config, run: Run, table: str, gate: GateOutcome) -> None:
    ops = load_schema("ops.quality_results")
    lake.append(spark, config, ops, quality_rows(spark, run, table, gate.results))


def _parse_result(rows_read: int, parse_failed: int) -> RuleResult:
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


def _warnings(results: list[RuleResult]) -> tuple[str, ...]:
    """One line per warning rule that saw anything unexpected (rate, never a drop)."""
    lines = []
    for r in results:
        if r.severity != "warning" or (r.success and not r.unexpected_count):
            continue
        if r.unexpected_count is not None and r.unexpected_percent is not None:
            lines.append(f"{r.expectation_id}: {r.unexpected_count} rows ({r.unexpected_percent:.2f}%)")
        else:
            lines.append(f"{r.expectation_id}: observed {r.observed_value}")
    return tuple(lines)


def split_by_gate(
    spark: SparkSession, good: DataFrame, gate: GateOutcome
) -> tuple[DataFrame, DataFrame]:
    """(kept, set aside with reasons): rows a quarantine rule rejects, by its column (no row id
    reaches the driver) or, for the rule types GX alone evaluates, by the ids it named."""
    if not gate.sets_rows_aside:  # the common case: no join, no extra scan
        return good, good.limit(0).withColumn("reasons", F.array().cast("array<string>"))
    parts = [F.when(column, F.lit(ident)) for ident, column in gate.rejected_by.items()]
    reasons = F.array_compact(F.array(*parts)) if parts else F.array().cast("array<string>")
    tagged = good.select("*", reasons.alias("reasons"))
    if gate.quarantined:
        named = spark.createDataFrame(
            [(rid, sorted(set(ids))) for rid, ids in gate.quarantined.items()],
            f"{ROW_ID} string, _named array<string>",
        )
        tagged = tagged.join(named, ROW_ID, "left").select(
            *good.columns, F.concat(F.col("reasons"), F.coalesce(F.col("_named"), F.array().cast("array<string>")))
            .alias("reasons"))
    tagged = tagged.select(*good.columns, F.array_sort(F.array_distinct(F.col("reasons"))).alias("reasons"))
    set_aside = F.size(F.col("reasons")) > 0
    return tagged.filter(~set_aside).select(*good.columns), tagged.filter(set_aside)


def file_partitions(files: list[RawFile], schema: TableSchema) -> tuple[tuple, ...] | None:
    """The partitions a partitioned table's files fill, from the constants their paths imply
    (e.g. hour_cst from the hour folder); None for an unpartitioned table."""
    if not schema.partition_by:
        return None
    missing = [f.name for f in files if any(c not in f.constants for c in schema.partition_by)]
    if missing:
        raise TracelakeError(f"{schema.full_name}: no {', '.join(schema.partition_by)} for {missing[0]}")
    return tuple(sorted({tuple(f.constants[c] for c in schema.partition_by) for f in files}))


def parse_delimited(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """The default parser: delimited text files with the schema's fixed raw header."""
    for raw in files:
        check_header(raw, schema)
    return parse_lines(read_raw_lines(spark, files, schema), schema)


@dataclass
class PreparedTable:
    """A bronze table parsed and gated, nothing written yet (see prepare_table)."""

    table: str
    schema: TableSchema
    files: list[RawFile]
    good: DataFrame
    bad: DataFrame
    gate: GateOutcome
    rows_read: int
    parse_failed: int
    known: tuple[int, int] | None = None  # (rows kept, rows set aside by rules), counted while staged


def _row_flags(suite: dict) -> tuple[dict[str, dict], bool]:
    """({flag column: expectation} for the quarantine rules evaluated as columns, whether any
    other quarantine rule needs GX and so the rows' ids)."""
    flags, by_gx = {}, False
    for exp in suite.get("expectations", []):
        if exp["meta"]["severity"] != "quarantine":
            continue
        if rejects(exp) is None:
            by_gx = True
        else:
            flags[f"_q{len(flags)}"] = exp
    return flags, by_gx


def _failed_values(schema: TableSchema, failed: Column) -> list[Column]:
    """The typed columns as staged: a float is null in a row that failed to parse. Such a row
    can hold NaN or ±Infinity there (the value its problem names), and a filter does not keep a
    value from the expressions above it: Sail evaluates a rule's condition on the rows the filter
    drops too (measured: the NaN of a quarantined row failed the gate's cast in an
    unexpected_rows query, docs/engine-notes.md). Every other typed value of a failed row is
    null or a valid value of its type."""
    return [F.when(~failed, F.col(c.name)).alias(c.name)
            if c.type in FLOAT_TYPES and c.name not in schema.partition_by else F.col(c.name)
            for c in schema.data_columns]


def _staged_form(parsed: DataFrame, schema: TableSchema, flags: dict[str, dict], row_ids: bool) -> DataFrame:
    """What is staged of a parse, in the pass that stores it: the typed columns (a failed row's
    floats null, see _failed_values), each quarantine rule's rejects as a flag column (evaluated
    on those values, for the rows that parsed), and the raw line and values only for rows that
    failed or were flagged (building them for every row costs more than the parse; a rule GX
    evaluates needs them all, and the row ids)."""
    failed = F.size(F.col(PARSE_ERRORS)) > 0
    flag_cols = [F.coalesce(rejects(exp, domain=~failed), F.lit(False)).alias(name) for name, exp in flags.items()]
    bad = failed
    for name in flags:
        bad = bad | F.col(name)
    keep_raw = F.lit(True) if row_ids else bad
    data = [c.name for c in schema.data_columns]
    ids = [ROW_ID] if row_ids else []
    values = parsed.select(*_failed_values(schema, failed), "source_file", "raw_line", "raw_values_json", *ids,
                           PARSE_ERRORS)
    flagged = values.select("*", *flag_cols)
    return flagged.select(*data, "source_file", F.when(keep_raw, F.col("raw_line")).alias("raw_line"),
                          F.when(keep_raw, F.col("raw_values_json")).alias("raw_values_json"),
                          *ids, PARSE_ERRORS, *flags)


def prepare_table(
    spark: SparkSession, config: Config, run: Run, table: str, files: list[RawFile],
    parser: Callable[[SparkSession, list[RawFile], TableSchema], DataFrame | Checked] | None = None,
) -> PreparedTable:
    """Parse and gate one bronze table's files, writing nothing: a run prepares every table
    before it commits the first, so a bad file found late leaves no table of the run half-done.

    `parser` turns the files into the parser contract (contract.Parser); the gate is the same for
    every source. The parse is stored once, with the quarantine rules' verdicts; counts and the
    gate read the stored rows. A critical rule raises here, with its results recorded."""
    schema = load_schema(table)
    suite = load_suite(table)
    flags, by_gx = _row_flags(suite)
    try:
        parsed, _ = settle((parser or parse_delimited)(spark, files, schema), run.staging / f"{table}.parquet",
                           lambda frame: _staged_form(frame, schema, flags, by_gx))
    except TracelakeError:
        raise
    except Exception:  # the engine failed reading: name the file if it is one a user can fix
        if (problem := unreadable(files)) is not None:
            raise problem from None
        raise
    failed = F.size(PARSE_ERRORS) > 0
    flagged = reduce(Column.__or__, [F.col(name) for name in flags], F.lit(False))
    counts = parsed.agg(  # one scan for every count
        F.count(F.lit(1)), *[F.coalesce(F.sum(c.cast("int")), F.lit(0))
                             for c in (failed, ~failed & flagged, ~failed & ~flagged)]).first()
    rows_read, parse_failed, rows_flagged, rows_clean = (int(v) for v in counts)
    good = parsed.filter(~failed) if parse_failed else parsed  # no filter to fence when every row parsed
    data_cols = [c.name for c in schema.data_columns]
    gate = run_gate(good.select(*data_cols, *flags, *([ROW_ID] if by_gx else [])), suite,
                    ROW_ID if by_gx else None, flagged={expectation_id(e): name for name, e in flags.items()})
    gate.results.insert(0, _parse_result(rows_read, parse_failed))
    if gate.critical_failures:
        _record(spark, config, run, table, gate)
        names = tuple(r.expectation_id for r in gate.critical_failures)
        raise QualityGateFailed(
            f"{table}: critical expectation(s) failed: {', '.join(names)}; nothing was written "
            f"to {table} (see ops.quality_results, run {run.run_id})"
        )
    # rows the rules' columns set aside, and the rest: known exactly unless GX names rows too
    known = None if gate.quarantined else (rows_clean, rows_flagged)
    return PreparedTable(table, schema, files, good, parsed.filter(failed), gate, rows_read, parse_failed, known)


def commit_table(spark: SparkSession, config: Config, run: Run, prepared: PreparedTable) -> TableStats:
    """Write a prepared table: kept rows to bronze, set-aside rows to quarantine, the gate's
    results to ops.quality_results; returns what happened to every row read."""
    schema, gate, files = prepared.schema, prepared.gate, prepared.files
    data_cols = [c.name for c in schema.data_columns]
    kept, set_aside = split_by_gate(spark, prepared.good, gate)
    partitions = file_partitions(files, schema)
    q_schema = quarantine_of(schema)
    lineage = [F.lit(run.run_id).alias("ingest_run_id"), F.lit(run.started).alias("ingest_ts")]
    q_cols = [*q_schema.partition_by, "source_file", "raw_line", "raw_values_json"]
    quarantine = prepared.bad.select(*q_cols, F.col(PARSE_ERRORS).alias("reasons"), *lineage).unionByName(
        set_aside.select(*q_cols, "reasons", *lineage)
    )
    names = sorted({name for f in files for name in (f.name, *f.aliases)})
    if partitions is None:
        kept, moved = _split_keys_stored_elsewhere(spark, config, schema, kept, names)
        quarantine = quarantine.unionByName(moved.select(*q_cols, "reasons", *lineage))
        set_aside = set_aside.unionByName(moved.select(*set_aside.columns))
    rows = kept.select(*data_cols, "source_file", *lineage)
    if partitions is None:
        lake.replace_by_source(spark, config, q_schema, quarantine, names, compare=[*q_cols, "reasons"])
        lake.merge_by_key(spark, config, schema, rows, names)
    else:  # partition values come from the files' constants: no row can stray
        clean, flagged = prepared.known or (None, None)
        q_rows = None if flagged is None else prepared.parse_failed + flagged
        lake.replace_partitions(spark, config, q_schema, quarantine, list(partitions), compare=[*q_cols, "reasons"],
                                rows=q_rows, checked=True)
        lake.replace_partitions(spark, config, schema, rows, list(partitions), compare=[*data_cols, "source_file"],
                                rows=clean, checked=True, fence=prepared.parse_failed > 0)
    _record(spark, config, run, prepared.table, gate)

    if partitions is not None and prepared.known is not None:
        rows_kept, rows_quarantined = prepared.known[0], prepared.parse_failed + prepared.known[1]
    else:  # counted, not derived: the tests check read = kept + quarantined
        rows_quarantined = prepared.parse_failed + set_aside.count()
        rows_kept = kept.count()
    return TableStats(prepared.table, prepared.rows_read, rows_kept, rows_quarantined, _warnings(gate.results),
                      partitions=partitions)


def _split_keys_stored_elsewhere(
    spark: SparkSession, config: Config, schema: TableSchema, kept: DataFrame, names: list[str]
) -> tuple[DataFrame, DataFrame]:
    """(kept, moved): a row whose key the table already holds from a file outside this run would
    silently move that key to another file; it is set aside with the reason instead. Ingesting
    both files in one run moves it (the old file's rows are then replaced)."""
    stored = lake.keys_stored_elsewhere(spark, config, schema, names)
    if stored is None:
        return kept, kept.limit(0).withColumn("reasons", F.array().cast("array<string>"))
    tagged = kept.join(stored, list(schema.keys), "left")
    reason = F.array(F.concat(F.lit("key already stored from "), F.col("_stored_file"),
                              F.lit(", a file not in this run: ingest both together to move it")))
    moved = tagged.filter(F.col("_stored_file").isNotNull()).select(*kept.columns, reason.alias("reasons"))
    return tagged.filter(F.col("_stored_file").isNull()).select(*kept.columns), moved


def ingest_table(
    spark: SparkSession, config: Config, run: Run, table: str, files: list[RawFile],
    parser: Callable[[SparkSession, list[RawFile], TableSchema], DataFrame | Checked] | None = None,
) -> TableStats:
    """Ingest raw files into one bronze table (prepare, then commit)."""
    return commit_table(spark, config, run, prepare_table(spark, config, run, table, files, parser))


def publish_derived(
    spark: SparkSession, config: Config, run: Run, table: str, df: DataFrame,
    partitions: tuple[tuple, ...] | None = None,
) -> TableStats:
    """Gate and write a derived (silver/gold) table in one commit: the whole table, or with
    `partitions` only those partitions (df holds exactly their new rows)."""
    schema = load_schema(table)
    staged = run.staging / f"{table}.parquet" if commits_staged(config, schema, list(partitions or ())) else None
    if staged is not None:  # staged as the table lays out its files, committed as they lie
        df = lake.stage_partition(lake.conform(df, schema), schema, partitions[0], staged)
    else:
        df = _materialize(spark, lake.conform(df, schema), run, table)
    gate = run_gate(df, load_suite(table), None)
    if gate.critical_failures:
        _record(spark, config, run, table, gate)
        failed = ", ".join(r.expectation_id for r in gate.critical_failures)
        raise QualityGateFailed(f"{table}: critical expectation(s) failed: {failed}; nothing written")
    rows = gate.rows if gate.rows is not None else df.count()
    if partitions is None:
        lake.overwrite(spark, config, schema, df, compare=[c.name for c in schema.columns])
    else:
        lake.replace_partitions(spark, config, schema, df, list(partitions), compare=[c.name for c in schema.columns],
                                rows=rows, fence=False,  # df is read back from staging: no filter below it
                                staging=run.staging / f"{table}.pieces", staged=staged)
    _record(spark, config, run, table, gate)
    return TableStats(table, rows, rows, 0, _warnings(gate.results), partitions=partitions)
