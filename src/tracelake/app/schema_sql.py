"""`DESCRIBE TABLE t`, `SHOW COLUMNS IN t` and `SHOW CREATE TABLE t` in `tracelake query`,
answered from the schema files.

The local engine answers the first two with a header and no rows for tables registered by their
location, and does not know the third; the schema file is the definition of a table's columns
anyway (`tracelake describe` prints the same, as Markdown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracelake.app.readonly import spark_reading
from tracelake.schema import TableSchema

_PART = r"(?:[A-Za-z_]\w*|`\d+`)"
_NAME = rf"({_PART}(?:\s*\.\s*{_PART}){{0,2}})"
DESCRIBE = re.compile(rf"\s*DESC(?:RIBE)?\s+(?:TABLE\s+)?(?:EXTENDED\s+|FORMATTED\s+)?{_NAME}\s*;?\s*", re.I)
SHOW_CREATE = re.compile(rf"\s*SHOW\s+CREATE\s+TABLE\s+{_NAME}\s*;?\s*", re.I)
HISTORY = re.compile(rf"\s*DESC(?:RIBE)?\s+HISTORY\s+{_NAME}(?:\s+LIMIT\s+(\d+))?\s*;?\s*", re.I)
SHOW_COLUMNS = re.compile(rf"\s*SHOW\s+COLUMNS\s+(?:IN|FROM)\s+{_NAME}(?:\s+(?:IN|FROM)\s+({_PART}))?\s*;?\s*", re.I)


@dataclass(frozen=True)
class SchemaQuestion:
    """A statement the schema files answer: which table (`layer.table`, with the catalog as
    written when there is one) and what is asked."""

    table: str
    kind: str  # "describe" | "columns" | "ddl"

    def answer(self, schema: TableSchema, location: str) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
        """(header, rows), in Spark's own layout for these statements."""
        if self.kind == "columns":
            return ("col_name",), [(c.name,) for c in schema.columns]
        if self.kind == "ddl":
            return ("createtab_stmt",), [(_create_table(self.table, schema, location),)]
        rows = [(c.name, c.spark_type.simpleString(), c.description) for c in schema.columns]
        if schema.partition_by:
            rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
            rows += [(c.name, c.spark_type.simpleString(), c.description)
                     for c in schema.columns if c.name in schema.partition_by]
        return ("col_name", "data_type", "comment"), rows


def _sql_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _create_table(name: str, schema: TableSchema, location: str) -> str:
    columns = ",\n".join(f"  {c.name} {c.spark_type.simpleString().upper()}{'' if c.nullable else ' NOT NULL'} "
                         f"COMMENT {_sql_text(c.description)}" for c in schema.columns)
    lines = [f"CREATE TABLE {name} (", columns, ")", "USING delta"]
    if schema.partition_by:
        lines.append(f"PARTITIONED BY ({', '.join(schema.partition_by)})")
    lines += [f"COMMENT {_sql_text(schema.description)}", f"LOCATION {_sql_text(location)}"]
    return "\n".join(lines)


def schema_question(sql: str) -> SchemaQuestion | None:
    """The question when `sql` is DESCRIBE [TABLE] t or SHOW COLUMNS IN t [IN db]; else None."""
    bare, names = spark_reading(sql)
    unquote = lambda part: names[int(part[1:-1])] if part.startswith("`") else part  # noqa: E731
    if match := DESCRIBE.fullmatch(bare):
        parts = [unquote(p) for p in re.split(r"\s*\.\s*", match.group(1))]
        return SchemaQuestion(".".join(parts), "describe")
    if match := SHOW_CREATE.fullmatch(bare):
        return SchemaQuestion(".".join(unquote(p) for p in re.split(r"\s*\.\s*", match.group(1))), "ddl")
    if match := SHOW_COLUMNS.fullmatch(bare):
        parts = [unquote(p) for p in re.split(r"\s*\.\s*", match.group(1))]
        if match.group(2):
            parts = [unquote(match.group(2)), *parts[-1:]]
        return SchemaQuestion(".".join(parts), "columns")
    return None


def history_question(sql: str) -> tuple[str, int | None] | None:
    """(table, limit) when `sql` is DESCRIBE HISTORY t [LIMIT n]; else None."""
    bare, names = spark_reading(sql)
    match = HISTORY.fullmatch(bare)
    if not match:
        return None
    parts = [names[int(p[1:-1])] if p.startswith("`") else p for p in re.split(r"\s*\.\s*", match.group(1))]
    return ".".join(parts), int(match.group(2)) if match.group(2) else None
