"""A statement's result as people and programs read it: CSV and JSON keep every value at full
precision for programs; the table is for a person at a terminal, so it is capped in rows, fitted
to the terminal's width (middle columns elided, long values cut, as DuckDB's CLI does) and shows
doubles at a readable precision. Every column prints, even two of one name (JSON makes such
names unique, a, a_1, since an object cannot hold both)."""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

FORMATS = ("csv", "json", "table")
TABLE_ROWS = 40  # rows a table shows unless --limit / .maxrows say otherwise
MAX_CELL = 40  # characters of a value a table shows before it cuts it with …
FALLBACK_WIDTH = 120  # a table's width when stdout is no terminal and COLUMNS is unset
ELIDED = "…"


@dataclass(frozen=True)
class Result:
    """Column names, the rows fetched, and `total`: the statement's row count when the rows
    were capped below it (None: the rows are all of it)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    total: int | None = None


def as_result(result: Result | tuple) -> Result:
    return result if isinstance(result, Result) else Result(*result)


def default_format(stream=None) -> str:
    """An aligned table on a terminal, CSV when piped or redirected."""
    return "table" if (stream or sys.stdout).isatty() else "csv"


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


def write_csv(columns: Sequence[str], rows: Iterable[Sequence[Any]], out=None) -> None:
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


def unique_names(columns: Sequence[str]) -> list[str]:
    """`a, a` becomes `a, a_1`: a JSON object keeps one value per name."""
    seen: set[str] = set()
    names = []
    for column in columns:
        name, n = str(column), 0
        while name in seen:
            n += 1
            name = f"{column}_{n}"
        seen.add(name)
        names.append(name)
    return names


def write_json(columns: Sequence[str], rows: Iterable[Sequence[Any]], out=None) -> None:
    """One JSON array of objects, a row each, written as the rows come (json.dumps of the whole
    list, indent 1, would print the same text)."""
    names, out = unique_names(columns), out or sys.stdout
    first = True
    for row in rows:
        record = json.dumps({c: _json_value(v) for c, v in zip(names, row)}, ensure_ascii=False, indent=1)
        out.write(("[\n " if first else ",\n ") + record.replace("\n", "\n "))
        first = False
    out.write("[]\n" if first else "\n]\n")


def readable(value: Any) -> str:
    """A value as a table cell: doubles at 3 decimals from 1 up, 4 significant digits below
    (the full value is in CSV and JSON), NULL for a null, control characters escaped."""
    if value is None:
        return "NULL"
    if isinstance(value, float) and math.isfinite(value):
        if value == 0 or abs(value) >= 1e15:
            text = f"{value:.6g}"
        elif abs(value) >= 1:
            text = f"{value:.3f}".rstrip("0").rstrip(".")
        else:
            text = f"{value:.4g}"
    else:
        text = str(_text(value))
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: max(most - 1, 0)] + ELIDED


def _shown_columns(widths: list[int], width: int) -> list[int | None]:
    """Which columns fit in `width` (indices; None where the elided ones stand): all of them,
    else from both ends inwards, the left first, as many as fit beside an elision mark."""
    def span(ws: list[int]) -> int:
        return sum(ws) + 3 * (len(ws) - 1)

    if span(widths) <= width:
        return list(range(len(widths)))
    left, right = [], []
    budget = width - 4  # the mark and its separator
    for i in range(len(widths)):
        index = i // 2 if i % 2 == 0 else len(widths) - 1 - i // 2
        if index in left or index in right:
            break
        chosen = left + right + [index]
        if span([widths[j] for j in chosen]) > budget:
            break
        (left if i % 2 == 0 else right).append(index)
    if not left:
        left = [0]  # one column always shows (no column is wider than the budget)
    return [*left, None, *reversed(right)]


def aligned(columns: Sequence[str], rows: Sequence[Sequence[Any]], total: int | None = None,
            width: int | None = None) -> list[str]:
    """The rows as a text table: a header, a rule, numbers to the right; values longer than
    MAX_CELL cut; columns that do not fit in `width` elided in the middle; a footer saying how
    many rows (and columns) it shows of how many."""
    width = width or shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns
    header = [_cut(str(c), MAX_CELL) for c in columns]
    cells = [[_cut(readable(v), MAX_CELL) for v in row] for row in rows]
    most = max(width - 4, 8)  # no one column wider than the table (beside an elision mark)
    widths = [min(most, max([len(h), *(len(r[i]) for r in cells)])) for i, h in enumerate(header)]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float, Decimal)) and not isinstance(r[i], bool)
                                  for r in rows if r[i] is not None) for i in range(len(columns))]
    shown = _shown_columns(widths, width)

    def line(values: list[str], pad) -> str:
        return " | ".join(ELIDED if i is None else pad(i, _cut(values[i], widths[i])) for i in shown).rstrip()

    lines = [line(header, lambda i, v: v.ljust(widths[i])),
             "-+-".join("-" if i is None else "-" * widths[i] for i in shown)]
    for row in cells:
        lines.append(line(row, lambda i, v: v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i])))
    lines.append(footer(len(rows), total, len(columns), sum(i is not None for i in shown)))
    return lines


def footer(fetched: int, total: int | None, columns: int, shown_columns: int) -> str:
    count = total if total is not None else fetched
    text = f"{count:,} row{'' if count == 1 else 's'}"
    if total is not None and total > fetched:
        text += f", {fetched:,} shown (--limit / .maxrows for more)"
    if shown_columns < columns:
        text += f"; {columns} columns, {shown_columns} shown (CSV or JSON print them all)"
    return f"({text})"


def _plan_text(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str] | None:
    """EXPLAIN's answer, one cell of many lines (a second cell on some engines): its lines."""
    if len(rows) != 1 or not 1 <= len(columns) <= 2:
        return None
    texts = [str(v) for v in rows[0] if v is not None]
    if not any("\n" in t for t in texts):
        return None
    return [line.rstrip() for text in texts for line in text.splitlines()]


def write_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], out=None, total: int | None = None,
                width: int | None = None) -> None:
    rows = rows if isinstance(rows, Sequence) else list(rows)  # its widths need every row it shows
    lines = _plan_text(columns, rows) or aligned(columns, rows, total, width)
    (out or sys.stdout).write("\n".join(lines) + "\n")


def write_result(result: Result | tuple, fmt: str = "csv", out=None, width: int | None = None, err=None) -> None:
    """CSV, JSON or a table (`width`: the terminal's, else its own or FALLBACK_WIDTH); a capped
    table says how many rows there were, capped CSV and JSON say it on `err` (stderr)."""
    shown = as_result(result)
    if fmt == "table":
        write_table(shown.columns, shown.rows, out, shown.total, width)
        return
    {"csv": write_csv, "json": write_json}[fmt](shown.columns, shown.rows, out=out)
    if shown.total is not None and shown.total > len(shown.rows):
        print(f"tracelake: {shown.total:,} rows, {len(shown.rows):,} printed (--limit)", file=err or sys.stderr)
