"""One pass over each wide metric file (DCGM, Prometheus): read, checked and unpivoted in Arrow.

A file is the unit: the function reads it with pyarrow's streaming CSV reader (by path, where
the engine's task runs: a local path or an object's URL, io.objectstore.open_input; `.gz`
decompressed on the way), a block of lines at a time so memory does not grow with the file, and turns each block
into long rows with numpy: one row per non-empty cell, its node, GPU and IB device from the
header facts the driver parsed once per file (utilization.utilization_header_rows).

What it checks, and what it does when a check fails: every line has the header's field count
(an empty line or a stray comma fails the read), Time is a whole number of epoch seconds under
1e11 on every line, and every non-empty cell is a finite number pyarrow reads as a double (a
subset of what the exact parse's cast accepts, to the same value: no space, quote, `nan` or
`inf`). A file that fails any check yields a marker row (KIND `marker`); what it yielded before
is dropped with it: utilization.UtilizationParser.remainder parses every file of that file's series
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

from tracelake.io import objectstore, progress
from tracelake.io.frames import arrow_ddl
from tracelake.schema import RESERVED_PREFIX

KIND = f"{RESERVED_PREFIX}kind"  # cell: a long row; line: one per line read (for repeated keys); marker: parse exactly
SERIES = f"{RESERVED_PREFIX}series"  # the file's series id: the caller drops rows by (series, Time) with one cheap test
CELL, LINE, MARKER = 0, 1, 2
MAX_EPOCH_S = 10**11  # the exact parse's bound on epoch seconds (unpivot.epoch_or_timestamp)
BLOCK_BYTES = 8 * 2**20  # CSV bytes read per block (about 700 lines of 2,000 columns)
FILE_COLUMNS = ("path", "source_file", "cluster", "metric", "unit", "series_id", "time_pos", "n_cols",
                "columns_json", "dictionary")
TS = pa.timestamp("us", tz="UTC")
OUTPUT = pa.schema([
    ("cluster", pa.string()), ("metric", pa.string()), ("ts", TS), ("node_ip", pa.string()),
    ("gpu_index", pa.int32()), ("ib_device", pa.string()), ("value", pa.float64()), ("unit", pa.string()),
    ("source_file", pa.string()), (KIND, pa.int8()), (SERIES, pa.int32()),
])
OUTPUT_DDL = arrow_ddl(OUTPUT)


class NeedsExact(Exception):
    """The file holds something only the line-by-line parse reports as the exact path does."""


def _open(path: str):
    """The file as a stream, gzip undone: a local path, or an object's URL (s3://, abfss://, …)
    opened where the task runs with the settings the driver uses (io.objectstore: the AWS_*
    variables, a proxy), its bytes as stored: only here is a `.gz` inflated."""
    stream = objectstore.open_raw(path)
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


class WideFile:
    """One file's constants and header facts, as the driver gave them (FILE_COLUMNS): per value
    column [position, node, GPU index or null, IB device or null].

    Strings leave as dictionary arrays (indices into the file's few names) when the engine takes
    them for a string column (`dictionary`, probed by the caller: Sail does, classic Spark does
    not); else they are decoded here, which costs more than reading the CSV."""

    def __init__(self, row: dict) -> None:
        self.row = row
        facts = json.loads(row["columns_json"])
        self.time_pos = int(row["time_pos"])
        self.positions = np.array([f[0] for f in facts], np.int64)
        self.nodes = pa.array([f[1] for f in facts], pa.string())
        self.gpus = np.array([-1 if f[2] is None else f[2] for f in facts], np.int32)
        self.ibs = pa.array([f[3] for f in facts], pa.string())
        self.dictionary = bool(row["dictionary"])

    def _strings(self, names: pa.Array, index: np.ndarray) -> pa.Array:
        strings = pa.DictionaryArray.from_arrays(pa.array(index, pa.int32()), names)
        return strings if self.dictionary else strings.cast(pa.string())

    def _rows(self, n: int, kind: int) -> dict[str, pa.Array]:
        row = {f.name: pa.nulls(n, f.type) for f in OUTPUT}
        zeros = np.zeros(n, np.int32)
        for name in ("cluster", "metric", "unit", "source_file"):
            if self.row[name] is not None:
                row[name] = self._strings(pa.array([self.row[name]], pa.string()), zeros)
        row[KIND] = pa.array(np.full(n, kind, np.int8))
        row[SERIES] = pa.array(np.full(n, self.row["series_id"], np.int32))
        return row

    def marker(self) -> pa.Table:
        return pa.table(self._rows(1, MARKER))

    def lines(self, ts: np.ndarray) -> pa.Table:
        row = self._rows(len(ts), LINE)
        row["ts"] = pa.array(ts, TS)
        return pa.table(row)

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
        nulls = 0
        for i, pos in enumerate(self.positions):
            column = batch.column(int(pos))
            values[i] = column.to_numpy(zero_copy_only=False)  # an empty cell -> NaN
            nulls += column.null_count
        missing = np.isnan(values)
        if int(missing.sum()) != nulls or np.isinf(values).any():  # a NaN that was no empty cell
            raise NeedsExact("a cell is not a finite number")
        counts = n_lines - missing.sum(axis=1)  # cells per column; rows go column by column
        flat = ~missing.ravel()
        column_of = np.repeat(np.arange(len(self.positions), dtype=np.int32), counts)
        gpus = self.gpus[column_of]
        row = self._rows(len(column_of), CELL)
        row.update(ts=pa.array(np.tile(ts, len(self.positions))[flat], TS),
                   node_ip=self._strings(self.nodes, column_of), gpu_index=pa.array(gpus, mask=gpus < 0),
                   value=pa.array(values.ravel()[flat]))
        if self.ibs.null_count < len(self.ibs):
            row["ib_device"] = self._strings(self.ibs, column_of)
        return ts, pa.table(row)


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


def parse_files(batches: Iterator[pa.RecordBatch], tally_folder: str | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: rows of FILE_COLUMNS in, OUTPUT rows out, file by file, in
    batches of at most BATCH_ROWS rows; each file done is told to io.progress."""
    for batch in batches:
        for row in batch.to_pylist():
            rows = 0
            for table in one_file(row):
                rows += table.num_rows
                yield from table.to_batches(max_chunksize=BATCH_ROWS)
            progress.tally(tally_folder, row["path"], rows)

