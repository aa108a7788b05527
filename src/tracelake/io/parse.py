"""Raw delimited files → typed rows, with every unparseable row kept and explained.

Why not Spark's CSV reader: on Sail a row with too few fields fails the whole read, in
PERMISSIVE mode too, and `from_csv` does the same (measured, see docs/engine-notes.md).
So files are read as text lines (one read per file, because Sail has no input_file_name()),
split on the delimiter, and cast with try_cast; a row that does not fit carries its reasons
instead of failing the job. The formats we ingest are unquoted, which makes a plain split exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.errors import TracelakeError
from tracelake.io.text import HEADER_AGAIN, RawFile, check_header, read_raw_lines
from tracelake.schema import RESERVED_PREFIX, TableSchema
from tracelake.schema import Column as ColumnSpec

ROW_ID = f"{RESERVED_PREFIX}row_id"
PARSE_ERRORS = f"{RESERVED_PREFIX}parse_errors"
# what becomes of each staged row, in one column (a tinyint), completed by quality.split.staged_form:
# KEPT; FLAGGED (a quarantine rule sets it aside); REPEATED (an exact copy of an earlier row of its
# file, a re-delivered record: counted as repeated, neither kept nor quarantined); FAILED (it did not
# parse); EXACT (no row, but a fast pass's marker: its input is parsed line by line instead). A
# parser may give the column itself, with REPEATED, EXACT or KEPT on each row
VERDICT = f"{RESERVED_PREFIX}verdict"
KEPT, FLAGGED, REPEATED, FAILED, EXACT = 0, 1, 2, 3, 4
EXACT_REASON = "file parsed line by line"  # a fast pass's marker row's problem; never stored
# a row's raw text as staged (quality.split.staged_form): a quarantine row's raw_line and raw_values_json
STAGED_RAW_LINE, STAGED_RAW_VALUES = f"{RESERVED_PREFIX}raw_line", f"{RESERVED_PREFIX}raw_values_json"
COUNT_OK, N_FIELDS = "_count_ok", "_n_fields"  # split_fields: the line has the header's field count; its count
FLOAT_TYPES = ("double", "float")
EPOCH_MS = "epoch_ms"  # schema `format` of a timestamp column delivered as Unix epoch milliseconds
EPOCH_MS_KIND = "epoch time in whole milliseconds of the years 2000-2099"
# 2000-01-01 .. 2099-12-31: a trace's clock, not any instant a timestamp can hold; so a time in
# seconds (1716480254 is 1970-01-20 as milliseconds) is refused instead of stored 54 years early
EPOCH_MS_MIN, EPOCH_MS_MAX = 946_684_800_000, 4_102_444_799_999


def verdict(code: int) -> Column:
    """VERDICT's value `code`, as the column holds it."""
    return F.lit(code).cast("tinyint")


def kept() -> Column:
    """The one condition of a staged row that a table keeps (VERDICT): the bronze step's counts, the
    staged parse a derived table reads, and whether its files hold kept rows only."""
    return F.col(VERDICT) == KEPT


# ---------------------------------------------------------------- splitting

def raw_field(i: int) -> str:
    """The name split_fields gives the raw text of field i."""
    return f"_raw{i}"


def split_fields(lines: DataFrame, delimiter: str, n_fields: int, *, trim: bool = False) -> DataFrame:
    """Text lines → the raw fields `_raw<i>` (null when the count is off), COUNT_OK, N_FIELDS.

    Spark Connect engines do not share the split between the expressions that use a field, so
    the fields are computed in one projection and used in the next (measured on Sail: 2.6 s of
    CPU less per real hour of port counters). `trim` strips each field's padding."""
    split = lines.select("*", F.split(F.col("raw_line"), re.escape(delimiter), -1).alias("_fields"))
    count_ok = F.size(F.col("_fields")) == F.lit(n_fields)
    field = (lambda i: F.trim(F.get(F.col("_fields"), i))) if trim else (lambda i: F.get(F.col("_fields"), i))
    return split.select(
        *lines.columns, count_ok.alias(COUNT_OK), F.size(F.col("_fields")).alias(N_FIELDS),
        *[F.when(count_ok, field(i)).alias(raw_field(i)) for i in range(n_fields)],
    )


def raw_fields(names: Sequence[str]) -> dict[str, Column]:
    """Each name's raw text in split_fields' output, by position."""
    return {name: F.col(raw_field(i)) for i, name in enumerate(names)}


def raw_values_json(fields: Mapping[str, Column]) -> Column:
    """The raw fields as a JSON object by name, for rows that split into the expected count."""
    return F.when(F.col(COUNT_OK), F.to_json(F.struct(*[text.alias(name) for name, text in fields.items()])))


# ---------------------------------------------------------------- typing

Problem = tuple[Column, Column]  # (condition, message): the row has this problem when true
Converter = Callable[[Column], Column]


def typed_value(text: Column, col: ColumnSpec, overrides: Mapping[str, Converter] | None = None) -> Column:
    """Raw text as the column's type, null where it does not convert; never fails the read.

    Driven by the column's spec: a `format` is a timestamp pattern, or `epoch_ms` for whole Unix
    milliseconds (bounded to the years 2000-2099, see EPOCH_MS_MIN; outside 1-9999 the
    conversion would also fail the whole read). `overrides` maps a column's name or its type to
    a source's own converter (e.g. China-local times), which this module cannot import."""
    convert = overrides and (overrides.get(col.name) or overrides.get(col.type))
    if convert:
        return convert(text)
    if col.format == EPOCH_MS:
        millis = text.try_cast("bigint")
        return F.when(millis.between(EPOCH_MS_MIN, EPOCH_MS_MAX), F.timestamp_millis(millis))
    if col.type == "string":
        return text
    if col.type == "timestamp" and col.format:
        return F.try_to_timestamp(text, F.lit(col.format))
    return text.try_cast(col.type)


def typed_field(
    text: Column, col: ColumnSpec, count_ok: Column, *,
    overrides: Mapping[str, Converter] | None = None, value_ref: Column | None = None,
) -> tuple[Column, list[Problem]]:
    """A raw text field as its column's value, and the problems that explain a row where it is not.

    Shared by every parser so a bad value reads the same everywhere: "<col>: '<text>' is not a
    valid <kind>" for text that does not convert, "<col>: missing value" for an empty field in
    a non-nullable column, "<col>: '<text>' is not a finite number" for NaN/Infinity in a float
    column whose schema does not allow them. The column's `null_values` (e.g. Zeus's `nan`)
    read as null.
    `value_ref` names the value in a later projection, so the check does not convert twice."""
    present = text.isNotNull() & (F.length(text) > 0)
    if col.null_values:
        present = present & ~text.isin(*col.null_values)
    value = F.when(present, typed_value(text, col, overrides))
    checked = value if value_ref is None else value_ref
    kind = EPOCH_MS_KIND if col.format == EPOCH_MS else col.type
    problems = [(present & checked.isNull(),
                 F.concat(F.lit(f"{col.name}: '"), text, F.lit(f"' is not a valid {kind}")))]
    if col.type in FLOAT_TYPES and not col.non_finite:
        # 'inf', 'nan' and overflowing text such as '1e400' cast to NaN/±Infinity: not a measurement
        infinite = F.abs(checked) == F.lit(float("inf"))
        problems.append((present & (F.isnan(checked) | infinite),
                         F.concat(F.lit(f"{col.name}: '"), text, F.lit("' is not a finite number"))))
    if not col.nullable:
        problems.append((count_ok & ~present, F.lit(f"{col.name}: missing value")))
    return value, problems


def count_problem(n_fields: int) -> Problem:
    """A line that does not split into the header's number of fields (split_fields' columns)."""
    return ~F.col(COUNT_OK), F.concat(F.lit(f"expected {n_fields} fields, found "), F.col(N_FIELDS).cast("string"))


def supplied_column(col: ColumnSpec, available: Sequence[str], schema: TableSchema) -> Column:
    """A column no raw field holds (source None): the file's path supplies it as a constant."""
    if col.name not in available:
        raise TracelakeError(f"{schema.full_name}: nothing supplies column '{col.name}'")
    return F.col(col.name)


def typed_columns(
    schema: TableSchema, fields: Mapping[str, Column], available: Sequence[str], n_fields: int, *,
    overrides: Mapping[str, Converter] | None = None, values_first: bool = False,
) -> tuple[dict[str, Column], list[Problem]]:
    """Every data column of the schema from its raw field in `fields` (by raw name), or from the
    constant its file's path supplies, plus the row's problems, the field count's first.

    `values_first`: the problems refer to the values by column name, for finish(values_first=True),
    which selects the values in a projection of their own."""
    typed: dict[str, Column] = {}
    problems = [count_problem(n_fields)]
    for col in schema.data_columns:
        if col.source is None:
            typed[col.name] = supplied_column(col, available, schema)
            continue
        ref = F.col(col.name) if values_first else None
        typed[col.name], col_problems = typed_field(
            fields[col.source], col, F.col(COUNT_OK), overrides=overrides, value_ref=ref)
        problems += col_problems
    return typed, problems


# ---------------------------------------------------------------- the parser contract

def problem_messages(problems: Sequence[Problem]) -> Column:
    """The messages of the problems a row has, as array<string> (empty for a good row)."""
    if not problems:
        return F.array().cast("array<string>")
    return F.array_compact(F.array(*[F.when(cond, message) for cond, message in problems]))


def row_id(*key: Column) -> Column:
    """A row's id within one run (never stored): two 64-bit xxhash64 of the key, in both orders.

    One 64-bit hash collides with probability ~n²/2^65 (about 4e-6 for 11 M rows), which would
    set an innocent row aside with a quarantined one; the pair makes that negligible while staying
    far cheaper than sha2-256 over the joined key text."""
    return F.concat(F.xxhash64(*key).cast("string"), F.lit(":"), F.xxhash64(*reversed(key)).cast("string"))


def finish(
    frame: DataFrame, schema: TableSchema, typed: Mapping[str, Column], raw_json: Column,
    problems: Sequence[Problem], key: Sequence[str] = ("raw_line",), *,
    values_first: bool = False, failed_only: bool = False,
) -> DataFrame:
    """The parser contract (contract.Parser), written once for every parser: the schema's data
    columns cast to their types in schema order, source_file, raw_line, raw_values_json, ROW_ID
    (source_file plus the `key` columns) and PARSE_ERRORS (empty = good row).

    `values_first` selects the typed values in a projection of their own, for problems that refer
    to them by name (typed_columns(values_first=True)): Spark Connect engines would otherwise
    convert every value twice. `failed_only` builds the messages and raw_values_json only for rows
    with a problem (CASE evaluates its branches lazily; to_json on every row costs more than the
    rest of the parse); a good row's raw_values_json is then null."""
    missing = [c.name for c in schema.data_columns if c.name not in typed]
    if missing:
        raise TracelakeError(f"{schema.full_name}: parser supplies no {missing}")
    values = [typed[c.name].cast(c.type).alias(c.name) for c in schema.data_columns]
    if values_first:
        frame = frame.select(*[c for c in frame.columns if c not in typed], *values)
        values = [F.col(c.name) for c in schema.data_columns]
    errors = problem_messages(problems)
    if HEADER_AGAIN in frame.columns:  # a header line mid-file: that reason alone (read_lines)
        again = F.col(HEADER_AGAIN)
        errors = F.when(again.isNotNull(), F.array(again)).otherwise(errors)
        problems, key = [(again.isNotNull(), again), *problems], [*key, HEADER_AGAIN]
    if failed_only and problems:
        failed = reduce(Column.__or__, [cond for cond, _ in problems])
        no_errors = F.array().cast("array<string>")
        frame = frame.select("*", F.when(failed, errors).otherwise(no_errors).alias(PARSE_ERRORS))
        errors, raw_json = F.col(PARSE_ERRORS), F.when(F.size(F.col(PARSE_ERRORS)) > 0, raw_json)
    return frame.select(
        *values, F.col("source_file"), F.col("raw_line"), raw_json.alias("raw_values_json"),
        row_id(F.col("source_file"), *[F.col(k) for k in key]).alias(ROW_ID),
        errors.alias(PARSE_ERRORS),
    )


def type_fields(split: DataFrame, schema: TableSchema, *, lean: bool = False) -> DataFrame:
    """split_fields' output for the schema's fixed raw header → the parser contract.

    `lean` takes finish's two measured shortcuts (values_first, failed_only), for large inputs
    whose good rows need no raw_values_json."""
    fields = raw_fields(schema.raw_header)
    typed, problems = typed_columns(schema, fields, split.columns, len(schema.raw_header), values_first=lean)
    return finish(split, schema, typed, raw_values_json(fields), problems, values_first=lean, failed_only=lean)


def parse_lines(lines: DataFrame, schema: TableSchema) -> DataFrame:
    """Typed schema columns plus raw lineage, a row id, and an array of parse errors per row.

    A row is good when PARSE_ERRORS is empty. Errors: wrong field count, a value that does not
    cast to its declared type, an empty value in a non-nullable column (see typed_field).
    """
    return type_fields(split_fields(lines, schema.delimiter, len(schema.raw_header)), schema)

def parse_delimited(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """The default parser: delimited text files with the schema's fixed raw header."""
    for raw in files:
        check_header(raw, schema)
    return parse_lines(read_raw_lines(spark, files, schema), schema)
