"""One partition of a Delta table replaced by the Parquet files a run staged, committed as they lie.

Why: a table's rows are staged once so they can be gated before anything is written (a bronze
table's parse, a derived table's rows); the engine's Delta write then copies them (3.9 s for a
full hour of bronze.zj_port_counters, 2.0 s for its silver.zj_port_rates, 11.3 M rows). On the
local profile the lake is a folder this process writes, and the `deltalake` package (the local
profile's maintenance path already) can commit the staged files themselves: they are linked into
the partition's folder (_link_or_copy) and added in one overwrite commit that removes the
partition's old files, as the engine's `replaceWhere` write does. Other profiles, or a lake
behind a URL, keep the engine's write (commit.commit). Staged files may hold more columns than
the table (a parse's flags and computed values): a Delta reader reads a file by the table's
schema, so none of them is seen.

A crash between the link and the commit leaves files no version references: readers never see
them (a full vacuum of unreferenced files deletes them). The commit records `numRecords` per
file, not the min/max values the engine's writes add: an hour's files each span the whole hour,
so no reader could skip one by its time range anyway.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from pathlib import Path

from tracelake.config import Config
from tracelake.schema import TableSchema

PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.-]+")  # a folder name that needs no URL encoding in the log


def commits_staged(config: Config, schema: TableSchema, partitions: list[tuple] | None) -> bool:
    """Whether a replace of `partitions` can commit staged files: the local profile, a lake on
    this machine, exactly one partition whose values make plain folder names."""
    if config.profile != "local" or "://" in config.lake_root or not partitions or len(partitions) != 1:
        return False
    values = partitions[0]
    return len(values) == len(schema.partition_by) and all(
        v is not None and PLAIN_VALUE.fullmatch(str(v)) for v in values)


def _link_or_copy(staged: Path, target: Path) -> None:
    """`target` made to hold the staged file: a hard link where both lie on one file system (the
    lake's default staging folder, <lake>/_staging, does), which costs no copy and leaves the
    staged file for the run's later readers (a derived table built from a bronze table's staged
    parse); a copy elsewhere."""
    try:
        os.link(staged, target)
    except OSError:
        shutil.copyfile(staged, target)


def link_beside(files: Path, folder: Path) -> None:
    """The Parquet files under `files` made to lie in `folder` too (_link_or_copy), under names of
    their own: staged rows that a second table takes as they are (the port pass's rates)."""
    folder.mkdir(parents=True, exist_ok=True)
    for staged in sorted(files.rglob("*.parquet")):
        _link_or_copy(staged, folder / f"part-{uuid.uuid4().hex}-beside.parquet")


def staged_rows(path: Path) -> int:
    """The rows of the Parquet files under `path`, from their footers: a staged partition's count
    without a scan of it (the commit's numRecords come from the same place)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(staged).metadata.num_rows for staged in Path(path).rglob("*.parquet"))


def commit_staged(table_path: str, schema: TableSchema, values: tuple, path: Path) -> None:
    """Make the partition hold exactly the Parquet files under `path` (layout.stage_partition's,
    or a parse's, whose sub-folders io.staging.write_staged's `apart` made), in one commit; the
    table must exist."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    partition = {c: str(v) for c, v in zip(schema.partition_by, values)}
    folder = "/".join(f"{c}={v}" for c, v in partition.items())
    (Path(table_path) / folder).mkdir(parents=True, exist_ok=True)
    actions = []
    for staged in sorted(Path(path).rglob("*.parquet")):
        relative = f"{folder}/part-{uuid.uuid4().hex}-staged.parquet"
        target = Path(table_path) / relative
        _link_or_copy(staged, target)
        stat = target.stat()
        rows = pq.ParquetFile(target).metadata.num_rows
        actions.append(AddAction(relative, stat.st_size, partition, int(stat.st_mtime * 1000), True,
                                 json.dumps({"numRecords": rows})))
    table = DeltaTable(table_path)
    table.create_write_transaction(actions, mode="overwrite", schema=table.schema(),
                                   partition_by=list(schema.partition_by),
                                   partition_filters=[(c, "=", v) for c, v in partition.items()])
