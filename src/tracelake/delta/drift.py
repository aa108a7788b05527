"""A lake table as another Delta writer may have left it, held against its schema file before a
run writes: a column the file does not declare, a column of another type, or a CHECK constraint
tracelake never set. The engines failed mid-write with their own words (`Cannot resolve source
column … for MERGE`, a constraint violation), exit 1, naming neither the table nor the change.
A column the file declares and the table lacks is tracelake's own older layout, which the
derived tables' rebuild replaces, so it is not refused here."""

from __future__ import annotations

import json

from tracelake.errors import TracelakeError
from tracelake.schema import TableSchema

# Delta's primitive type names -> the schema files' (docs/architecture.md: one write API)
DELTA_TYPES = {"string": "string", "integer": "int", "long": "bigint", "double": "double", "boolean": "boolean",
               "timestamp": "timestamp", "date": "date", "float": "float", "short": "smallint", "byte": "tinyint"}
CONSTRAINT_KEY = "delta.constraints."


def _type_name(delta_type: object) -> str:
    if isinstance(delta_type, dict) and delta_type.get("type") == "array":
        return f"array<{_type_name(delta_type.get('elementType'))}>"
    return DELTA_TYPES.get(str(delta_type), str(delta_type))


def _configuration(metadata: dict) -> dict[str, str]:
    conf = metadata.get("configuration") or {}
    return dict(conf) if not isinstance(conf, dict) else conf  # a checkpoint's map arrives as pairs


def differences(metadata: dict | None, schema: TableSchema, renames: dict[str, str] | None = None) -> list[str]:
    """What another writer changed, in a user's words; [] when nothing tracelake cannot write over.
    `renames`: stored columns of an earlier release's names, held as their new names."""
    if not metadata or not metadata.get("schemaString"):
        return []
    renames = renames or {}
    stored = {renames.get(f["name"], f["name"]): _type_name(f["type"])
              for f in json.loads(metadata["schemaString"]).get("fields", [])}
    declared = {c.name: c.type for c in schema.columns}
    found = [f"a column {name} ({kind}) that the schema file does not declare"
             for name, kind in stored.items() if name not in declared]
    found += [f"column {name} as {stored[name]} where the schema file says {kind}"
              for name, kind in declared.items() if name in stored and stored[name] != kind]
    found += [f"a CHECK constraint {key.removeprefix(CONSTRAINT_KEY)} ({expr}) that tracelake never set"
              for key, expr in _configuration(metadata).items() if key.startswith(CONSTRAINT_KEY)]
    return found


def check_unchanged(metadata: dict | None, schema: TableSchema, name: str, renames: dict[str, str] | None = None) -> None:
    """Exit 2 naming the table and each change, before anything is written."""
    found = differences(metadata, schema, renames)
    if found:
        raise TracelakeError(
            f"{name}: another Delta writer changed it: it has {'; '.join(found)}. tracelake writes the columns "
            f"of schemas/{schema.full_name}.yaml: restore the table (Delta time travel), or remove it and ingest again")
