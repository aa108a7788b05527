"""Delta tables at <lake>/<layer>/<table>, registered as `layer.table` in the session catalog.

Every write is a single Delta commit, so a crash leaves the previous version intact. Ingest uses
MERGE on the natural key: unchanged rows are not touched, changed rows are updated, new rows are
inserted, and rows of a re-ingested file that are no longer there are deleted. Hence an identical
re-run changes no row and a changed file changes only its own rows. When the new rows share no
key and no file with the table (a first load, the next hour), the MERGE could only insert, and
an append does the same in one commit without rewriting the table.

Tables that grow with time declare `partition_by` (e.g. the CST hour folder) and are written by
partition instead: an ingest replaces exactly the partitions its files belong to, in one
commit, and nothing else of the table is read or rewritten, so its cost follows the rows being
ingested, not the table's size. A partition whose new content equals the stored one (same row
count and row fingerprint) is not written again: an identical re-run makes no commit.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.delta.catalog import (
    conform,
    creates_by_ddl,
    ensure_table,
    held_not_null,
    is_empty,
    key_bounds,
    partition_predicate,
    quote_name,
    register,
    sql_str,
    table_exists,
)
from tracelake.delta.fingerprint import changed_partitions, unchanged
from tracelake.delta.layout import SPLIT_ROWS, constant_partition, stage_partition, stage_partition_beside, staged_pieces
from tracelake.delta.staged_files import append_files, appends_staged, commit_staged, commits_staged, staged_rows
from tracelake.io import objectstore
from tracelake.io.staging import Scratch, heal_folder_name, stage, write_staged
from tracelake.schema import TableSchema

_view_counter = 0


@dataclass(frozen=True)
class MergeByKey:
    """Upsert on the schema's keys; rows of `source_files` that the new rows lack are deleted
    (a re-ingested file that lost rows). An append when no key and no file is shared."""

    source_files: Sequence[str]


@dataclass(frozen=True)
class ReplaceFiles:
    """Exactly the rows of `source_files` replaced by the new rows (a keyed table's quarantine).
    With `compare`, an identical replacement makes no commit."""

    source_files: Sequence[str]
    compare: Sequence[str] | None = None


@dataclass(frozen=True)
class ReplacePartitions:
    """`partitions` made to hold exactly the new rows; no other partition is read or touched.
    `compare`: the columns that make a row's content (an identical replacement makes no
    commit); `rows`: the new rows' count when the caller knows it; `checked`: the caller built
    the rows inside those partitions (no look for strays); `fence=False`: no filter below the
    rows drops rows with nulls in NOT NULL columns (see _append); `pieces`: a scratch folder
    where a write of several large partitions stages each apart instead of sorting them all."""

    partitions: Sequence[tuple]
    compare: Sequence[str] | None = None
    rows: int | None = None
    checked: bool = False
    fence: bool = True
    pieces: Scratch | None = None


@dataclass(frozen=True)
class Overwrite:
    """The whole table replaced (a derived table rebuilt whole); the schema file decides the
    layout. With `compare`, an identical replacement makes no commit."""

    compare: Sequence[str] | None = None


@dataclass(frozen=True)
class Append:
    """The rows added (ops.quality_results)."""


Mode = MergeByKey | ReplaceFiles | ReplacePartitions | Overwrite | Append


@dataclass(frozen=True)
class StagedRows:
    """Rows staged for a commit (stage_rows): `frame` reads them back; `files` is set when
    they lie as the table's data files of one partition, which commit() then adds as they are."""

    frame: DataFrame
    files: Scratch | None = None
    rows: int | None = None  # frame's row count where the files' footers give it (staged_rows)
    # a StagedBeside's own rows (not its files'): as staged where its files were linked in, else
    # as computed (None: none)
    computed: DataFrame | None = None
    # rows to add beside `files` in the same commit (a fast pass's rows parsed exactly), and the
    # scratch folder to write them to first
    beside: DataFrame | None = None
    beside_path: Scratch | None = None


@dataclass(frozen=True)
class StagedBeside:
    """A derived partition's rows, most of them already staged in the run: the Parquet files
    under `files` (rows of the partition by the table's column names, maybe with more columns)
    plus `rows` computed now (None: none). `whole` is all of them as one frame, for a commit that
    cannot take files (another profile, a lake behind a URL)."""

    files: Scratch
    rows: DataFrame | None
    whole: DataFrame
    # the parser whose pass staged the files: the rules its table's suite says it proves, with a
    # column of the files, are queried over `rows` only (gate.cleared_beside)
    made_by: str = ""


def stage_rows(config: Config, schema: TableSchema, df: DataFrame | StagedBeside, partitions: Sequence[tuple] | None,
               path: Scratch) -> StagedRows:
    """`df` conformed to the table and staged once at `path`, so the gate and the commit read
    the same stored rows. Where the commit can take the staged files themselves (one partition
    of a lake on this machine, staged_files.commits_staged), they are staged in the table's
    layout (a StagedBeside's files linked there as they lie, its own rows written beside them);
    otherwise as plain scratch Parquet."""
    if isinstance(df, StagedBeside):
        if commits_staged(config, schema, list(partitions or ())) and not objectstore.is_url(str(df.files)):
            own = None if df.rows is None else conform(df.rows, schema)
            beside = stage_partition_beside(df.whole.sparkSession, own, df.files, schema, partitions[0], path)
            if beside is not None:
                return StagedRows(beside[0], path, staged_rows(path.local()), computed=beside[1])
        computed, df = df.rows, df.whole
    else:
        computed = None
    rows = conform(df, schema)
    if commits_staged(config, schema, list(partitions or ())):
        return StagedRows(stage_partition(rows, schema, partitions[0], path), path, computed=computed)
    return StagedRows(stage(rows, path), computed=computed)


def commit(spark: SparkSession, config: Config, schema: TableSchema, rows: DataFrame | StagedRows, mode: Mode) -> bool:
    """The one way a table changes: `rows` written to `schema`'s table as `mode` says, in one
    Delta commit. This alone chooses between the engine's write and committing staged files.
    Returns whether a commit was made (False: nothing would change)."""
    frame, files = (rows.frame, rows.files) if isinstance(rows, StagedRows) else (rows, None)
    match mode:
        case MergeByKey(source_files):
            if isinstance(rows, StagedRows) and rows.files is not None and appends_staged(config) \
                    and is_empty(spark, ensure_table(spark, config, schema)):
                return _append_staged(spark, config, schema, rows)
            return _merge_by_key(spark, config, schema, frame, list(source_files))
        case ReplaceFiles(source_files, compare):
            return _replace_by_source(spark, config, schema, frame, list(source_files),
                                      None if compare is None else list(compare))
        case ReplacePartitions():
            return _replace_partitions(
                spark, config, schema, frame, list(mode.partitions),
                compare=None if mode.compare is None else list(mode.compare), rows=mode.rows, checked=mode.checked,
                fence=mode.fence, staging=mode.pieces, staged=files)
        case Overwrite(compare):
            return _overwrite(spark, config, schema, frame, None if compare is None else list(compare))
        case Append():
            _append_rows(spark, config, schema, frame)
            return True
    raise TypeError(f"not a write mode: {mode!r}")




def _append_staged(spark: SparkSession, config: Config, schema: TableSchema, rows: StagedRows) -> bool:
    """A MERGE into an empty table, which only inserts: the staged files added as they lie, with
    the rows beside them written into files of their own, in one commit (staged_files)."""
    folders = [rows.files]
    if rows.beside is not None:
        write_staged(conform(rows.beside, schema), rows.beside_path)
        folders.append(rows.beside_path)
    return append_files(config.table_path(schema.layer, schema.table), [f.local() for f in folders if f.exists()])


def _append(df: DataFrame, schema: TableSchema, path: str) -> bool:
    """Append in one commit; no rows, no commit. Returns whether a commit was made.

    The repartition is a fence for a Sail 0.7 fault: its NOT NULL check of a Delta append sees
    rows that a filter below it removes (the parse's failed rows, whose typed columns are null),
    and fails the write. Measured: the same frame appends after a repartition."""
    if not df.limit(1).collect():
        return False
    _fenced(df, schema).write.format("delta").mode("append").save(path)
    return True


def _fenced(df: DataFrame, schema: TableSchema) -> DataFrame:
    """The frame conformed and repartitioned: the fence against Sail's NOT NULL check seeing
    rows a filter below it removed (see _append)."""
    partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 2)
    return conform(df, schema).repartition(partitions)


def _is_disjoint(
    spark: SparkSession, path: str, schema: TableSchema, df: DataFrame, source_files: list[str], within: Column
) -> bool:
    """True when a MERGE could only insert: the table holds no row of these files and no key
    of the new rows (e.g. the next hour of counters). Two cheap queries; a MERGE rewrites every
    file of the table, because its delete clause may touch any of them."""
    target = spark.read.format("delta").load(path)
    if source_files and target.filter(F.col("source_file").isin(source_files)).limit(1).collect():
        return False
    keys = target.filter(within).select(*[F.col(k).alias(f"_t_{k}") for k in schema.keys])
    same_key = reduce(Column.__and__, [df[k].eqNullSafe(keys[f"_t_{k}"]) for k in schema.keys])
    return not df.join(keys, same_key, "left_semi").limit(1).collect()



def _temp_view(df: DataFrame) -> str:
    global _view_counter
    _view_counter += 1
    name = f"tracelake_src_{_view_counter}"
    df.createOrReplaceTempView(name)
    return name


def _merge_by_key(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, source_files: list[str]
) -> bool:
    """Upsert on the natural key; delete rows of `source_files` that the new data lacks.
    Returns whether a commit was made: when the files' stored rows are the new rows already,
    none (delta-spark commits a MERGE that changes no row as a new version; Sail does not)."""
    path = ensure_table(spark, config, schema)
    if is_empty(spark, path):
        return _append(df, schema, path)
    within = key_bounds(df, list(schema.keys))  # the stored rows that may share a key with df
    if _is_disjoint(spark, path, schema, df, source_files, within):
        return _append(df, schema, path)  # same result as the MERGE, at a fraction of the cost
    compared = [c.name for c in schema.data_columns] + ["source_file"]
    if source_files:  # keys are unique in the table: the same rows of these files change nothing
        stored = spark.read.format("delta").load(path).filter(F.col("source_file").isin(source_files))
        if unchanged(stored, conform(df, schema), compared):
            return False
    _heal_duplicate_keys(spark, config, schema, path, df, within)
    view = _temp_view(conform(df, schema))
    on = " AND ".join(f"t.{quote_name(k)} <=> s.{quote_name(k)}" for k in schema.keys)
    changed = " OR ".join(f"NOT (t.{quote_name(c)} <=> s.{quote_name(c)})" for c in compared)
    files = ", ".join(sql_str(f) for f in source_files)
    delete = (
        f" WHEN NOT MATCHED BY SOURCE AND t.source_file IN ({files}) THEN DELETE" if files else ""
    )
    spark.sql(
        f"MERGE INTO delta.`{path}` AS t USING {view} AS s ON {on} "
        f"WHEN MATCHED AND ({changed}) THEN UPDATE SET * "
        f"WHEN NOT MATCHED THEN INSERT *{delete}"
    ).collect()
    spark.catalog.dropTempView(view)
    return True


def _heal_duplicate_keys(spark: SparkSession, config: Config, schema: TableSchema, path: str, df: DataFrame,
                         within: Column) -> bool:
    """A key stored twice (left by two writers racing before the lake lock existed) would stay
    twice forever: a MERGE updates every copy. When a key of the incoming rows has copies, the
    table is rewritten with one row per key, in one commit of its own, before the MERGE."""
    keys = list(schema.keys)
    target = spark.read.format("delta").load(path)
    touched = target.filter(within).join(df.select(*keys).distinct(), keys, "left_semi")
    if not touched.groupBy(*keys).count().filter("count > 1").limit(1).collect():
        return False
    print(f"tracelake: warning: {schema.full_name} holds keys more than once; keeping one row per key",
          file=sys.stderr)
    # a lake at a URL heals through its own store (its engine may run elsewhere), unless a
    # staging folder was given for scratch
    root = config.staging_dir if "://" not in config.lake_root or config.raw.get("staging_dir") else \
        f"{config.lake_root}/_staging"
    staged = Scratch(root) / heal_folder_name()
    write_staged(target.dropDuplicates(keys), staged)  # read it all before replacing it
    healed = spark.read.parquet(str(staged))
    writer = _fenced(healed, schema).write.format("delta").mode("overwrite")
    if schema.partition_by:
        writer = writer.partitionBy(*schema.partition_by)
    writer.save(path)
    staged.remove()
    return True


def _replace_by_source(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, source_files: list[str],
    compare: list[str] | None = None,
) -> bool:
    """Replace exactly the rows of `source_files` in one commit, e.g. a quarantine table.
    Returns whether a commit was made (False: the files' stored rows are these already).

    A MERGE that matches nothing, inserts everything and deletes the files' old rows: with
    thousands of file names it is ~100x faster on Sail than overwrite + replaceWhere."""
    path = ensure_table(spark, config, schema)
    if is_empty(spark, path):
        return _append(df, schema, path)
    files = ", ".join(sql_str(f) for f in source_files)
    if compare is not None:  # an identical re-run: the files' rows are already these
        stored = spark.read.format("delta").load(path)
        stored = stored.filter(f"source_file IN ({files})") if files else stored.limit(0)
        if unchanged(stored, df, compare):
            return False
    delete = f" WHEN NOT MATCHED BY SOURCE AND t.source_file IN ({files}) THEN DELETE" if files else ""
    view = _temp_view(conform(df, schema))
    spark.sql(
        f"MERGE INTO delta.`{path}` AS t USING {view} AS s ON false "
        f"WHEN NOT MATCHED THEN INSERT *{delete}"
    ).collect()
    spark.catalog.dropTempView(view)
    return True


def _overwrite(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, compare: list[str] | None = None,
) -> bool:
    """Replace the whole table in one commit: for derived (gold) tables. With `compare`, a
    replacement that would change nothing is skipped (an identical re-run makes no version).
    Returns whether a commit was made. The schema file decides the layout: a table written
    with other columns or partitioning (by an older tracelake) takes the new ones."""
    path = config.table_path(schema.layer, schema.table)
    if compare is not None and table_exists(spark, path):
        stored = spark.read.format("delta").load(path)
        if set(compare) <= set(stored.columns) and unchanged(stored, df, compare):
            register(spark, config, schema.layer, schema.table)
            return False
    frame = held_not_null(conform(df, schema), schema)  # the new schema is the frame's
    writer = frame.write.format("delta").mode("overwrite")
    local = config.profile == "local"
    if not table_exists(spark, path) and (local or creates_by_ddl(spark, config) is not False):
        ensure_table(spark, config, schema)  # by DDL where the engine has it, by deltalake on local: comments kept
    if not (local or creates_by_ddl(spark, config)) or not _layout_is(spark, config, path, schema):
        # a table of an older layout takes the new one (its columns then nullable on delta-spark)
        writer = writer.option("overwriteSchema", "true")
    if schema.partition_by:
        writer = writer.partitionBy(*schema.partition_by)
    writer.save(path)
    register(spark, config, schema.layer, schema.table)
    return True


def _layout_is(spark: SparkSession, config: Config, path: str, schema: TableSchema) -> bool:
    """Whether the stored table has the schema file's columns (names, types, nullability, order)
    and partitioning (delta-spark's DESCRIBE DETAIL; on the local profile, the log as the
    `deltalake` package reads it: Sail has no DESCRIBE DETAIL)."""
    stored = spark.read.format("delta").load(path).schema
    if [(f.name, f.dataType.simpleString(), f.nullable) for f in stored.fields] != \
            [(c.name, c.spark_type.simpleString(), c.nullable) for c in schema.columns]:
        return False
    if config.profile == "local":
        from deltalake import DeltaTable

        seen = f"{config.lake_root.rstrip('/')}/{schema.layer}/{schema.table}"
        return list(DeltaTable(seen).metadata().partition_columns) == list(schema.partition_by)
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    return list(detail["partitionColumns"]) == list(schema.partition_by)


def _append_rows(spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame) -> None:
    path = ensure_table(spark, config, schema)
    conform(df, schema).write.format("delta").mode("append").save(path)


def _replace_partitions(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, partitions: list[tuple],
    compare: list[str] | None = None, rows: int | None = None, checked: bool = False, fence: bool = True,
    staging: Scratch | None = None, staged: Scratch | None = None,
) -> bool:
    """Make `partitions` of the table hold exactly `df`'s rows, in one commit; other partitions
    are neither read nor touched. `df` must hold rows of those partitions only (looked at unless
    `checked`: the caller built them so, e.g. from its files' partition constants). With `compare`
    (the columns that make a row's content, e.g. without lineage), a replacement that would
    change nothing is skipped; `rows` is df's row count when the caller knows it. `fence=False`
    when no filter below `df` removes rows with nulls in NOT NULL columns (e.g. rows read back
    from staging, or a parse where no row failed): the write then skips the repartition that
    _append explains, a shuffle of every row. With several partitions, only those whose rows
    change are rewritten (a retry that rebuilds an hour and the next one rewrites only the hour
    that changed). With `staging` (a scratch folder of the run), a write of several large
    partitions stages each on its own first (staged_pieces) instead of sorting them all. With
    `staged` (one partition, `df` read back by stage_partition from there), those
    files are committed as they lie instead of being written again.
    Returns whether a commit was made."""
    if not partitions:
        return False
    path = ensure_table(spark, config, schema)
    where = partition_predicate(schema, partitions)
    stray = [] if checked or rows == 0 else df.filter(f"NOT ({where})").limit(1).collect()
    if stray:
        raise ValueError(f"{schema.full_name}: a row outside the partitions being replaced: {stray[0]}")
    shrunk = False
    if compare is not None:
        stored = spark.read.format("delta").load(path).filter(where)
        if len(partitions) == 1:
            if unchanged(stored, df, compare, rows):
                return False
        else:  # only the partitions that change are rewritten
            changing = changed_partitions(stored, df, schema, partitions, compare)
            if not changing:
                return False
            if len(changing) < len(partitions):
                partitions, where, shrunk = changing, partition_predicate(schema, changing), True
    if staged is not None:
        commit_staged(path, schema, partitions[0], staged.local())
        return True
    if len(partitions) > 1 and staging is not None and (rows is None or rows >= SPLIT_ROWS):
        frame = conform(staged_pieces(df, schema, partitions, staging), schema)
    else:
        source = df.filter(where) if shrunk else df
        frame = _fenced(source, schema) if fence else conform(source, schema)
        if len(partitions) == 1 and not shrunk:  # Sail 0.7.2 fails a write of literals over a filter
            frame = constant_partition(frame, schema, partitions[0])
    writer = frame.write.format("delta").mode("overwrite").option("replaceWhere", where)
    writer.partitionBy(*schema.partition_by).save(path)
    return True
