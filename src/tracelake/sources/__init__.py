"""Registry of ingestible sources: every module in this package is one source, named after it.

A source module provides:
  plan(raw_dir, staging) -> list[TableInput]   the bronze tables to fill and from which files;
  DERIVED: list of (table, builder, inputs)     tables rebuilt when any of `inputs` was ingested
                                                 in the run; builder(spark, config) returns the
                                                 frame, or None when its inputs are not there yet.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from pyspark.sql import DataFrame, SparkSession

from tracelake.errors import TracelakeError
from tracelake.reader import RawFile, Staged
from tracelake.schema import TableSchema

# (spark, files, schema) -> frame with the parse_lines contract: the schema's data columns,
# source_file, raw_line, raw_values_json, _row_id and _parse_errors (array<string>, empty = good);
# wrapped in Staged when the parser has materialized it itself
Parser = Callable[[SparkSession, list[RawFile], TableSchema], DataFrame | Staged]


@dataclass(frozen=True)
class TableInput:
    table: str
    files: list[RawFile]
    parser: Parser | None = None  # None: delimited text with the schema's fixed raw header


def source_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def get_source(name: str) -> ModuleType:
    if name not in source_names():
        raise TracelakeError(f"unknown source '{name}' (known: {', '.join(source_names())})")
    return importlib.import_module(f"tracelake.sources.{name}")


def combined_plan(parts: tuple[ModuleType, ...], raw_dir: Path, staging: Path, expected: str) -> list[TableInput]:
    """A source made of parts (each with its own plan): all their inputs, or an error naming
    what the release folder should have held."""
    inputs = [item for part in parts for item in part.plan(raw_dir, staging)]
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no {expected}")
    return inputs
