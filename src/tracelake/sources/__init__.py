"""Registry of ingestible sources: each maps a raw folder to bronze inputs, and may derive more.

A source module provides `plan(raw_dir, staging) -> list[TableInput]` and optionally
`DERIVED`: a list of (table, builder) where builder(spark, config) returns the derived frame
from lake tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from tracelake.errors import TracelakeError
from tracelake.reader import RawFile


@dataclass(frozen=True)
class TableInput:
    table: str
    files: list[RawFile]


def get_source(name: str) -> ModuleType:
    from tracelake.sources import itp, zeus

    registry = {"itp": itp, "zeus": zeus}
    if name not in registry:
        raise TracelakeError(f"unknown source '{name}' (known: {', '.join(sorted(registry))})")
    return registry[name]


SOURCE_NAMES = ("itp", "zeus")
