"""Where the lake's tables are and how a session sees them: paths, existence, reads, registration
as `layer.table`, and conforming a frame to a table's schema."""

from __future__ import annotations

import os
import sys
import weakref
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.delta.drift import check_unchanged
from tracelake.delta.migrate import Renaming, renaming
from tracelake.delta.protocol import DamagedLog, check_protocol, has_commit, holds_a_commit, read_log
from tracelake.errors import TracelakeError
from tracelake.io import objectstore
from tracelake.schema import LAYERS, TableSchema, table_schema


@dataclass
class _Names:
    """What this process registered in one session's catalog: each table's location, and the
    databases made (one CREATE DATABASE per layer, not per table)."""

    tables: dict[str, str] = field(default_factory=dict)
    databases: set[str] = field(default_factory=set)


# per session, held only while the session lives: a new session never inherits an old one's names
# (keyed by id(), a stopped session's id could come back with the next one)
_registered: weakref.WeakKeyDictionary[SparkSession, _Names] = weakref.WeakKeyDictionary()


def sql_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_name(name: str) -> str:
    return f"`{name}`"


def table_exists(spark: SparkSession, path: str) -> bool:
    if "://" not in path:
        return has_commit(path)
    try:
        spark.read.format("delta").load(path).schema  # noqa: B018 - touching it is the check
        return True
    except Exception:  # noqa: BLE001
        return False


def lake_holds(spark: SparkSession, config: Config, name: str) -> bool:
    """Whether the lake holds table `layer.table` (a local one: a look at its log alone)."""
    return table_exists(spark, config.table_path(*name.split(".", 1)))


def read_tables(spark: SparkSession, config: Config, *names: str) -> list[DataFrame | None]:
    """Lake tables by `layer.table`, None for each that does not exist yet."""
    frames: list[DataFrame | None] = []
    for name in names:
        path = config.table_path(*name.split(".", 1))
        frames.append(spark.read.format("delta").load(path) if table_exists(spark, path) else None)
    return frames


def check_uc_location(lake_root: str) -> None:
    """Refuse, before any work, a lake whose tables Unity Catalog would not register: no table on
    files in a volume (Databricks' path rules for volumes), no external table on DBFS. For the
    Databricks entry points only: elsewhere /Volumes may be a plain disk (macOS)."""
    if lake_root == "/Volumes" or lake_root.startswith("/Volumes/"):
        rule = "is in a Unity Catalog volume, and Unity Catalog defines no table on files in a volume"
    elif lake_root.lower().startswith(("dbfs:", "/dbfs/")):
        rule = "is on DBFS, where Unity Catalog defines no external table"
    else:
        return
    raise TracelakeError(f"lake {lake_root} {rule}: put the lake on a cloud URI inside an external location "
                         "(s3://, abfss://, gs://)")


def register(spark: SparkSession, config: Config, layer: str, table: str) -> None:
    """Make `layer.table` resolve to the Delta path in this session's catalog."""
    name, path = config.table_name(layer, table), config.table_path(layer, table)
    check_readable(config, layer, table)  # each time: another writer may have raised it
    names = _registered.setdefault(spark, _Names())
    if names.tables.get(name) == path:
        return
    database = f"{config.catalog}.{layer}" if config.catalog else layer
    if database not in names.databases:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
        names.databases.add(database)
    if name in names.tables:  # another lake in the same session: re-point (external: data stays)
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {sql_str(path)}")
    names.tables[name] = path


def list_lake_tables(config: Config) -> list[tuple[str, str]]:
    """(layer, table) for every Delta table under the lake root: a local folder, or an object
    store listed through the store itself (io.objectstore)."""
    if "://" in config.lake_root:
        return _listed_tables(config.lake_root)
    root = Path(config.lake_root)
    found = []
    for layer in LAYERS:
        layer_dir = root / layer
        if layer_dir.is_dir():
            for child in sorted(layer_dir.iterdir()):
                log = child / "_delta_log"
                if not log.is_dir():
                    _not_a_folder_table(layer, child)
                    continue
                if not holds_a_commit(os.listdir(log)):
                    _not_a_table(layer, child.name, str(log))
                    continue
                found.append((layer, child.name))
    return found


def _not_a_folder_table(layer: str, child: Path) -> None:
    """A table whose folder became a file, or that lost its log, is named rather than dropped
    from the listing without a word; a hidden or scratch entry is passed over."""
    if child.name.startswith((".", "_")):
        return
    what = "a file" if not child.is_dir() else "a folder with no _delta_log" if any(child.iterdir()) else None
    if what:
        print(f"tracelake: warning: {layer}.{child.name} is not a table ({child} is {what}); "
              "restore it or re-ingest its source", file=sys.stderr)


def _not_a_table(layer: str, table: str, log: str) -> None:
    # a killed first write or a copy gone wrong: skip it, so it breaks no other table
    print(f"tracelake: warning: {layer}.{table} is not a table ({log} holds no commit); "
          "re-ingest its source or remove the folder", file=sys.stderr)


def _listed_tables(root: str) -> list[tuple[str, str]]:
    found = []
    layers = set(objectstore.list_dirs(root))
    for layer in LAYERS:
        if layer not in layers:
            continue
        for table in objectstore.list_dirs(f"{root}/{layer}"):
            log = f"{root}/{layer}/{table}/_delta_log"
            names = [rel for rel, _ in objectstore.list_files(log) if "/" not in rel]
            if not holds_a_commit(names):
                if names:  # a log without a commit; no log at all is no table
                    _not_a_table(layer, table, log)
                continue
            found.append((layer, table))
    return found


def check_writable(config: Config) -> list[Renaming]:
    """Before a run reads or writes anything: every lake table's protocol is one this release
    writes (a run reads stored rows of its tables, and rebuilds tables across sources). Returns
    the tables an earlier release wrote under other column names, which the run renames first."""
    found = []
    for layer, table in list_lake_tables(config):
        name, path = config.table_name(layer, table), _seen_here(config, layer, table)
        state = read_log(path, name)  # once: its protocol and its metadata
        check_protocol(path, name, writing=True, state=state)
        try:
            schema = table_schema(f"{layer}.{table}")
        except TracelakeError:  # a table no schema file names: not tracelake's to write
            continue
        renamed = renaming(state.metadata, schema)
        check_unchanged(state.metadata, schema, name, renamed.names if renamed else {})
        if renamed:
            found.append(renamed)
    return found


_warned: set[str] = set()


def missing_data_files(config: Config, layer: str, table: str) -> list[str]:
    """The data files the table's log lists that are gone from a local lake (a row count read
    from the log would still count their rows); [] for a lake in a store (not listed here)."""
    if "://" in config.lake_root:
        return []
    from deltalake import DeltaTable

    files = DeltaTable(_seen_here(config, layer, table)).file_uris()
    return [f for f in files if not Path(f.removeprefix("file://")).exists()]


_older: set[str] = set()  # tables seen under an earlier release's column names (register_all warns)


def check_readable(config: Config, layer: str, table: str) -> None:
    """DamagedLog (or another TracelakeError) naming the table when this release cannot read it;
    a table still under an earlier release's column names is noted in _older."""
    path, name = _seen_here(config, layer, table), config.table_name(layer, table)
    state = read_log(path, name)
    check_protocol(path, name, state=state)
    try:
        renamed = renaming(state.metadata, table_schema(f"{layer}.{table}"))
    except TracelakeError:  # no schema file names it
        return
    if renamed:
        _older.add(name)
    else:
        _older.discard(name)


def _unregister(spark: SparkSession, name: str) -> None:
    """Forget `name` in this session: a name another lake's table held must not answer for a
    table of this lake that cannot be read."""
    names = _registered.setdefault(spark, _Names())
    if names.tables.pop(name, None) is not None:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def register_all(spark: SparkSession, config: Config) -> list[str]:
    """Register every readable table; a table whose log is damaged is left out with a warning
    naming it and the file, so the others still answer."""
    names = []
    for layer, table in list_lake_tables(config):
        try:
            register(spark, config, layer, table)
        except DamagedLog as exc:
            if str(exc) not in _warned:  # once a process, however often a command registers
                _warned.add(str(exc))
                print(f"tracelake: warning: {exc}; the other tables read", file=sys.stderr)
            _unregister(spark, config.table_name(layer, table))
            continue
        names.append(config.table_name(layer, table))
    older = sorted(_older & set(names) - _warned)
    if older:  # one line, once a process: the tables answer under their old names meanwhile
        _warned.update(older)
        print(f"tracelake: warning: {len(older)} table(s) still have an earlier release's column names "
              f"({', '.join(older)}): `tracelake migrate` (or the next ingest) renames them (docs/naming.md)",
              file=sys.stderr)
    return names


def conform(df: DataFrame, schema: TableSchema) -> DataFrame:
    """Exactly the schema's columns, in order, with the declared types and nullability.

    The union with an empty frame of the declared schema is what makes a nullable column stay
    nullable on Sail (casts and DataFrame.to are folded back to NOT NULL when the data has no
    nulls, and the first write would freeze that into the Delta schema)."""
    typed = df.select(*[F.col(c.name).cast(c.spark_type).alias(c.name) for c in schema.columns])
    return df.sparkSession.createDataFrame([], schema.spark_schema()).unionByName(typed)


# a value of each type for a column the schema declares NOT NULL: never taken (a null fails the
# write first), it only shows the engine that the column cannot be null (see held_not_null)
_STAND_INS = {
    "string": "", "int": 0, "bigint": 0, "double": 0.0,
    "timestamp": datetime(1970, 1, 1, tzinfo=UTC), "date": date(1970, 1, 1),
}


def held_not_null(df: DataFrame, schema: TableSchema) -> DataFrame:
    """`df` (conformed) with each column the schema declares NOT NULL held to it: a row with a
    null there fails the query with the table and column named, and the engine sees the column
    NOT NULL. For a write that replaces the table's schema (a whole overwrite): it takes the
    frame's nullability into the Delta log, and the engine calls a sum, an outer join's column or
    a union nullable whatever the rows hold, so the table would declare less than schemas/ does.
    In the same pass as the write: a CASE per column, no second read."""
    held = []
    for c in schema.columns:
        col = F.col(c.name)
        if not c.nullable:
            message = f"{schema.full_name}.{c.name} is declared NOT NULL, and a row to be written holds a null there"
            checked = F.when(col.isNull(), F.raise_error(F.lit(message)))
            if c.type == "boolean":  # (Sail 0.7.2) a coalesce of booleans is written nullable; of ints, not
                col = F.coalesce(checked.otherwise(col.cast("int")), F.lit(0)).cast("boolean")
            else:
                stand_in = F.array() if c.type == "array<string>" else F.lit(_STAND_INS[c.type])
                col = F.coalesce(checked.otherwise(col), stand_in.cast(c.spark_type))
        held.append(col.alias(c.name))
    return df.select(*held)


# per session: whether its engine creates tables by DDL (None: not asked yet)
_by_ddl: weakref.WeakKeyDictionary[SparkSession, bool] = weakref.WeakKeyDictionary()


def creates_by_ddl(spark: SparkSession, config: Config) -> bool | None:
    """Whether a table is created by SQL DDL (delta-spark) rather than by writing an empty frame
    (Sail, whose SQL has no `CREATE TABLE delta.`path``): delta-spark makes every column of a
    DataFrame-created table nullable, and puts its partition columns first; only DDL keeps the
    schema file's NOT NULL columns and order. `spark`: yes; `local`: no; `connect`: as the
    server answered the first DDL of the session (None before that)."""
    if config.profile != "connect":
        return config.profile == "spark"
    return _by_ddl.get(spark)


def create_ddl(schema: TableSchema, path: str) -> str:
    """delta-spark's CREATE TABLE: the schema file's order, NOT NULL, column comments (description
    and unit) and the table's description as its comment."""
    columns = ", ".join(f"{quote_name(c.name)} {c.spark_type.simpleString().upper()}{'' if c.nullable else ' NOT NULL'}"
                        f" COMMENT {sql_str(c.comment)}" for c in schema.columns)
    parts = f" PARTITIONED BY ({', '.join(quote_name(c) for c in schema.partition_by)})" if schema.partition_by else ""
    return (f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({columns}) USING delta{parts} "
            f"COMMENT {sql_str(schema.description)}")


def _create_with_deltalake(config: Config, schema: TableSchema) -> None:
    """The local profile's empty table, created by the `deltalake` package: Sail keeps a
    frame's column metadata only under a key of its own (`SPARK::metadata::json`), so the
    column comments and the table's description that other readers look for are written here,
    and Sail's later writes keep them (measured: append, replaceWhere, overwrite, MERGE)."""
    from deltalake import DeltaTable

    DeltaTable.create(_seen_here(config, schema.layer, schema.table), schema.arrow_schema(), mode="ignore",
                      partition_by=list(schema.partition_by) or None, description=schema.description)


def _seen_here(config: Config, layer: str, table: str) -> str:
    """The table's folder as this process sees it (an engine may see the lake at another path)."""
    return f"{config.lake_root.rstrip('/')}/{layer}/{table}"


def ensure_table(spark: SparkSession, config: Config, schema: TableSchema) -> str:
    path = config.table_path(schema.layer, schema.table)
    check_protocol(_seen_here(config, schema.layer, schema.table), config.table_name(schema.layer, schema.table),
                   writing=True)
    if not table_exists(spark, path) and creates_by_ddl(spark, config) is not False:
        try:
            spark.sql(create_ddl(schema, path)).collect()
            _by_ddl[spark] = True
        except Exception:  # noqa: BLE001 - a Connect server without it (Sail): the frame's way below
            if config.profile != "connect":
                raise
            _by_ddl[spark] = False
    if not table_exists(spark, path) and config.profile == "local":
        _create_with_deltalake(config, schema)
    if not table_exists(spark, path):
        empty = spark.createDataFrame([], schema.spark_schema())
        writer = empty.write.format("delta").mode("overwrite")
        if schema.partition_by:
            writer = writer.partitionBy(*schema.partition_by)
        writer.save(path)
    register(spark, config, schema.layer, schema.table)
    return path


def is_empty(spark: SparkSession, path: str) -> bool:
    return not spark.read.format("delta").load(path).limit(1).collect()


def partition_predicate(schema: TableSchema, partitions: list[tuple]) -> str:
    """SQL for `these partitions` of the table: (c1 = v1 AND c2 = v2) OR …"""
    terms = []
    for values in partitions:
        parts = [f"{quote_name(c)} IS NULL" if v is None else f"{quote_name(c)} = {sql_str(str(v))}"
                 for c, v in zip(schema.partition_by, values)]
        terms.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(terms) if terms else "false"

def keys_stored_elsewhere(
    spark: SparkSession, config: Config, schema: TableSchema, source_files: list[str], rows: DataFrame,
) -> DataFrame | None:
    """The table's keys that `rows` may share and that came from files other than
    `source_files`, with that file as `_stored_file` (one per key); None when the table is not
    there yet or holds no row. Only stored rows within the rows' key ranges are read (key_bounds)."""
    path = config.table_path(schema.layer, schema.table)
    if not schema.keys or not table_exists(spark, path) or is_empty(spark, path):
        return None
    stored = spark.read.format("delta").load(path).filter(key_bounds(rows, list(schema.keys)))
    if source_files:
        stored = stored.filter(~F.col("source_file").isin(source_files))
    return stored.select(*schema.keys, F.col("source_file").alias("_stored_file")).dropDuplicates(list(schema.keys))


def key_bounds(rows: DataFrame, keys: list[str]) -> Column:
    """A filter on a table's rows that every row sharing a key with `rows` passes: each key
    column between the rows' least and greatest value (or null, when a row's is). One aggregate
    over `rows`; the table's file statistics then skip every file outside those ranges, so a
    look for shared keys costs what overlaps the new rows, not the whole table (a keyed table
    holding 66 M AcmeTrace cells took 24 GB and was killed looking at all of them for an
    ingest of the next month). Floating-point keys are not bounded."""
    types = dict(rows.dtypes)
    bounded = [k for k in keys if types[k] not in ("float", "double")]
    if not bounded:
        return F.lit(True)
    aggs = [agg for k in bounded for agg in (
        F.min(k).cast("string").alias(f"lo_{k}"), F.max(k).cast("string").alias(f"hi_{k}"),
        (F.count(k) < F.count(F.lit(1))).alias(f"null_{k}"))]
    found = rows.agg(*aggs).first()
    within = F.lit(True)
    for k in bounded:
        lo, hi, nulls = found[f"lo_{k}"], found[f"hi_{k}"], found[f"null_{k}"]
        kind = types[k]
        inside = F.lit(False) if lo is None else F.col(k).between(F.lit(lo).cast(kind), F.lit(hi).cast(kind))
        within = within & (inside | F.col(k).isNull() if nulls else inside)
    return within
