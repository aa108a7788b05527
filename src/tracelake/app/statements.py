"""One read-only statement over the lake, for `tracelake query` and the `tracelake sql` prompt:
the guard (app/readonly.py), the schema files' answers (app/schema_sql.py), the engine, and
its result printed as CSV, JSON or an aligned table.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from tracelake.errors import TracelakeError

FORMATS = ("csv", "json", "table")
Result = tuple[Sequence[str], Sequence[Sequence[Any]]]


def schema_answer(config, sql: str) -> Result | None:
    """(header, rows) of DESCRIBE TABLE / SHOW COLUMNS / SHOW CREATE TABLE of a lake table, from
    its schema file; None for any other statement or table (the engine answers, or says what is
    wrong)."""
    from tracelake.app.schema_sql import schema_question
    from tracelake.delta.catalog import list_lake_tables
    from tracelake.schema import table_schema

    question = schema_question(sql)
    if question is None:
        return None
    for layer, table in list_lake_tables(config):
        if config.table_name(layer, table) == question.table:
            return question.answer(table_schema(f"{layer}.{table}"), config.table_path(layer, table))
    return None


def statement_errors() -> tuple[type[Exception], ...]:
    """What the engine raises for a mistake in the statement (an unknown table, bad syntax, a
    division by zero, a failed cast, a version whose files a vacuum removed): the user's to fix,
    so exit 2, not an internal error."""
    from pyspark import errors as E

    return (E.AnalysisException, E.IllegalArgumentException, E.ArithmeticException, E.DateTimeException,
            E.ArrayIndexOutOfBoundsException, E.UnsupportedOperationException, E.SparkRuntimeException,
            E.SparkNoSuchElementException, E.SparkUpgradeException, E.QueryExecutionException,
            E.ParseException)


def _failed(exc: Exception) -> TracelakeError:
    text = str(exc).strip() or type(exc).__name__
    return TracelakeError(f"query failed: {text.splitlines()[0]}")


def run_sql(spark, sql: str) -> Result:
    """The statement's result (column names, rows); its mistakes become one line keeping the
    engine's words."""
    try:
        table = spark.sql(sql).toArrow()
    except statement_errors() as exc:
        raise _failed(exc) from exc
    return table.column_names, [tuple(r.values()) for r in table.to_pylist()]


def parser_message(spark, word: str) -> TracelakeError:
    """The engine parser's words for a statement led by `word`, a misspelt read keyword
    (readonly.NotAStatement): only the word is sent, which no parser takes for a statement."""
    try:
        spark.sql(word).toArrow()
    except statement_errors() as exc:
        return _failed(exc)
    return TracelakeError(f"query failed: {word} begins no statement")  # pragma: no cover - no parser takes it


def answer(engine, config, sql: str) -> Result:
    """A checked statement's result: from the schema files when they answer it, else the engine."""
    from tracelake.app.readonly import NotAStatement, check_read_only

    try:
        check_read_only(sql)
    except NotAStatement as exc:
        raise parser_message(engine.spark, exc.word) from None
    return schema_answer(config, sql) or run_sql(engine.spark, sql)


# ---------------------------------------------------------------- printing


def _text(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, default=str)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return value


def write_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]], out=None) -> None:
    writer = csv.writer(out or sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_text(v) for v in row])


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return _text(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)  # JSON has no NaN or infinity
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return value


def write_json(columns: Sequence[str], rows: Sequence[Sequence[Any]], out=None) -> None:
    """One JSON array of objects, a row each (a duplicate column name keeps its last value)."""
    records = [{c: _json_value(v) for c, v in zip(columns, row)} for row in rows]
    (out or sys.stdout).write(json.dumps(records, ensure_ascii=False, indent=1) + "\n")


def _cell(value: Any) -> str:
    text = str(_text(value))
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def aligned(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """The rows as a text table: a header, a rule, each column as wide as its widest value;
    numbers to the right. Nothing is cut (a long value makes its column wide)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(str(c)), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float, Decimal)) and not isinstance(r[i], bool)
                                  for r in rows if r[i] is not None) for i in range(len(columns))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(columns, widths)).rstrip(),
             "-+-".join("-" * w for w in widths)]
    for row in cells:
        lines.append(" | ".join(v.rjust(w) if num else v.ljust(w)
                                for v, w, num in zip(row, widths, numeric)).rstrip())
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return lines


def write_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], out=None) -> None:
    (out or sys.stdout).write("\n".join(aligned(columns, rows)) + "\n")


def write_result(result: Result, fmt: str = "csv", out=None) -> None:
    {"csv": write_csv, "json": write_json, "table": write_table}[fmt](*result, out=out)
