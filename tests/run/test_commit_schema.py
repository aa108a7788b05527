"""A whole overwrite writes the schema file's nullability into the Delta log, whatever the
engine infers for the frame (a sum, an outer join's columns, booleans), and a null in a NOT NULL
column fails the write with the column named, leaving the table as it was. A replacement of
files' rows answers whether it committed. Every write mode on a few rows, each repeat a no-op:
the spark profile's quick Delta I/O set in `bash dev test` (the whole ingests run in e2e)."""

from __future__ import annotations

from datetime import datetime

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from tracelake.delta import commit as lake
from tracelake.delta.maintenance import history, optimize
from tracelake.schema import parse_schema

SCHEMA = parse_schema({
    "table": "held", "layer": "gold", "description": "test", "partition_by": ["part"],
    "columns": [
        {"name": "part", "type": "string", "nullable": False, "description": "-"},
        {"name": "k", "type": "string", "nullable": False, "description": "-"},
        {"name": "total", "type": "bigint", "nullable": False, "description": "-"},
        {"name": "share", "type": "double", "nullable": False, "description": "-"},
        {"name": "big", "type": "boolean", "nullable": False, "description": "-"},
        {"name": "seen", "type": "timestamp", "nullable": False, "description": "-"},
        {"name": "tags", "type": "array<string>", "nullable": False, "description": "-"},
        {"name": "n", "type": "int", "nullable": False, "description": "-"},
        {"name": "note", "type": "string", "nullable": True, "description": "-"},
    ],
}, "test")
pytestmark = pytest.mark.delta_io


def _rows(spark, missing_total: bool = False):
    """Every NOT NULL column below comes out of a left join and a sum, so the engine calls it
    nullable; with `missing_total`, key 'c' has no sample and its total is null."""
    keys = spark.createDataFrame([("p1", "a"), ("p1", "b"), ("p2", "c")], "part string, k string")
    samples = spark.createDataFrame(
        [("a", 5, "x"), ("a", 7, "y"), ("b", 1, "z")] + ([] if missing_total else [("c", 2, "w")]),
        "k string, v bigint, tag string")
    joined = keys.join(samples, "k", "left")
    return joined.groupBy("part", "k").agg(
        F.sum("v").alias("total"), (F.sum("v") / 10.0).alias("share"), (F.sum("v") > 3).alias("big"),
        F.lit(datetime(2024, 5, 24)).alias("seen"), F.collect_list("tag").alias("tags"),
        F.count("v").cast("int").alias("n"), F.lit(None).cast("string").alias("note"))


def _stored(path: str) -> dict[str, bool]:
    return {f.name: f.nullable for f in DeltaTable(path).schema().fields}


def test_a_whole_overwrite_keeps_the_declared_nullability(spark, config):
    frame = _rows(spark)
    assert frame.schema["total"].nullable and frame.schema["big"].nullable  # what the engine infers
    assert lake.commit(spark, config, SCHEMA, frame, lake.Overwrite())
    path = config.table_path("gold", "held")
    assert _stored(path) == {c.name: c.nullable for c in SCHEMA.columns}
    got = sorted((r.k, r.total, r.big, sorted(r.tags), r.n) for r in spark.read.format("delta").load(path).collect())
    assert got == [("a", 12, True, ["x", "y"], 2), ("b", 1, False, ["z"], 1), ("c", 2, False, ["w"], 1)]


def test_a_null_in_a_not_null_column_fails_the_overwrite_and_leaves_the_table(spark, config):
    path = config.table_path("gold", "held")
    lake.commit(spark, config, SCHEMA, _rows(spark), lake.Overwrite())
    version = DeltaTable(path).version()  # 0; 1 where a DDL made the table first (delta-spark)
    with pytest.raises(Exception, match=r"gold\.held\.total is declared NOT NULL, and a row to be written holds a null"):
        lake.commit(spark, config, SCHEMA, _rows(spark, missing_total=True), lake.Overwrite())
    assert DeltaTable(path).version() == version
    assert sorted(r.total for r in spark.read.format("delta").load(path).collect()) == [1, 2, 12]


FILED = parse_schema({
    "table": "filed", "layer": "bronze", "description": "test", "partition_by": [],
    "columns": [
        {"name": "k", "type": "string", "nullable": False, "description": "-"},
        {"name": "v", "type": "bigint", "nullable": True, "description": "-"},
    ],
}, "test")


def test_replacing_a_files_rows_says_whether_it_committed(spark, config):
    """commit's answer for ReplaceFiles (the quarantine of merged tables): no rows into an empty
    table answer False, and so do the files' stored rows again, which add no version."""
    path = config.table_path("bronze", "filed")
    a = [("x", 1, "a.csv"), ("y", 2, "a.csv")]
    b = [("z", 3, "b.csv")]

    def put(data, files):
        frame = spark.createDataFrame(data, "k string, v bigint, source_file string").select(
            "*", F.lit("run").alias("ingest_run_id"), F.lit(datetime(2024, 5, 24)).alias("ingest_ts"))
        return lake.commit(spark, config, FILED, frame, lake.ReplaceFiles(files, compare=["k", "v", "source_file"]))

    def stored():
        return sorted(tuple(r) for r in spark.read.format("delta").load(path).select("k", "v", "source_file").collect())

    assert put([], ["a.csv"]) is False
    assert put(a + b, ["a.csv", "b.csv"]) is True
    version = DeltaTable(path).version()
    assert put(a, ["a.csv"]) is False  # the same rows of a.csv
    assert DeltaTable(path).version() == version
    assert put([("x", 5, "a.csv")], ["a.csv"]) is True
    assert DeltaTable(path).version() == version + 1
    assert stored() == [("x", 5, "a.csv"), ("z", 3, "b.csv")]


KEYED = parse_schema({
    "table": "keyed", "layer": "bronze", "description": "test", "partition_by": ["part"], "keys": ["k"],
    "columns": [
        {"name": "part", "type": "string", "nullable": False, "description": "-"},
        {"name": "k", "type": "string", "nullable": False, "description": "-"},
        {"name": "v", "type": "bigint", "nullable": True, "description": "-"},
    ],
}, "test")


def test_every_write_mode_commits_once_and_its_repeat_commits_nothing(engine, spark, config):
    """MergeByKey (an update, an insert, a file's lost row deleted), ReplacePartitions, Append,
    then OPTIMIZE, history and time travel, on the session's engine (delta-spark on `spark`)."""
    path = config.table_path("bronze", "keyed")

    def frame(data):
        return spark.createDataFrame(data, "part string, k string, v bigint, source_file string").select(
            "*", F.lit("run").alias("ingest_run_id"), F.lit(datetime(2024, 5, 24)).alias("ingest_ts"))

    def stored(version=None):
        reader = spark.read.format("delta")
        table = (reader.option("versionAsOf", version) if version is not None else reader).load(path)
        return sorted(tuple(r) for r in table.select("part", "k", "v", "source_file").collect())

    first = [("p1", "a", 1, "f1"), ("p1", "b", 2, "f1"), ("p2", "c", 3, "f2")]
    assert lake.commit(spark, config, KEYED, frame(first), lake.MergeByKey(["f1", "f2"]))
    merged = DeltaTable(path).version()
    lake.commit(spark, config, KEYED, frame(first), lake.MergeByKey(["f1", "f2"]))
    assert DeltaTable(path).version() == merged  # the same rows again: no commit
    lake.commit(spark, config, KEYED, frame([("p1", "a", 10, "f1"), ("p1", "d", 4, "f1")]), lake.MergeByKey(["f1"]))
    assert stored() == [("p1", "a", 10, "f1"), ("p1", "d", 4, "f1"), ("p2", "c", 3, "f2")]
    assert DeltaTable(path).version() == merged + 1
    compare = ["part", "k", "v", "source_file"]
    lake.commit(spark, config, KEYED, frame([("p2", "e", 5, "f3")]), lake.ReplacePartitions([("p2",)], compare=compare))
    replaced = DeltaTable(path).version()
    lake.commit(spark, config, KEYED, frame([("p2", "e", 5, "f3")]), lake.ReplacePartitions([("p2",)], compare=compare))
    assert DeltaTable(path).version() == replaced == merged + 2
    lake.commit(spark, config, KEYED, frame([("p3", "f", 6, "f4")]), lake.Append())
    lake.commit(spark, config, KEYED, frame([("p3", "g", 7, "f5")]), lake.Append())  # two files in p3
    final = [("p1", "a", 10, "f1"), ("p1", "d", 4, "f1"), ("p2", "e", 5, "f3"), ("p3", "f", 6, "f4"), ("p3", "g", 7, "f5")]
    assert stored() == final
    optimize(engine, path)
    assert history(engine, path, 1)[0].operation == "OPTIMIZE"
    assert stored(merged) == sorted(first)  # time travel to the first merge
    assert stored() == final
