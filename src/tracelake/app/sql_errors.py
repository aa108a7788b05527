"""A mistake in a statement, said as a SQL user understands it, whichever engine found it.

Sail and Spark word the same mistakes differently, and Sail's words are its planner's
(`attribute ObjectName([Identifier("r"), …]) is missing from the schema`, `No field named
t."#4"` for a column that is neither grouped nor aggregated). The sentence names what is wrong
and, for an unknown table or column, the nearest existing names, from the lake's listing and
the schema files (no engine call). The engine's own words stay in the line, in brackets.
"""

from __future__ import annotations

import difflib
import re

from tracelake.app.readonly import spark_reading

_PART = r"(?:[A-Za-z_]\w*|`\d+`)"
_SOURCE = re.compile(rf"\b(?:FROM|JOIN)\s+({_PART}(?:\s*\.\s*{_PART}){{0,2}})", re.I)
_IDENTIFIERS = re.compile(r'Identifier\("((?:[^"\\]|\\.)*)"\)')
_BACKTICKED = re.compile(r"`((?:[^`]|``)*)`")

_TABLE_MISSING = re.compile(r"TABLE_OR_VIEW_NOT_FOUND")
_SAIL_COLUMN = re.compile(r"attribute ObjectName\(\[(.*?)\]\) is missing from the schema")
_SPARK_COLUMN = re.compile(r"UNRESOLVED_COLUMN\.\w+\] A column,[^`]*with name ((?:`[^`]*`\.?)+) cannot be resolved")
_NOT_GROUPED = re.compile(r"No field named [^ ]*\"#\d+\"|MISSING_AGGREGATION|MISSING_GROUP_BY")
_SAIL_AMBIGUOUS = re.compile(r"ambiguous attribute: ObjectName\(\[(.*?)\]\)")
_SPARK_AMBIGUOUS = re.compile(r"AMBIGUOUS_REFERENCE\] Reference ((?:`[^`]*`\.?)+) is ambiguous")
_TYPES = re.compile(r"Cannot coerce arithmetic expression|DATATYPE_MISMATCH|Cannot cast string|CAST_INVALID_INPUT|"
                    r"Cannot cast .* to value of")
SUGGESTIONS = 3
LISTED_COLUMNS = 24


def sources(sql: str) -> list[str]:
    """The dotted names after FROM and JOIN, as written (quotes off)."""
    bare, names = spark_reading(sql)
    found = []
    for match in _SOURCE.finditer(bare):
        parts = [names[int(p[1:-1])] if p.startswith("`") else p for p in re.split(r"\s*\.\s*", match.group(1))]
        found.append(".".join(parts))
    return list(dict.fromkeys(found))


def _lake_tables(config) -> dict[str, tuple[str, str]]:
    from tracelake.delta.catalog import list_lake_tables

    return {config.table_name(layer, table): (layer, table) for layer, table in list_lake_tables(config)}


def _columns(layer: str, table: str) -> list[str]:
    from tracelake.errors import TracelakeError
    from tracelake.schema import table_schema

    try:
        return [c.name for c in table_schema(f"{layer}.{table}").columns]
    except TracelakeError:  # a table the lake holds but no schema file names
        return []


def _nearest(word: str, choices: list[str]) -> list[str]:
    """The closest names, best first: those about as close as the best one."""
    lowered = {c.lower(): c for c in choices}
    scored = sorted(((difflib.SequenceMatcher(None, word.lower(), c).ratio(), c) for c in lowered), reverse=True)
    best = scored[0][0] if scored else 0.0
    return [lowered[c] for ratio, c in scored[:SUGGESTIONS] if ratio >= max(0.6, best - 0.08)]


def _did_you_mean(matches: list[str]) -> str:
    return f"; did you mean {' or '.join(matches)}?" if matches else ""


def _missing_table(sql: str, config) -> str | None:
    from tracelake.delta.catalog import check_readable
    from tracelake.delta.protocol import DamagedLog

    known = _lake_tables(config)
    for name in sources(sql):
        if name in known:  # in the lake, yet not registered: its log is damaged (catalog.register_all)
            try:
                check_readable(config, *known[name])
            except DamagedLog as exc:
                return str(exc)
    missing = [name for name in sources(sql) if name not in known and name.lower() not in {k.lower() for k in known}]
    if not missing:
        return None
    name = missing[0]
    return f"no table {name} in the lake{_did_you_mean(_nearest(name, list(known)))} (`tracelake tables` lists them)"


def _named(parts: list[str]) -> str:
    return ".".join(parts)


def _missing_column(parts: list[str], sql: str, config) -> str:
    known = _lake_tables(config)
    tables = [(name, _columns(*known[name])) for name in sources(sql) if name in known]
    column = parts[-1]
    every = [c for _, cols in tables for c in cols]
    matches = _nearest(column, every)
    where = " or ".join(name for name, _ in tables) or "the query's tables"
    listed = "; ".join(f"{name}: {', '.join(cols[:LISTED_COLUMNS])}{', …' if len(cols) > LISTED_COLUMNS else ''}"
                       for name, cols in tables if cols)
    return (f"no column {_named(parts)} in {where}{_did_you_mean(list(dict.fromkeys(matches)))}"
            + (f" (columns of {listed})" if listed else ""))


def _parts(text: str, pattern: re.Pattern) -> list[str]:
    return [p.replace('\\"', '"').replace("``", "`") for p in pattern.findall(text)]


def explain(text: str, sql: str, config) -> str | None:
    """The sentence for the engine's message `text` about `sql`, or None when it is none of the
    mistakes known here (the engine's words are then the message)."""
    if _TABLE_MISSING.search(text):
        return _missing_table(sql, config) if config is not None else None
    if match := _SAIL_COLUMN.search(text) or _SPARK_COLUMN.search(text):
        parts = _parts(match.group(1), _IDENTIFIERS if match.re is _SAIL_COLUMN else _BACKTICKED)
        if parts and config is not None:
            return _missing_column(parts, sql, config)
        return None
    if _NOT_GROUPED.search(text):
        return ("a selected column is neither in GROUP BY nor inside an aggregate: add it to GROUP BY, "
                "or aggregate it (count, sum, min, max, any_value …)")
    if match := _SAIL_AMBIGUOUS.search(text) or _SPARK_AMBIGUOUS.search(text):
        parts = _parts(match.group(1), _IDENTIFIERS if match.re is _SAIL_AMBIGUOUS else _BACKTICKED)
        name = _named(parts) or "a column"
        return f"column {name} is in more than one table of the query: name its table (t.{parts[-1] if parts else 'col'})"
    if _TYPES.search(text):
        return ("the types do not match (a text value where a number is needed, or the reverse): "
                "CAST one side, e.g. CAST(x AS DOUBLE), or compare like with like")
    return None
