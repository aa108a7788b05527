"""Lakes written by an earlier release, brought to this release's column names (docs/naming.md).

A schema file lists a column's earlier names under `formerly`. A stored table that still holds
one has its rows rewritten once, in one Delta commit, with the values unchanged and only the
names (and a partition column's name) new: a rename, not a rebuild, so it needs none of the
table's inputs and gives the same rows. On the local profile a metadata commit may follow, to
set the column comments Sail's write left out. Delta's own RENAME COLUMN would need column mapping, a table feature
that raises the reader protocol, which every reader of the lake (deltalake, Polars, DuckDB)
would then have to support."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.schema import TableSchema


@dataclass(frozen=True)
class Renaming:
    """One stored table whose columns carry names of an earlier release."""

    schema: TableSchema
    names: dict[str, str]  # stored former name -> this release's name

    def describe(self) -> str:
        return ", ".join(f"{old} -> {new}" for old, new in self.names.items())


def stored_columns(metadata: dict | None) -> list[str]:
    """The column names of a table's newest metaData action ([] when it has none)."""
    if not metadata or not metadata.get("schemaString"):
        return []
    return [f["name"] for f in json.loads(metadata["schemaString"]).get("fields", [])]


def former_names(stored: list[str], schema: TableSchema) -> dict[str, str]:
    """{former name: current name} for each stored column the schema file knows by another name;
    a table holding both names (not written by tracelake) is left to the drift check."""
    present = set(stored)
    return {old: c.name for c in schema.columns for old in c.formerly if old in present and c.name not in present}


def renaming(metadata: dict | None, schema: TableSchema) -> Renaming | None:
    names = former_names(stored_columns(metadata), schema)
    return Renaming(schema, names) if names else None


def rename_table(spark: SparkSession, config: Config, renamed: Renaming) -> None:
    """Rewrite the table under this release's names in one commit (an overwrite: a crash leaves
    the table as it was), its column comments those of the schema file. A column this release
    added (and a partitioning by it) is left to the table's next build, which a rename cannot
    make: gold.zj_iteration_network's hour_cst, which its next rebuild adds by building it whole."""
    from tracelake.delta.commit import Overwrite, commit

    schema = renamed.schema
    path = config.table_path(schema.layer, schema.table)
    stored = spark.read.format("delta").load(path)
    back = {new: old for old, new in renamed.names.items()}
    kept = tuple(c for c in schema.columns if back.get(c.name, c.name) in stored.columns)
    if len(kept) < len(schema.columns):  # columns of this release only: the table's next build brings them
        names = {c.name for c in kept}
        schema = replace(schema, columns=kept, partition_by=tuple(p for p in schema.partition_by if p in names))
    frame = stored.select(*[F.col(back.get(c.name, c.name)).alias(c.name, metadata={"comment": c.comment})
                            for c in kept])
    commit(spark, config, schema, frame, Overwrite())
    if config.profile == "local" and "://" not in config.lake_root:
        restore_comments(config, schema)


def restore_comments(config: Config, schema: TableSchema) -> None:
    """The schema file's column comments and table description on a local table, where Sail's
    overwrite of a new layout keeps only its own metadata key."""
    from deltalake import DeltaTable

    table = DeltaTable(str(Path(config.lake_root) / schema.layer / schema.table))
    stored = {f.name: (f.metadata or {}).get("comment") for f in table.schema().fields}
    for column in schema.columns:
        if column.name in stored and stored[column.name] != column.comment:
            table.alter.set_column_metadata(column.name, {"comment": column.comment})
    if table.metadata().description != schema.description:
        table.alter.set_table_description(schema.description)


def rename_all(spark: SparkSession, config: Config, found: list[Renaming], say) -> None:
    """Rename each table of `found`, saying what it did through `say` (a line per table)."""
    for renamed in found:
        rename_table(spark, config, renamed)
        say(f"{config.table_name(renamed.schema.layer, renamed.schema.table)}: columns renamed to this "
            f"release's names ({renamed.describe()}; docs/naming.md)")
