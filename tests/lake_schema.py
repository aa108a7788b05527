"""A lake's tables as `deltalake` reads them, and where their stored schema drifts from the
schema files: what any Delta reader sees, whichever engine wrote the lake."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from tracelake.schema import LAYERS, table_schema


def lake_tables(lake: Path) -> dict[str, DeltaTable]:
    """Every committed table of a lake, by `layer/table`; opening one is the check that it reads."""
    found = {}
    for layer in LAYERS:
        for log in sorted((lake / layer).glob("*/_delta_log")):
            if any(log.glob("*.json")):
                found[f"{layer}/{log.parent.name}"] = DeltaTable(str(log.parent))
    return found


# Delta's names for the schema files' types
DELTA_TYPES = {"string": "string", "int": "integer", "bigint": "long", "double": "double", "boolean": "boolean",
               "timestamp": "timestamp", "date": "date", "array<string>": "array<string>"}


def schema_drift(name: str, table: DeltaTable) -> list[tuple[str, str, str]]:
    """(column, declared, stored) wherever a table's Delta schema differs from its schema file:
    a column missing on either side, another type, or NOT NULL not kept."""
    def delta_type(field) -> str:
        element = getattr(field.type, "element_type", None)
        return field.type.type if element is None else f"array<{element.type}>"

    declared = {c.name: f"{DELTA_TYPES[c.type]} {'null' if c.nullable else 'NOT NULL'}"
                for c in table_schema(name.replace("/", ".")).columns}
    stored = {f.name: f"{delta_type(f)} {'null' if f.nullable else 'NOT NULL'}" for f in table.schema().fields}
    return [(c, declared.get(c, "absent"), stored.get(c, "absent")) for c in sorted(declared.keys() | stored.keys())
            if declared.get(c) != stored.get(c)]
