"""Raw delimited files → typed rows, with every unparseable row kept and explained.

Why not Spark's CSV reader: on Sail a row with too few fields fails the whole read, in
PERMISSIVE mode too, and `from_csv` does the same (measured, see shared/docs/engine-notes.md).
So files are read as text lines (one read per file, because Sail has no input_file_name()),
split on the delimiter, and cast with try_cast; a row that does not fit carries its reasons
instead of failing the job. The formats we ingest are unquoted, which makes a plain split exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.errors import TracelakeError
from tracelake.schema import Column as ColumnSpec
from tracelake.schema import TableSchema

ROW_ID = "_row_id"
PARSE_ERRORS = "_parse_errors"
RAW_COLUMNS = ("source_file", "raw_line", "raw_values_json")


@dataclass(frozen=True)
class RawFile:
    """A file to ingest: where Spark reads it, its lineage name, and columns its name implies."""

    path: str
    name: str
    constants: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Staged:
    """A parser's result it has already materialized (e.g. to verify a fast read before use):
    ingest takes the frame as it is instead of staging it again."""

    frame: DataFrame


def check_header(raw: RawFile, schema: TableSchema) -> None:
    """The first line must be the documented header; anything else is a different format."""
    expected = schema.delimiter.join(schema.raw_header)
    with open(raw.path, encoding="utf-8", newline="") as fh:
        first = fh.readline().rstrip("\r\n").lstrip("\ufeff")
    if first != expected:
        raise TracelakeError(
            f"{raw.name}: header '{first[:200]}' does not match {schema.full_name}'s "
            f"documented header '{expected}'"
        )


def read_raw_lines(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """All data lines of the files (headers dropped) with source_file and the name constants."""
    if not files:
        raise TracelakeError(f"no input files for {schema.full_name}")
    header = schema.delimiter.join(schema.raw_header)
    constant_names = sorted({k for f in files for k in f.constants})
    frames = []
    for raw in files:
        line = F.regexp_replace(F.col("value"), "\r$", "")
        cols = [F.lit(raw.name).alias("source_file"), line.alias("raw_line")]
        cols += [F.lit(raw.constants.get(k)).cast("string").alias(k) for k in constant_names]
        # lineSep "\n": with the default, Sail yields an empty extra line when a split falls
        # between "\r" and "\n" of a CRLF file (measured); "\r" is stripped above instead.
        frames.append(spark.read.option("lineSep", "\n").text(str(raw.path)).select(*cols))
    return union_all(frames).filter(F.col("raw_line") != F.lit(header))


def union_all(frames: list[DataFrame]) -> DataFrame:
    """Union as a balanced tree: a left-deep chain of ~350 unions crashes the Sail server."""
    while len(frames) > 1:
        frames = [
            frames[i].unionByName(frames[i + 1]) if i + 1 < len(frames) else frames[i]
            for i in range(0, len(frames), 2)
        ]
    return frames[0]


def _typed(raw: Column, type_name: str, fmt: str | None) -> Column:
    if type_name == "string":
        return raw
    if type_name == "timestamp":
        return F.try_to_timestamp(raw, F.lit(fmt)) if fmt else raw.try_cast("timestamp")
    return raw.try_cast(type_name)


Problem = tuple[Column, Column]  # (condition, message): the row has this problem when true


def typed_field(
    text: Column, col: ColumnSpec, convert: Callable[[Column], Column], count_ok: Column,
    *, kind: str | None = None, value_ref: Column | None = None,
) -> tuple[Column, list[Problem]]:
    """A raw text field as its column's value, and the problems that explain a row where it is not.

    Shared by every parser so a bad value reads the same everywhere: "<col>: '<text>' is not a
    valid <kind>" for text that does not convert, "<col>: missing value" for an empty field in
    a non-nullable column. The column's `null_values` (e.g. Zeus's `nan`) read as null.
    `value_ref` names the value in a later projection, so the check does not convert twice."""
    present = text.isNotNull() & (F.length(text) > 0)
    if col.null_values:
        present = present & ~text.isin(*col.null_values)
    value = F.when(present, convert(text))
    checked = value if value_ref is None else value_ref
    problems = [(present & checked.isNull(),
                 F.concat(F.lit(f"{col.name}: '"), text, F.lit(f"' is not a valid {kind or col.type}")))]
    if not col.nullable:
        problems.append((count_ok & ~present, F.lit(f"{col.name}: missing value")))
    return value, problems


def count_problem(count_ok: Column, found: Column, n_fields: int) -> Problem:
    """A line that does not split into the header's number of fields."""
    return ~count_ok, F.concat(F.lit(f"expected {n_fields} fields, found "), found.cast("string"))


def supplied_column(col: ColumnSpec, available: list[str], schema: TableSchema) -> Column:
    """A column no raw field holds (source None): the file's path supplies it as a constant."""
    if col.name not in available:
        raise TracelakeError(f"{schema.full_name}: nothing supplies column '{col.name}'")
    return F.col(col.name).cast(col.type).alias(col.name)


def problem_messages(problems: list[Problem]) -> Column:
    """The messages of the problems a row has, as array<string> (empty for a good row)."""
    return F.array_compact(F.array(*[F.when(cond, message) for cond, message in problems]))


def parse_lines(lines: DataFrame, schema: TableSchema) -> DataFrame:
    """Typed schema columns plus raw lineage, a row id, and an array of parse errors per row.

    A row is good when `_parse_errors` is empty. Errors: wrong field count, a value that does not
    cast to its declared type, an empty value in a non-nullable column (see typed_field).
    """
    n_fields = len(schema.raw_header)
    fields = F.split(F.col("raw_line"), re.escape(schema.delimiter), -1)
    count_ok = F.size(fields) == F.lit(n_fields)
    problems = [count_problem(count_ok, F.size(fields), n_fields)]
    raw_by_source = {
        name: F.when(count_ok, F.get(fields, i)) for i, name in enumerate(schema.raw_header)
    }
    typed: list[Column] = []
    for col in schema.data_columns:
        if col.source is None:
            typed.append(supplied_column(col, lines.columns, schema))
            continue
        value, col_problems = typed_field(
            raw_by_source[col.source], col, lambda t, c=col: _typed(t, c.type, c.format), count_ok)
        typed.append(value.alias(col.name))
        problems += col_problems
    raw_json = F.to_json(F.struct(*[raw_by_source[n].alias(n) for n in schema.raw_header]))
    row_id = F.sha2(F.concat_ws("\u0001", F.col("source_file"), F.col("raw_line")), 256)
    return lines.select(
        *typed,
        F.col("source_file"),
        F.col("raw_line"),
        F.when(count_ok, raw_json).alias("raw_values_json"),
        row_id.alias(ROW_ID),
        problem_messages(problems).alias(PARSE_ERRORS),
    )
