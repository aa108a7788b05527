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


def appends_staged(config: Config) -> bool:
    """Whether an insert-only write may add staged files as they lie: the local profile, a lake on
    this machine (commits_staged's rule, for a table without partitions)."""
    return config.profile == "local" and "://" not in config.lake_root


def append_files(table_path: str, folders: list[Path]) -> bool:
    """Add the Parquet files under `folders` to an unpartitioned table in one append commit,
    each with its row count and the min/max values and null counts its footer states (the
    statistics the engine's own write records, so a reader skips files as before). Returns
    whether a commit was made (no files: none)."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    table = DeltaTable(table_path)
    columns = {field.name for field in table.schema().fields}
    actions = []
    for staged in sorted(p for folder in folders for p in Path(folder).rglob("*.parquet")):
        relative = f"part-{uuid.uuid4().hex}-staged.parquet"
        target = Path(table_path) / relative
        _link_or_copy(staged, target)
        stat = target.stat()
        actions.append(AddAction(relative, stat.st_size, {}, int(stat.st_mtime * 1000), True,
                                 json.dumps(file_stats(target, columns))))
    if not actions:
        return False
    table.create_write_transaction(actions, mode="append", schema=table.schema(), partition_by=[])
    return True


STATS_STRING_CHARS = 32  # Delta's default prefix for string statistics; a longer value gets none


def file_stats(path: Path, columns: set[str]) -> dict:
    """Delta file statistics from a Parquet footer: numRecords, and per column of the table with
    statistics in every row group its min, max and null count (strings only when no value is
    longer than Delta's prefix, so no bound is cut; timestamps as UTC text in milliseconds, the
    minimum rounded down and the maximum up)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    stats = {"numRecords": meta.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for j in range(meta.num_columns):
        column = meta.schema.column(j)
        if column.path not in columns:  # a staged column beside the table's, or nested
            continue
        groups = [meta.row_group(g).column(j).statistics for g in range(meta.num_row_groups)]
        if not groups or any(g is None or not g.has_null_count for g in groups):
            continue
        stats["nullCount"][column.path] = sum(g.null_count for g in groups)
        bounds = [(g.min, g.max) for g in groups if g.has_min_max]
        if not bounds:
            continue
        low, high = min(b[0] for b in bounds), max(b[1] for b in bounds)
        if isinstance(low, str) and max(len(low), len(high)) > STATS_STRING_CHARS:
            continue
        if isinstance(low, bytes):
            continue
        stats["minValues"][column.path], stats["maxValues"][column.path] = _stat_value(low), _stat_value(high, up=True)
    return stats


def _stat_value(value, up: bool = False):
    from datetime import UTC, datetime, timedelta

    if isinstance(value, datetime):
        value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        cut = value.replace(microsecond=value.microsecond // 1000 * 1000)
        if up and cut != value:
            cut += timedelta(milliseconds=1)
        return cut.strftime("%Y-%m-%dT%H:%M:%S.") + f"{cut.microsecond // 1000:03d}Z"
    return value
