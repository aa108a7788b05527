"""A table's rows split into kept and set aside: quarantine rules as flag columns staged with the
parse, and the reasons each set-aside row carries."""

from __future__ import annotations

from collections.abc import Collection
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.io.parse import (
    EXACT,
    FAILED,
    FLAGGED,
    FLOAT_TYPES,
    KEPT,
    PARSE_ERRORS,
    REPEATED,
    ROW_ID,
    STAGED_RAW_LINE,
    STAGED_RAW_VALUES,
    VERDICT,
    verdict,
)
from tracelake.quality.gate import GateOutcome, expectation_id
from tracelake.quality.rowrules import rejects
from tracelake.schema import RESERVED_PREFIX, TableSchema


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


def row_flags(suite: dict) -> tuple[dict[str, dict], bool]:
    """({flag column: expectation} for the quarantine rules evaluated as columns, whether any
    other quarantine rule needs GX and so the rows' ids)."""
    flags, by_gx = {}, False
    for exp in suite.get("expectations", []):
        if exp["meta"]["severity"] != "quarantine":
            continue
        if rejects(exp) is None:
            by_gx = True
        else:
            flags[f"{RESERVED_PREFIX}q{len(flags)}"] = exp
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


def staged_form(parsed: DataFrame, schema: TableSchema, flags: dict[str, dict], row_ids: bool,
                proven: Collection[str] = (), clean: bool = False) -> DataFrame:
    """What is staged of a parse, in the pass that stores it: the typed columns (a failed row's
    floats null, see _failed_values), each quarantine rule's rejects as a flag column (evaluated
    on those values, for the rows that parsed), and the raw line and values only for rows that
    failed or were flagged (building them for every row costs more than the parse; a rule GX
    evaluates needs them all, and the row ids). Columns a parser adds beyond the contract (e.g.
    rates computed in the same pass) are staged with the rows, for a derived table to use. The
    flags of `proven` rules (the suite's meta.proven_by: the parse checked them on every row) are
    false without evaluating them: on a full Zhejiang hour, two pair rules over 11 M rows. A
    `clean` parse (io.staging.FastParse.clean) gives its rows in this form already: a failed row
    holds no value and no row a raw line or values, so its columns are staged as they come
    (measured on a full Zhejiang hour: the engine's expressions for them cost 1 s of a 10 s
    staged write). Every column staged beside the table's own carries schema.RESERVED_PREFIX (the raw
    text too: staged files can be the table's data files). The row's VERDICT (io.parse) is made
    here, from the verdict the parser gave (a clean parse gives one), its problems and the flags."""
    failed = F.size(F.col(PARSE_ERRORS)) > 0
    flag_cols = [(F.lit(False) if expectation_id(exp) in proven
                  else F.coalesce(rejects(exp, domain=~failed), F.lit(False))).alias(name) for name, exp in flags.items()]
    watched = [F.col(name) for name, exp in flags.items() if expectation_id(exp) not in proven]
    flagged = reduce(Column.__or__, watched, F.lit(False))
    keep_raw = F.lit(True) if row_ids else failed | flagged
    data = [c.name for c in schema.data_columns]
    ids = [ROW_ID] if row_ids else []
    contract = {*data, "source_file", "raw_line", "raw_values_json", ROW_ID, PARSE_ERRORS, VERDICT}
    extras = [c for c in parsed.columns if c not in contract]
    given = F.col(VERDICT) if VERDICT in parsed.columns else verdict(KEPT)
    if clean:  # the parse's own verdict, a row an unproven rule flags set aside
        flags_first = parsed.select(*data, "source_file", F.col("raw_line").alias(STAGED_RAW_LINE),
                                    F.col("raw_values_json").alias(STAGED_RAW_VALUES), *ids, PARSE_ERRORS, *flag_cols,
                                    given.alias(VERDICT), *extras)
        if not watched:
            return flags_first
        return flags_first.withColumn(VERDICT, F.when((F.col(VERDICT) == KEPT) & flagged, verdict(FLAGGED))
                                      .otherwise(F.col(VERDICT)))
    values = parsed.select(*_failed_values(schema, failed), "source_file", "raw_line", "raw_values_json", *ids,
                           PARSE_ERRORS, given.alias(VERDICT), *extras)
    with_flags = values.select("*", *flag_cols)
    fate = (F.when(F.col(VERDICT) == EXACT, verdict(EXACT)).when(failed, verdict(FAILED))
            .when(F.col(VERDICT) == REPEATED, verdict(REPEATED)).when(flagged, verdict(FLAGGED)).otherwise(verdict(KEPT)))
    return with_flags.select(*data, "source_file", F.when(keep_raw, F.col("raw_line")).alias(STAGED_RAW_LINE),
                             F.when(keep_raw, F.col("raw_values_json")).alias(STAGED_RAW_VALUES),
                             *ids, PARSE_ERRORS, *flags, fate.alias(VERDICT), *extras)
