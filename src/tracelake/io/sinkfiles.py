"""Parquet files a fast pass writes itself, where the engine's task runs: its kept rows, each
with the run's constant columns (its lineage), in a folder the kernel named (io.staging.Sink).

Why: a pass that hands its rows to the engine pays for the engine taking them in and writing
them out again; measured on 66 M AcmeTrace cells the pass itself (read, check, unpivot) took
10 s in one process and 23 s with its own zstd Parquet write, while the engine's staged write of
the same rows took 52 s. The rows written here are the table's rows as they are (delta.staged_files
may add the files to the table), so they hold the table's columns and the staged verdict.

Only pyarrow here: the engine's tasks import this module alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracelake.io import objectstore

TEXT = pa.dictionary(pa.int32(), pa.string())
TS = pa.timestamp("us", tz="UTC")
CODEC = "zstd"  # as the engine's staged writes (io.staging.STAGING_CODEC)
# values the Parquet writer encodes per call (pyarrow's default: 1,024): its per-call cost weighs
# on the many near-constant columns (lineage, flags, names). Measured on half a generated Zhejiang
# hour's sink (5.5 M rows, 36 columns), 4 + 4 writes alternated: 10 % less CPU, the same bytes
WRITE_BATCH_VALUES = 65_536


def sink_spec(folder: str, constants: dict) -> str:
    """The sink as text for a task's input row: its folder and constants (text, booleans, and a
    timestamp as epoch microseconds, tagged, so the task writes the same instant)."""
    return json.dumps({"folder": folder, "constants": {
        name: {"ts": int(value.timestamp() * 1_000_000)} if isinstance(value, datetime) else value
        for name, value in constants.items()}})


def _open_output(path: str):
    if "://" in path:
        fs, inner = objectstore.filesystem(path)
        return fs.open_output_stream(inner)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return pa.OSFile(path, "wb")


def _delete(path: str) -> None:
    if "://" in path:
        fs, inner = objectstore.filesystem(path)
        fs.delete_file(inner)
    else:
        os.remove(path)


class SinkFile:
    """One Parquet file of the sink: `columns` of each table written (strings dictionary-encoded),
    then the constants; removed again by `discard` (a pass that failed part way).

    The constants and the columns named `required` (those the pass never leaves null) are
    written as required Parquet columns: the writer then computes no definition levels for them.
    Measured on a quarter of a generated Zhejiang hour's sink (2.75 M rows, 37 columns, 26 of them
    required), 6 + 6 writes alternated: 0.85x the CPU (median), the same bytes. A null in such a
    column fails the write ("declared non-nullable but contains nulls"), and with it the pass's task."""

    def __init__(self, spec: str, name: str, columns: list[tuple[str, pa.DataType]],
                 required: Collection[str] = ()) -> None:
        given = json.loads(spec)
        self.path = f"{given['folder'].rstrip('/')}/{name}"
        self.constants = {}
        fields = [pa.field(n, t, nullable=n not in required) for n, t in columns]
        for name_, value in given["constants"].items():
            if isinstance(value, dict) and "ts" in value:
                self.constants[name_] = pa.scalar(value["ts"], TS)
                fields.append(pa.field(name_, TS, nullable=False))
            elif isinstance(value, bool):
                self.constants[name_] = pa.scalar(value, pa.bool_())
                fields.append(pa.field(name_, pa.bool_(), nullable=False))
            else:
                self.constants[name_] = pa.scalar(value, pa.string())
                fields.append(pa.field(name_, TEXT, nullable=False))
        self.schema = pa.schema(fields)
        self.columns = [n for n, _ in columns]
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        arrays = [table.column(n).cast(self.schema.field(n).type) for n in self.columns]
        arrays += [self._constant(n, table.num_rows) for n in self.constants]
        out = pa.Table.from_arrays(arrays, schema=self.schema)
        if self.writer is None:
            # no Arrow schema in the footer: every reader takes the columns by their Parquet types
            self.stream = _open_output(self.path)
            # dictionary pages for the text columns only: the Times and values (few repeats within a
            # row group's column) wrote 30 % slower with them and took 14 % more bytes (62 M cells)
            text = [f.name for f in self.schema if f.type == TEXT]
            self.writer = pq.ParquetWriter(self.stream, self.schema, compression=CODEC, store_schema=False,
                                           use_dictionary=text, write_batch_size=WRITE_BATCH_VALUES)
        self.writer.write_table(out)
        self.rows += table.num_rows

    def _constant(self, name: str, n: int) -> pa.Array:
        value = self.constants[name]
        if value.type == TS:
            return pa.array(np.full(n, value.value, np.int64), TS)
        if value.type == pa.bool_():
            return pa.array(np.full(n, value.as_py(), bool))
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value.as_py()], pa.string()))

    def close(self) -> None:
        """The file finished: its footer written and its stream closed (an object is stored only then)."""
        if self.writer is not None:
            self.writer.close()
            self.stream.close()
            self.writer = None

    def discard(self) -> None:
        if self.writer is not None:
            self.close()
            _delete(self.path)
        self.rows = 0

