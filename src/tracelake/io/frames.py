"""Frame helpers the engines need handled with care."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def union_all(frames: list[DataFrame]) -> DataFrame:
    """Union as a balanced tree: a left-deep chain of ~350 unions crashes the Sail server."""
    while len(frames) > 1:
        frames = [
            frames[i].unionByName(frames[i + 1]) if i + 1 < len(frames) else frames[i]
            for i in range(0, len(frames), 2)
        ]
    return frames[0]


# the Spark type of each Arrow type a pass yields
SPARK_TYPES = {pa.string(): "string", pa.int8(): "tinyint", pa.int32(): "int", pa.int64(): "bigint",
               pa.float64(): "double", pa.bool_(): "boolean", pa.timestamp("us", tz="UTC"): "timestamp",
               pa.list_(pa.string()): "array<string>"}


def arrow_ddl(schema: pa.Schema) -> str:
    """mapInArrow's output schema, as DDL, for the Arrow schema a pass yields."""
    return ", ".join(f"`{f.name}` {SPARK_TYPES[f.type]}" for f in schema)


def dictionary_probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function of takes_dictionary_strings' probe: one dictionary-encoded string `s` = 'x'."""
    for _ in batches:
        pass
    yield pa.record_batch([pa.DictionaryArray.from_arrays(pa.array([0], pa.int32()), pa.array(["x"]))], names=["s"])


_DICTIONARY: dict[int, bool] = {}


def takes_dictionary_strings(spark: SparkSession) -> bool:
    """Whether the engine takes a dictionary-encoded array for a string column of mapInArrow's
    output (Sail does; classic Spark fails the task: "Cannot call the method getUTF8String"):
    probed once per session with one row, so that no code branches on the profile. A pass whose
    strings repeat (a file's switch, port, name) then yields them as dictionaries, which the
    engine's Parquet writer takes for less (docs/engine-notes.md)."""
    key = id(spark)
    if key not in _DICTIONARY:
        try:
            rows = spark.range(1).mapInArrow(dictionary_probe, "s string").collect()
            _DICTIONARY[key] = [r[0] for r in rows] == ["x"]
        except Exception:  # noqa: BLE001 - any refusal means: decode in the function
            _DICTIONARY[key] = False
    return _DICTIONARY[key]


def union_plain(first: DataFrame, second: DataFrame) -> DataFrame:
    """first.unionByName(second) with every column rebuilt as a plain value (nullif with a null:
    the same value, no column comment). Sail 0.7.2's planner (DataFusion) refuses a union whose
    two sides carry different Delta column comments and differ in nullability ("Physical input
    schema should be the same as the one converted from logical input schema"): a stored table
    beside rows computed from another table does, since every table keeps its column docs. A
    plain column reference or a no-op cast is simplified away and keeps the comment."""
    return _plain(first).unionByName(_plain(second))


def _plain(df: DataFrame) -> DataFrame:
    return df.select([F.nullif(F.col(name), F.lit(None).cast(kind)).alias(name) for name, kind in df.dtypes])
