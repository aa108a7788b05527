"""One pass over each wide metric file (DCGM, Prometheus): read, checked and unpivoted in Arrow.

A file is the unit: the function reads it with pyarrow's streaming CSV reader (by path, where
the engine's task runs: a local path or any URL pyarrow.fs opens; `.gz` decompressed on the
way), a block of lines at a time so memory does not grow with the file, and turns each block
into long rows with numpy: one row per non-empty cell, its node, GPU and IB device from the
header facts the driver parsed once per file (utilization.utilization_header_rows).

What it checks, and what it does when a check fails: every line has the header's field count
(an empty line or a stray comma fails the read), Time is a whole number of epoch seconds under
1e11 on every line, and every non-empty cell is a finite number pyarrow reads as a double (a
subset of what the exact parse's cast accepts, to the same value: no space, quote, `nan` or
`inf`). A file that fails any check yields a marker row (KIND `marker`); what it yielded before
is dropped with it: utilization.parse_utilization_files parses every file of that file's series
(cluster, metric) line by line, so every quarantine row and reason is the exact parse's.

Duplicate Time rows need the other files of a series (the monthly files of a metric), which this
function does not see: it yields one `line` row per line (cluster, metric, ts), and the caller
finds the (series, Time) keys that more than one line has, takes their cells from the exact
parse of those lines alone (ranked as before), and drops the pass's cells of those keys.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.fs as pafs

KIND = "_kind"  # cell: a long row; line: one per line read (for repeated keys); marker: parse exactly
CELL, LINE, MARKER = 0, 1, 2
MAX_EPOCH_S = 10**11  # the exact parse's bound on epoch seconds (unpivot.epoch_or_timestamp)
BLOCK_BYTES = 8 * 2**20  # CSV bytes read per block (about 700 lines of 2,000 columns)
FILE_COLUMNS = ("path", "source_file", "cluster", "metric", "unit", "time_pos", "n_cols", "columns_json")
TS = pa.timestamp("us", tz="UTC")
OUTPUT = pa.schema([
    ("cluster", pa.string()), ("metric", pa.string()), ("ts", TS), ("node_ip", pa.string()),
    ("gpu_index", pa.int32()), ("ib_device", pa.string()), ("value", pa.float64()), ("unit", pa.string()),
    ("source_file", pa.string()), (KIND, pa.int8()),
])
SPARK_TYPES = {pa.string(): "string", pa.int32(): "int", pa.int8(): "tinyint", pa.float64(): "double", TS: "timestamp"}
OUTPUT_DDL = ", ".join(f"`{f.name}` {SPARK_TYPES[f.type]}" for f in OUTPUT)


class NeedsExact(Exception):
    """The file holds something only the line-by-line parse reports as the exact path does."""


def _open(path: str):
    """The file as a stream: a local path or a URL pyarrow.fs understands; gzip undone."""
    if "://" in path:
        fs, inner = pafs.FileSystem.from_uri(path)
        stream = fs.open_input_stream(inner)
    else:
        stream = pa.OSFile(path, "rb")
    return pa.CompressedInputStream(stream, "gzip") if path.endswith(".gz") else stream


def _reader(stream, n_cols: int, time_pos: int) -> pcsv.CSVStreamingReader:
    names = [f"c{i}" for i in range(n_cols)]
    types = {name: pa.float64() for name in names}
    types[names[time_pos]] = pa.int64()
    return pcsv.open_csv(
        stream,
        read_options=pcsv.ReadOptions(use_threads=False, column_names=names, skip_rows=1, block_size=BLOCK_BYTES),
        parse_options=pcsv.ParseOptions(quote_char=False, ignore_empty_lines=False, newlines_in_values=False),
        convert_options=pcsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False,
                                            quoted_strings_can_be_null=False),
    )


def _constant(value: str | None, n: int) -> pa.Array:
    return pa.nulls(n, pa.string()) if value is None else pa.repeat(pa.scalar(value, pa.string()), n)


class WideFile:
    """One file's constants and header facts, as the driver gave them (FILE_COLUMNS)."""

    def __init__(self, row: dict) -> None:
        self.row = row
        facts = json.loads(row["columns_json"])  # [[pos, node, gpu, ib], ...] in header order
        self.time_pos = int(row["time_pos"])
        self.positions = np.array([f[0] for f in facts], np.int64)
        self.nodes = pa.array([f[1] for f in facts], pa.string())
        self.gpus = pa.array([f[2] for f in facts], pa.int32())
        self.ibs = pa.array([f[3] for f in facts], pa.string())

    def constants(self, n: int, kind: int) -> dict[str, pa.Array]:
        r = self.row
        return {"cluster": _constant(r["cluster"], n), "metric": _constant(r["metric"], n),
                "unit": _constant(r["unit"], n), "source_file": _constant(r["source_file"], n),
                KIND: pa.array(np.full(n, kind, np.int8))}

    def marker(self) -> pa.Table:
        row = {f.name: pa.nulls(1, f.type) for f in OUTPUT}
        row.update(self.constants(1, MARKER))
        return pa.table(row, schema=OUTPUT)

    def lines(self, ts: np.ndarray) -> pa.Table:
        n = len(ts)
        row = {f.name: pa.nulls(n, f.type) for f in OUTPUT}
        row.update(self.constants(n, LINE), ts=pa.array(ts, TS))
        return pa.table(row, schema=OUTPUT)

    def cells(self, batch: pa.RecordBatch) -> tuple[np.ndarray, pa.Table]:
        """(the block's Time as epoch micros, its non-empty cells as long rows, column by column)."""
        time = batch.column(self.time_pos)
        if time.null_count:
            raise NeedsExact("a Time is empty")
        seconds = time.to_numpy()
        if len(seconds) and int(np.abs(seconds).max()) >= MAX_EPOCH_S:
            raise NeedsExact("a Time is out of range")
        ts = seconds * 1_000_000
        n_lines = len(ts)
        values = np.empty((len(self.positions), n_lines))
        present = np.empty((len(self.positions), n_lines), bool)
        for i, pos in enumerate(self.positions):
            column = batch.column(int(pos))
            values[i] = column.to_numpy(zero_copy_only=False)  # empty cell -> NaN
            present[i] = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else True
        if not np.isfinite(values[present]).all():
            raise NeedsExact("a cell is not a finite number")
        flat = present.ravel()
        which = np.repeat(np.arange(len(self.positions)), n_lines)[flat]
        n = len(which)
        index = pa.array(which)
        table = {**self.constants(n, CELL), "ts": pa.array(np.tile(ts, len(self.positions))[flat], TS),
                 "node_ip": self.nodes.take(index), "gpu_index": self.gpus.take(index),
                 "ib_device": self.ibs.take(index), "value": pa.array(values.ravel()[flat])}
        return ts, pa.table(table, schema=OUTPUT)


def one_file(row: dict) -> Iterator[pa.Table]:
    """The file's cell rows and line rows, block by block; a marker row last when a check fails
    (the caller drops everything of that file's series then)."""
    wide = WideFile(row)
    try:
        with _open(row["path"]) as stream:
            reader = _reader(stream, int(row["n_cols"]), wide.time_pos)
            for batch in reader:
                ts, cells = wide.cells(batch)
                yield cells
                yield wide.lines(ts)
    except (NeedsExact, pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError, OSError):
        yield wide.marker()


BATCH_ROWS = 1 << 20  # long rows handed to the engine per batch


def parse_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: rows of FILE_COLUMNS in, OUTPUT rows out, file by file, in
    batches of at most BATCH_ROWS rows."""
    for batch in batches:
        for row in batch.to_pylist():
            for table in one_file(row):
                yield from table.to_batches(max_chunksize=BATCH_ROWS)
