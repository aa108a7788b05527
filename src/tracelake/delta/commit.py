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

import shutil
import sys
import uuid
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.delta import staged_files as staged_commit
from tracelake.io.parse import write_staged
from tracelake.schema import LAYERS, TableSchema

_view_counter = 0
# (session, table name) -> location registered in that session's catalog
_registered: dict[tuple[int, str], str] = {}


def _sql_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quote(name: str) -> str:
    return f"`{name}`"


def table_exists(spark: SparkSession, path: str) -> bool:
    if "://" not in path:
        return (Path(path) / "_delta_log").is_dir()
    try:
        spark.read.format("delta").load(path).schema  # noqa: B018 - touching it is the check
        return True
    except Exception:  # noqa: BLE001
        return False


def read_tables(spark: SparkSession, config: Config, *names: str) -> list[DataFrame | None]:
    """Lake tables by `layer.table`, None for each that does not exist yet."""
    frames: list[DataFrame | None] = []
    for name in names:
        path = config.table_path(*name.split(".", 1))
        frames.append(spark.read.format("delta").load(path) if table_exists(spark, path) else None)
    return frames


def register(spark: SparkSession, config: Config, layer: str, table: str) -> None:
    """Make `layer.table` resolve to the Delta path in this session's catalog."""
    name, path = config.table_name(layer, table), config.table_path(layer, table)
    key = (id(spark), name)
    if _registered.get(key) == path:
        return
    database = f"{config.catalog}.{layer}" if config.catalog else layer
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    if key in _registered:  # another lake in the same session: re-point (external: data stays)
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {_sql_str(path)}")
    _registered[key] = path


def list_lake_tables(config: Config) -> list[tuple[str, str]]:
    """(layer, table) for every Delta table under a local lake root."""
    root = Path(config.lake_root)
    found = []
    for layer in LAYERS:
        layer_dir = root / layer
        if layer_dir.is_dir():
            for child in sorted(layer_dir.iterdir()):
                log = child / "_delta_log"
                if not log.is_dir():
                    continue
                if not any(log.glob("*.json")) and not any(log.glob("*.checkpoint.parquet")):
                    # a killed first write or a copy gone wrong: skip it, so it breaks no other table
                    print(f"tracelake: warning: {layer}.{child.name} is not a table ({log} holds no commit); "
                          "re-ingest its source or remove the folder", file=sys.stderr)
                    continue
                found.append((layer, child.name))
    return found


def register_all(spark: SparkSession, config: Config) -> list[str]:
    names = []
    for layer, table in list_lake_tables(config):
        register(spark, config, layer, table)
        names.append(config.table_name(layer, table))
    return names


def conform(df: DataFrame, schema: TableSchema) -> DataFrame:
    """Exactly the schema's columns, in order, with the declared types and nullability.

    The union with an empty frame of the declared schema is what makes a nullable column stay
    nullable on Sail (casts and DataFrame.to are folded back to NOT NULL when the data has no
    nulls, and the first write would freeze that into the Delta schema)."""
    typed = df.select(*[F.col(c.name).cast(c.spark_type).alias(c.name) for c in schema.columns])
    return df.sparkSession.createDataFrame([], schema.spark_schema()).unionByName(typed)


def ensure_table(spark: SparkSession, config: Config, schema: TableSchema) -> str:
    path = config.table_path(schema.layer, schema.table)
    if not table_exists(spark, path):
        empty = spark.createDataFrame([], schema.spark_schema())
        writer = empty.write.format("delta").mode("overwrite")
        if schema.partition_by:
            writer = writer.partitionBy(*schema.partition_by)
        writer.save(path)
    register(spark, config, schema.layer, schema.table)
    return path


def _is_empty(spark: SparkSession, path: str) -> bool:
    return not spark.read.format("delta").load(path).limit(1).collect()


def _append(df: DataFrame, schema: TableSchema, path: str) -> None:
    """Append in one commit; no rows, no commit.

    The repartition is a fence for a Sail 0.7 fault: its NOT NULL check of a Delta append sees
    rows that a filter below it removes (the parse's failed rows, whose typed columns are null),
    and fails the write. Measured: the same frame appends after a repartition."""
    if not df.limit(1).collect():
        return
    _fenced(df, schema).write.format("delta").mode("append").save(path)


def _fenced(df: DataFrame, schema: TableSchema) -> DataFrame:
    """The frame conformed and repartitioned: the fence against Sail's NOT NULL check seeing
    rows a filter below it removed (see _append)."""
    partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 2)
    return conform(df, schema).repartition(partitions)


def _is_disjoint(
    spark: SparkSession, path: str, schema: TableSchema, df: DataFrame, source_files: list[str]
) -> bool:
    """True when a MERGE could only insert: the table holds no row of these files and no key
    of the new rows (e.g. the next hour of counters). Two cheap queries; a MERGE rewrites every
    file of the table, because its delete clause may touch any of them."""
    if _is_empty(spark, path):
        return True
    target = spark.read.format("delta").load(path)
    if source_files and target.filter(F.col("source_file").isin(source_files)).limit(1).collect():
        return False
    keys = target.select(*[F.col(k).alias(f"_t_{k}") for k in schema.keys])
    same_key = reduce(Column.__and__, [df[k].eqNullSafe(keys[f"_t_{k}"]) for k in schema.keys])
    return not df.join(keys, same_key, "left_semi").limit(1).collect()


def keys_stored_elsewhere(
    spark: SparkSession, config: Config, schema: TableSchema, source_files: list[str]
) -> DataFrame | None:
    """The table's keys that came from files other than `source_files`, with that file as
    `_stored_file` (one per key); None when the table is not there yet."""
    path = config.table_path(schema.layer, schema.table)
    if not schema.keys or not table_exists(spark, path):
        return None
    stored = spark.read.format("delta").load(path)
    if source_files:
        stored = stored.filter(~F.col("source_file").isin(source_files))
    return stored.select(*schema.keys, F.col("source_file").alias("_stored_file")).dropDuplicates(list(schema.keys))


def _temp_view(df: DataFrame) -> str:
    global _view_counter
    _view_counter += 1
    name = f"tracelake_src_{_view_counter}"
    df.createOrReplaceTempView(name)
    return name


def merge_by_key(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, source_files: list[str]
) -> None:
    """Upsert on the natural key; delete rows of `source_files` that the new data lacks."""
    path = ensure_table(spark, config, schema)
    if _is_disjoint(spark, path, schema, df, source_files):
        _append(df, schema, path)  # same result as the MERGE, at a fraction of the cost
        return
    heal_duplicate_keys(spark, config, schema, path, df)
    view = _temp_view(conform(df, schema))
    on = " AND ".join(f"t.{_quote(k)} <=> s.{_quote(k)}" for k in schema.keys)
    compared = [c.name for c in schema.data_columns] + ["source_file"]
    changed = " OR ".join(f"NOT (t.{_quote(c)} <=> s.{_quote(c)})" for c in compared)
    files = ", ".join(_sql_str(f) for f in source_files)
    delete = (
        f" WHEN NOT MATCHED BY SOURCE AND t.source_file IN ({files}) THEN DELETE" if files else ""
    )
    spark.sql(
        f"MERGE INTO delta.`{path}` AS t USING {view} AS s ON {on} "
        f"WHEN MATCHED AND ({changed}) THEN UPDATE SET * "
        f"WHEN NOT MATCHED THEN INSERT *{delete}"
    ).collect()
    spark.catalog.dropTempView(view)


def heal_duplicate_keys(spark: SparkSession, config: Config, schema: TableSchema, path: str, df: DataFrame) -> bool:
    """A key stored twice (left by two writers racing before the lake lock existed) would stay
    twice forever: a MERGE updates every copy. When a key of the incoming rows has copies, the
    table is rewritten with one row per key, in one commit of its own, before the MERGE."""
    keys = list(schema.keys)
    target = spark.read.format("delta").load(path)
    touched = target.join(df.select(*keys).distinct(), keys, "left_semi")
    if not touched.groupBy(*keys).count().filter("count > 1").limit(1).collect():
        return False
    print(f"tracelake: warning: {schema.full_name} holds keys more than once; keeping one row per key",
          file=sys.stderr)
    staged = f"{config.staging_dir.rstrip('/')}/heal-{uuid.uuid4().hex[:8]}"
    write_staged(target.dropDuplicates(keys), staged)  # read it all before replacing it
    healed = spark.read.parquet(staged)
    writer = _fenced(healed, schema).write.format("delta").mode("overwrite")
    if schema.partition_by:
        writer = writer.partitionBy(*schema.partition_by)
    writer.save(path)
    if "://" not in staged:
        shutil.rmtree(staged, ignore_errors=True)
    return True


def replace_by_source(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, source_files: list[str],
    compare: list[str] | None = None,
) -> None:
    """Replace exactly the rows of `source_files` in one commit, e.g. a quarantine table.

    A MERGE that matches nothing, inserts everything and deletes the files' old rows: with
    thousands of file names it is ~100x faster on Sail than overwrite + replaceWhere."""
    path = ensure_table(spark, config, schema)
    if _is_empty(spark, path):
        _append(df, schema, path)
        return
    files = ", ".join(_sql_str(f) for f in source_files)
    if compare is not None:  # an identical re-run: the files' rows are already these
        stored = spark.read.format("delta").load(path)
        stored = stored.filter(f"source_file IN ({files})") if files else stored.limit(0)
        if _unchanged(stored, df, compare):
            return
    delete = f" WHEN NOT MATCHED BY SOURCE AND t.source_file IN ({files}) THEN DELETE" if files else ""
    view = _temp_view(conform(df, schema))
    spark.sql(
        f"MERGE INTO delta.`{path}` AS t USING {view} AS s ON false "
        f"WHEN NOT MATCHED THEN INSERT *{delete}"
    ).collect()
    spark.catalog.dropTempView(view)


def overwrite(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, compare: list[str] | None = None,
) -> bool:
    """Replace the whole table in one commit: for derived (gold) tables. With `compare`, a
    replacement that would change nothing is skipped (an identical re-run makes no version).
    Returns whether a commit was made. The schema file decides the layout: a table written
    with other columns or partitioning (by an older tracelake) takes the new ones."""
    path = config.table_path(schema.layer, schema.table)
    if compare is not None and table_exists(spark, path):
        stored = spark.read.format("delta").load(path)
        if set(compare) <= set(stored.columns) and _unchanged(stored, df, compare):
            register(spark, config, schema.layer, schema.table)
            return False
    writer = conform(df, schema).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if schema.partition_by:
        writer = writer.partitionBy(*schema.partition_by)
    writer.save(path)
    register(spark, config, schema.layer, schema.table)
    return True


def append(spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame) -> None:
    path = ensure_table(spark, config, schema)
    conform(df, schema).write.format("delta").mode("append").save(path)


def partition_predicate(schema: TableSchema, partitions: list[tuple]) -> str:
    """SQL for `these partitions` of the table: (c1 = v1 AND c2 = v2) OR …"""
    terms = []
    for values in partitions:
        parts = [f"{_quote(c)} IS NULL" if v is None else f"{_quote(c)} = {_sql_str(str(v))}"
                 for c, v in zip(schema.partition_by, values)]
        terms.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(terms) if terms else "false"


def _fingerprint(df: DataFrame, columns: list[str]) -> tuple:
    """Row count and an order-free sum of row hashes: equal content, equal fingerprint."""
    row = df.agg(F.count(F.lit(1)), F.coalesce(F.sum(F.xxhash64(*columns).cast("decimal(38,0)")), F.lit(0))).first()
    return int(row[0]), str(row[1])


def _fingerprints(df: DataFrame, columns: list[str], by: list[str]) -> dict[tuple, tuple]:
    """_fingerprint per group of `by` values (as strings, None kept), in one scan."""
    rows = df.groupBy(*by).agg(
        F.count(F.lit(1)), F.coalesce(F.sum(F.xxhash64(*columns).cast("decimal(38,0)")), F.lit(0))).collect()
    return {_partition_key(r[: len(by)]): (int(r[-2]), str(r[-1])) for r in rows}


def _partition_key(values) -> tuple:
    return tuple(None if v is None else str(v) for v in values)


def changed_groups(stored: DataFrame, new: DataFrame, columns: list[str], by: str) -> list[str]:
    """The values of column `by` whose rows differ between `stored` and `new` (by fingerprint)."""
    before, after = _fingerprints(stored, columns, [by]), _fingerprints(new, columns, [by])
    return sorted(k[0] for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _changed_partitions(stored: DataFrame, df: DataFrame, schema: TableSchema, partitions: list[tuple],
                        compare: list[str]) -> list[tuple]:
    """The partitions whose new rows differ from the stored ones. New rows are hashed only for
    partitions that hold rows already (a new hour is written without that scan)."""
    by = list(schema.partition_by)
    before = _fingerprints(stored, compare, by)
    held = [p for p in partitions if _partition_key(p) in before]
    after = _fingerprints(df.filter(partition_predicate(schema, held)), compare, by) if held else {}
    return [p for p in partitions if _partition_key(p) not in before or before[_partition_key(p)] != after.get(_partition_key(p))]


def _unchanged(stored: DataFrame, df: DataFrame, compare: list[str], rows: int | None = None) -> bool:
    """Whether `df` holds the same rows as `stored` (by fingerprint); when nothing is stored, as
    for a new hour, only whether `df` is empty too (no hash over the new rows; `rows`, when the
    caller counted them already, spares even that look)."""
    before = _fingerprint(stored, compare)
    if before[0] == 0:
        return rows == 0 if rows is not None else not df.limit(1).collect()
    return before == _fingerprint(df, compare)


def _constant_partition(df: DataFrame, schema: TableSchema, values: tuple) -> DataFrame:
    """`df` with its partition columns as the literals they all hold (the caller's promise).

    A partitioned Delta write on Sail sorts its input by the partition columns first, a sort
    that holds every row in memory; for a column the plan knows is constant the sort is left
    out. Measured on a full hour (11.3 M rows): 13.3 s with the sort, 4.8 s without, as fast as
    an unpartitioned write."""
    return _with_partition_values(df, schema, values, df.columns)


def _with_partition_values(frame: DataFrame, schema: TableSchema, values: tuple, columns: list[str]) -> DataFrame:
    """`columns` of `frame`, the partition columns among them as the literals `values`."""
    types = {c.name: c.spark_type for c in schema.columns}
    constants = dict(zip(schema.partition_by, values))
    return frame.select(*[F.lit(constants[c]).cast(types[c]).alias(c) if c in constants else F.col(c)
                          for c in columns])


def stage_partition(df: DataFrame, schema: TableSchema, values: tuple, path: Path) -> DataFrame:
    """`df` (the rows of one partition, conformed) staged as the table lays out its data files,
    without the partition columns, and read back with them as literals: what
    replace_partitions(staged=path) then commits as it lies (staged_commit)."""
    write_staged(df.drop(*schema.partition_by), path)
    stored = df.sparkSession.read.parquet(str(path))
    if not stored.columns:  # zero rows: Sail writes no file
        return df.sparkSession.createDataFrame([], schema.spark_schema())
    return _with_partition_values(stored, schema, values, [c.name for c in schema.columns])


SPLIT_ROWS = 1_000_000  # below this, sorting a several-partition write costs less than staging its pieces


def _staged_pieces(df: DataFrame, schema: TableSchema, partitions: list[tuple], staging: Path) -> DataFrame:
    """`df`'s rows of each partition staged on their own, read back with the partition values as
    literals, and unioned. A partitioned Delta write of that union needs no sort (each piece's
    partition columns are known constants) where a write of `df` sorts all its rows first;
    measured on Sail 0.7.2: 10 M rows in two pieces written in 0.6 s at 0.54 GB, while a retry
    that rewrote two full hours of rates through the sort peaked at 7.5 GB. Literals over a
    filtered read fail there ("No field named"), hence staging rather than filtering."""
    pieces = []
    for i, values in enumerate(partitions):
        path = str(staging / f"part-{i}")
        write_staged(df.filter(partition_predicate(schema, [values])).drop(*schema.partition_by), path)
        piece = df.sparkSession.read.parquet(path)
        if not piece.columns:  # Sail writes no file for zero rows: the partition just empties
            continue
        pieces.append(_with_partition_values(piece, schema, values, df.columns))
    return reduce(DataFrame.unionByName, pieces) if pieces else df.limit(0)


def replace_partitions(
    spark: SparkSession, config: Config, schema: TableSchema, df: DataFrame, partitions: list[tuple],
    compare: list[str] | None = None, rows: int | None = None, checked: bool = False, fence: bool = True,
    staging: Path | None = None, staged: Path | None = None,
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
    partitions stages each on its own first (_staged_pieces) instead of sorting them all. With
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
            if _unchanged(stored, df, compare, rows):
                return False
        else:  # only the partitions that change are rewritten
            changing = _changed_partitions(stored, df, schema, partitions, compare)
            if not changing:
                return False
            if len(changing) < len(partitions):
                partitions, where, shrunk = changing, partition_predicate(schema, changing), True
    if staged is not None:
        staged_commit.commit_staged(path, schema, partitions[0], staged)
        return True
    if len(partitions) > 1 and staging is not None and (rows is None or rows >= SPLIT_ROWS):
        frame = conform(_staged_pieces(df, schema, partitions, staging), schema)
    else:
        source = df.filter(where) if shrunk else df
        frame = _fenced(source, schema) if fence else conform(source, schema)
        if len(partitions) == 1 and not shrunk:  # Sail 0.7.2 fails a write of literals over a filter
            frame = _constant_partition(frame, schema, partitions[0])
    writer = frame.write.format("delta").mode("overwrite").option("replaceWhere", where)
    writer.partitionBy(*schema.partition_by).save(path)
    return True
