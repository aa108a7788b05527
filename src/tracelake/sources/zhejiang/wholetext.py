"""Each pod log as one row of its whole text, read where the engine's task runs.

The engine's own whole-file reads cut a larger file: Sail 0.7.2 splits a file of more than about
1 MB into two byte ranges, and `read.text(wholetext=True)` then gives two rows (each a run of
whole lines, in no stated order), while `binaryFile` gives the whole file twice. A log's line
numbers are its key, so the file is read here, by path, in a mapInArrow task: one row per file
on every profile. Bytes that are not UTF-8 become U+FFFD, as the engines' text readers do.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from tracelake.io import objectstore

FILE_FACTS = ("source_file", "task_id", "job", "pod", "role", "worker_index")
FILES_DDL = ", ".join(f"{name} string" for name in (*FILE_FACTS, "path"))
TEXTS = pa.schema([pa.field(name, pa.string()) for name in (*FILE_FACTS, "text")])
TEXTS_DDL = ", ".join(f"{name} string" for name in TEXTS.names)


def read_texts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: rows of FILES_DDL in, one row of TEXTS per file out."""
    for batch in batches:
        for row in batch.to_pylist():
            with objectstore.open_raw(row.pop("path")) as handle:
                row["text"] = handle.read().decode("utf-8", errors="replace")
            yield pa.RecordBatch.from_pylist([row], schema=TEXTS)


def whole_texts(spark: SparkSession, files: list[tuple]) -> DataFrame:
    """One row per file: its FILE_FACTS (each a string or None) and `text`. `files` are
    (*FILE_FACTS, path) tuples."""
    tasks = max(1, min(len(files), int(spark.conf.get("spark.sql.shuffle.partitions") or 2)))
    return spark.createDataFrame(files, FILES_DDL).repartition(tasks).mapInArrow(read_texts, TEXTS_DDL)
