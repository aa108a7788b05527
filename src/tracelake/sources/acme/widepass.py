"""One pass over each wide metric file (DCGM, Prometheus) and IPMI file: read, checked and
unpivoted in Arrow, its cells written by the pass itself.

A file is the unit: the function reads it (by path, where the engine's task runs: a local path
or an object's URL, io.objectstore.open_raw; `.gz` decompressed on the way) a block of whole
lines at a time, so memory does not grow with the file, parses each block with pyarrow's CSV
reader and turns it into long rows with numpy: one row per non-empty cell, its node, GPU and IB
device from the header facts the driver parsed once per file (utilization.utilization_header_rows).

What it checks, and what it does when a check fails: every line has the header's field count
(an empty line or a stray comma fails the read), Time is a whole number of epoch seconds under
1e11 on every line, the Times never go back (a release export is in time order) and begin and
end where the driver found them, and every non-empty cell is a finite number pyarrow reads as a
double (a subset of what the exact parse's cast accepts, to the same value: no space, quote,
`nan` or `inf`). A file that fails any check yields a marker row (KIND `marker`); every file of
its series (cluster, metric) is then parsed line by line (utilization.UtilizationParser.remainder),
so every quarantine row and reason is the exact parse's.

A line whose Time another line may share is not unpivoted: the pass hands over its text (KIND
`raw`), and the exact parse ranks those lines' cells. Such a line is one of a run of equal Times
in the file (the Times are in order, so the lines of one Time are adjacent; a block's last run is
held back for the next block, so a run is never cut), or a line whose Time lies where another
file of the series has lines too (`overlaps`, from each file's first and last Time, which the
driver reads from the files' ends). Every cell row the pass gives is then one no other line can
repeat: the cells are the table's rows as they are, and no file is read twice. Given a sink
(io.sinkfiles), the pass writes them into a Parquet file of its own per raw file, with the
run's lineage, and hands the engine only the raw and marker rows. An IPMI file (LongFile) is
read the same way, a (Time, server) standing where a metric file's Time stands.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from tracelake.io import objectstore, progress
from tracelake.io.frames import arrow_ddl
from tracelake.io.parse import KEPT, VERDICT
from tracelake.io.sinkfiles import TEXT, SinkFile
from tracelake.schema import RESERVED_PREFIX

KIND = f"{RESERVED_PREFIX}kind"  # cell: a long row; raw: a line for the exact parse; marker: parse the series exactly
SERIES = f"{RESERVED_PREFIX}series"  # the file's series id: the caller drops a failed series' rows with one cheap test
LINE = f"{RESERVED_PREFIX}line"  # a raw row's line, as the exact parse reads it (line end removed)
FILE = f"{RESERVED_PREFIX}file"  # a raw row's file id (the exact parse's file_id)
ASIDE = f"{RESERVED_PREFIX}aside"  # true but on a cell row: staged apart, so the cells' files are the table's
# true on a cell whose node_ip the suite's node_ip_is_ipv4 returns: that rule is proven by the pass
# (meta.proven_by), as the column names are the nodes, and the files' footers say whether any is.
# Null in a file whose every column names an IPv4 address: no true row, and next to nothing to encode
NOT_IPV4 = f"{RESERVED_PREFIX}node_ip_not_ipv4"
IPV4 = re.compile("[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+")  # the rule's RLIKE, whole (tests/sources/acme: the same)
# true on a cell the suite's metric_known_and_shaped returns (its unit unknown, or a GPU index where its
# metric has none or none where it has one), proven the same way: the unit is the file's and the GPU
# index its column's. Null in a file where no cell is
OFF_SHAPE = f"{RESERVED_PREFIX}metric_off_shape"
GPU_METRICS = ("GPU_UTIL", "SM_ACTIVE", "SM_OCCUPANCY", "PIPE_TENSOR_ACTIVE", "DRAM_ACTIVE", "FB_USED", "FB_FREE",
               "POWER_USAGE", "GPU_TEMP", "MEMORY_TEMP", "MEM_CLOCK", "SM_CLOCK", "MEM_COPY_UTIL", "XID_ERRORS")
CELL, RAW, MARKER = 0, 1, 2
MAX_EPOCH_S = 10**11  # the exact parse's bound on epoch seconds (unpivot.epoch_or_timestamp)
BLOCK_BYTES = 8 * 2**20  # CSV bytes read per block (about 700 lines of 2,000 columns)
MAX_HELD_BYTES = 64 * 2**20  # a line, or a run of one Time, longer than this: the exact parse (its own bounds)
FILE_COLUMNS = ("path", "source_file", "cluster", "metric", "unit", "series_id", "file_id", "time_pos", "n_cols",
                "columns_json", "dictionary", "span_json", "overlaps_json", "exact", "sink_json", "id_pos")
TS = pa.timestamp("us", tz="UTC")
OUTPUT = pa.schema([
    ("cluster", pa.string()), ("metric", pa.string()), ("ts", TS), ("node_ip", pa.string()),
    ("gpu_index", pa.int32()), ("ib_device", pa.string()), ("value", pa.float64()), ("unit", pa.string()),
    ("source_file", pa.string()), (KIND, pa.int8()), (SERIES, pa.int32()), (FILE, pa.int32()), (LINE, pa.string()),
    (NOT_IPV4, pa.bool_()), (OFF_SHAPE, pa.bool_()),
])
OUTPUT_DDL = arrow_ddl(OUTPUT)
NEWLINE = ord("\n")


class NeedsExact(Exception):
    """The file holds something only the line-by-line parse reports as the exact path does."""


def _open(path: str):
    """The file as a stream, gzip undone: a local path, or an object's URL (s3://, abfss://, …)
    opened where the task runs with the settings the driver uses (io.objectstore: the AWS_*
    variables, a proxy), its bytes as stored: only here is a `.gz` inflated."""
    stream = objectstore.open_raw(path)
    return pa.CompressedInputStream(stream, "gzip") if path.endswith(".gz") else stream


def whole_lines(stream, block_bytes: int) -> Iterator[bytes]:
    """The stream's bytes after its header line, in blocks that end at a line end (the last one
    may not): a line is never cut."""
    rest, header = b"", True
    while chunk := stream.read(block_bytes):
        data = rest + chunk
        if header:
            start = data.find(b"\n") + 1
            if not start:
                rest = data
                continue
            data, header = data[start:], False
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        if len(rest) > MAX_HELD_BYTES:
            raise NeedsExact("a line is longer than a block may hold")
        if cut:
            yield data[:cut]
    if rest and not header:
        yield rest


class WideFile:
    """One file's constants and header facts, as the driver gave them (FILE_COLUMNS): per value
    column [position, node, GPU index or null, IB device or null]; its first and last Time
    (`span_json`, null when the driver could not read them) and the Time ranges where another
    file of its series has lines (`overlaps_json`).

    Strings leave as dictionary arrays (indices into the file's few names) when the engine takes
    them for a string column (`dictionary`, probed by the caller: Sail does, classic Spark does
    not); else they are decoded here, which costs more than reading the CSV."""

    time_type = pa.int64()
    written = None  # set below: the columns of a cell row as the pass writes it

    def __init__(self, row: dict) -> None:
        self.row = row
        facts = json.loads(row["columns_json"])
        self.time_pos = int(row["time_pos"])
        self.n_cols = int(row["n_cols"])
        self.positions = np.array([f[0] for f in facts], np.int64)
        self.nodes = pa.array([f[1] for f in facts], pa.string())
        self.gpus = np.array([-1 if f[2] is None else f[2] for f in facts], np.int32)
        self.ibs = pa.array([f[3] for f in facts], pa.string())
        self.not_ipv4 = np.array([f[1] is not None and IPV4.fullmatch(f[1]) is None for f in facts], bool)
        gpu_metric = row["metric"] in GPU_METRICS
        self.off_shape = np.array([row["unit"] is None or (f[2] is None) == gpu_metric for f in facts], bool)
        self.dictionary = bool(row["dictionary"])
        self.span = json.loads(row["span_json"]) if row.get("span_json") else None
        self.overlaps = json.loads(row.get("overlaps_json") or "[]")
        names = [f"c{i}" for i in range(self.n_cols)]
        types = {name: pa.float64() for name in names}
        types[names[self.time_pos]] = self.time_type
        self.read_options = dict(use_threads=False, column_names=names)
        self.parse_options = pcsv.ParseOptions(quote_char=False, ignore_empty_lines=False, newlines_in_values=False)
        self.convert_options = pcsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False,
                                                   quoted_strings_can_be_null=False)

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

    def parse(self, block: bytes) -> tuple[pa.Table, np.ndarray]:
        """(the block's lines parsed, the byte offset where each line starts, and the block's end)."""
        options = pcsv.ReadOptions(**self.read_options, block_size=len(block) + 1)
        table = pcsv.read_csv(pa.py_buffer(block), read_options=options, parse_options=self.parse_options,
                              convert_options=self.convert_options)
        ends = np.flatnonzero(np.frombuffer(block, np.uint8) == NEWLINE) + 1
        if not block.endswith(b"\n"):
            ends = np.append(ends, len(block))
        if len(ends) != table.num_rows:  # a line end the CSV reader saw and a text reader would not
            raise NeedsExact("line ends differ")
        return table, np.concatenate([[0], ends])

    def seconds(self, table: pa.Table) -> np.ndarray:
        time = table.column(self.time_pos)
        if time.null_count:
            raise NeedsExact("a Time is empty")
        seconds = time.to_numpy()
        if len(seconds) and int(np.abs(seconds).max()) >= MAX_EPOCH_S:
            raise NeedsExact("a Time is out of range")
        if len(seconds) > 1 and bool((np.diff(seconds) < 0).any()):
            raise NeedsExact("the Times go back")
        return seconds

    def aside(self, seconds: np.ndarray, table: pa.Table) -> np.ndarray:
        """Lines another line may repeat: a run of equal Times, or a Time in an overlap."""
        same = np.zeros(len(seconds), bool)
        if len(seconds) > 1:
            equal = seconds[1:] == seconds[:-1]
            same[1:] |= equal
            same[:-1] |= equal
        for low, high in self.overlaps:
            same |= (seconds >= low) & (seconds <= high)
        return same

    def raw(self, block: bytes, starts: np.ndarray, chosen: np.ndarray, seconds: np.ndarray) -> pa.Table:
        lines = [block[starts[i]:starts[i + 1]].rstrip(b"\n").removesuffix(b"\r").decode("utf-8") for i in chosen]
        row = self._rows(len(lines), RAW)
        row.update(ts=pa.array(seconds[chosen] * 1_000_000, TS), **{LINE: pa.array(lines, pa.string()),
                   FILE: pa.array(np.full(len(lines), self.row["file_id"], np.int32))})
        return pa.table(row)

    def cells(self, table: pa.Table, lines: np.ndarray, seconds: np.ndarray) -> pa.Table:
        """The non-empty cells of the chosen `lines` of the parsed block as long rows, column by
        column; a cell that reads as NaN but was not empty (`nan` written out), or infinite,
        anywhere in the block sends the file to the exact parse."""
        ts = seconds[lines] * 1_000_000
        values, missing = self.matrix(table, lines)
        counts = len(lines) - missing.sum(axis=1)  # cells per column; rows go column by column
        flat = ~missing.ravel()
        column_of = np.repeat(np.arange(len(self.positions), dtype=np.int32), counts)
        gpus = self.gpus[column_of]
        row = self._rows(len(column_of), CELL)
        row.update(ts=pa.array(np.tile(ts, len(self.positions))[flat], TS),
                   node_ip=self._strings(self.nodes, column_of), gpu_index=pa.array(gpus, mask=gpus < 0),
                   value=pa.array(values.ravel()[flat]))
        if self.ibs.null_count < len(self.ibs):
            row["ib_device"] = self._strings(self.ibs, column_of)
        for name, flags in ((NOT_IPV4, self.not_ipv4), (OFF_SHAPE, self.off_shape)):
            row[name] = pa.array(flags[column_of]) if flags.any() else pa.nulls(len(column_of), pa.bool_())
        return pa.table(row)

    def matrix(self, table: pa.Table, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the value columns' numbers on the chosen `lines`, one row per column; where they are
        empty). A cell that reads as NaN but was not empty (`nan` written out), or infinite,
        anywhere in the block sends the file to the exact parse."""
        whole = len(lines) == table.num_rows
        values = np.empty((len(self.positions), len(lines)))
        nulls = nans = 0
        for i, pos in enumerate(self.positions):
            column = table.column(int(pos))
            full = column.to_numpy()  # an empty cell -> NaN
            nulls += column.null_count
            if whole:
                values[i] = full
            else:
                nans += int(np.isnan(full).sum())
                values[i] = full[lines]
        missing = np.isnan(values)
        if whole:
            nans = int(missing.sum())
        if nans != nulls or np.isinf(values).any():
            raise NeedsExact("a cell is not a finite number")
        return values, missing

    def rows(self, stream) -> Iterator[pa.Table]:
        """Cell and raw rows, block by block. A block's last run of one Time waits for the next
        block (its lines are parsed again there), so a run is never cut."""
        held, first, last = b"", None, None
        source = whole_lines(stream, BLOCK_BYTES)
        block = next(source, None)
        while block is not None:
            following = next(source, None)
            data = held + block
            table, starts = self.parse(data)
            seconds = self.seconds(table)
            if last is not None and seconds[0] <= last:
                raise NeedsExact("the Times go back")
            cut = len(seconds) if following is None else int(np.searchsorted(seconds, seconds[-1]))
            if cut == 0:  # the block is one run of one Time: held whole
                if len(data) > MAX_HELD_BYTES:
                    raise NeedsExact("a run of one Time is longer than a block may hold")
                held, block = data, following
                continue
            now = seconds[:cut]
            aside = self.aside(now, table)
            cells = self.cells(table, np.flatnonzero(~aside), now)
            if cells.num_rows:
                yield cells
            if aside.any():
                yield self.raw(data, starts, np.flatnonzero(aside), now)
            first = int(now[0]) if first is None else first
            last = int(now[-1])
            held, block = data[starts[cut]:], following
        if self.span is not None and [first, last] != self.span:
            raise NeedsExact("the file's first or last Time is not where the driver read it")


NAIVE_TIME = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]) ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$"
EPOCH_TIME = r"^[0-9]{1,11}$"  # whole epoch seconds under 1e11, as the exact parse bounds them
LOCAL_OFFSET_S = 8 * 3600  # Asia/Shanghai, the naive Times' zone (utilization.LOCAL_ZONE): no DST since 1991
LOCAL_FROM = 694224000  # 1992-01-01 00:00 as naive seconds: earlier naive Times go the exact way


class LongFile(WideFile):
    """An IPMI power file: Time, a server column (`id_pos`), one column per reading (the header
    facts: per reading column [position, component]). A cell row is (Time, server, component,
    reading). Time is whole epoch seconds, or naive `yyyy-MM-dd HH:mm:ss` in the clusters' zone;
    anything else (an offset, a fraction) goes the exact way. The lines another may repeat are
    those of a (Time, server) that a line of the same Time run has too, those of an empty server
    (the exact parse sets them aside) and those in an overlap."""

    time_type = pa.string()

    def __init__(self, row: dict) -> None:
        self.row = row
        facts = json.loads(row["columns_json"])
        self.time_pos, self.id_pos, self.n_cols = int(row["time_pos"]), int(row["id_pos"]), int(row["n_cols"])
        self.positions = np.array([f[0] for f in facts], np.int64)
        self.components = pa.array([f[1] for f in facts], pa.string())
        self.dictionary = bool(row["dictionary"])
        self.span = json.loads(row["span_json"]) if row.get("span_json") else None
        self.overlaps = json.loads(row.get("overlaps_json") or "[]")
        names = [f"c{i}" for i in range(self.n_cols)]
        types = {name: pa.float64() for name in names}
        types[names[self.time_pos]] = pa.string()
        types[names[self.id_pos]] = pa.string()
        self.read_options = dict(use_threads=False, column_names=names)
        self.parse_options = pcsv.ParseOptions(quote_char=False, ignore_empty_lines=False, newlines_in_values=False)
        self.convert_options = pcsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False,
                                                   quoted_strings_can_be_null=False)

    def seconds(self, table: pa.Table) -> np.ndarray:
        text = table.column(self.time_pos)
        if text.null_count:
            raise NeedsExact("a Time is empty")
        if pc.all(pc.match_substring_regex(text, EPOCH_TIME)).as_py() in (True, None):
            seconds = pc.cast(text, pa.int64()).to_numpy()
        elif pc.all(pc.match_substring_regex(text, NAIVE_TIME)).as_py():
            local = pc.cast(pc.strptime(text, "%Y-%m-%d %H:%M:%S", "s"), pa.int64()).to_numpy()
            if len(local) and int(local.min()) < LOCAL_FROM:
                raise NeedsExact("a naive Time before 1992")
            seconds = local - LOCAL_OFFSET_S
        else:
            raise NeedsExact("a Time the pass does not read")
        if len(seconds) > 1 and bool((np.diff(seconds) < 0).any()):
            raise NeedsExact("the Times go back")
        return seconds

    def _ids(self, table: pa.Table) -> tuple[np.ndarray, pa.Array]:
        encoded = pc.dictionary_encode(table.column(self.id_pos).combine_chunks())
        return encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary

    def aside(self, seconds: np.ndarray, table: pa.Table) -> np.ndarray:
        codes, names = self._ids(table.slice(0, len(seconds)))
        same = np.zeros(len(seconds), bool)
        empty = np.flatnonzero(pc.equal(pc.utf8_length(names), 0).to_numpy(zero_copy_only=False))
        same |= np.isin(codes, empty)
        order = np.lexsort((codes, seconds))
        equal = (seconds[order][1:] == seconds[order][:-1]) & (codes[order][1:] == codes[order][:-1])
        same[order[1:][equal]] = True
        same[order[:-1][equal]] = True
        for low, high in self.overlaps:
            same |= (seconds >= low) & (seconds <= high)
        return same

    def cells(self, table: pa.Table, lines: np.ndarray, seconds: np.ndarray) -> pa.Table:
        ts = seconds[lines] * 1_000_000
        codes, names = self._ids(table)
        values, missing = self.matrix(table, lines)
        counts = len(lines) - missing.sum(axis=1)
        flat = ~missing.ravel()
        column_of = np.repeat(np.arange(len(self.positions), dtype=np.int32), counts)
        node_codes = np.tile(codes[lines], len(self.positions))[flat]
        row = {name: pa.nulls(len(column_of), kind) for name, kind in POWER_WRITTEN}
        constant = np.zeros(len(column_of), np.int32)
        for name, given in (("cluster", "cluster"), ("kind", "metric"), ("unit", "unit"), ("source_file", "source_file")):
            if self.row[given] is not None:
                row[name] = pa.DictionaryArray.from_arrays(pa.array(constant), pa.array([self.row[given]], pa.string()))
        row.update(ts=pa.array(np.tile(ts, len(self.positions))[flat], TS),
                   node=pa.DictionaryArray.from_arrays(pa.array(node_codes, pa.int32()), names),
                   component=pa.DictionaryArray.from_arrays(pa.array(column_of), self.components),
                   value=pa.array(values.ravel()[flat]))
        row[KIND] = pa.array(np.full(len(column_of), CELL, np.int8))
        row[SERIES] = pa.array(np.full(len(column_of), self.row["series_id"], np.int32))
        row[VERDICT] = pa.array(np.full(len(column_of), KEPT, np.int8))
        return pa.table(row)


WideFile.written = [("cluster", TEXT), ("metric", TEXT), ("ts", TS), ("node_ip", TEXT), ("gpu_index", pa.int32()),
                    ("ib_device", TEXT), ("value", pa.float64()), ("unit", TEXT), ("source_file", TEXT),
                    (KIND, pa.int8()), (SERIES, pa.int32()), (NOT_IPV4, pa.bool_()), (OFF_SHAPE, pa.bool_()),
                    (VERDICT, pa.int8())]
POWER_WRITTEN = [("cluster", TEXT), ("kind", TEXT), ("ts", TS), ("node", TEXT), ("component", TEXT),
                 ("value", pa.float64()), ("unit", TEXT), ("source_file", TEXT), (KIND, pa.int8()),
                 (SERIES, pa.int32()), (VERDICT, pa.int8())]
LongFile.written = POWER_WRITTEN


def one_file(row: dict, written: list[int] | None = None) -> Iterator[pa.Table]:
    """The file's cell rows and raw rows, block by block; a marker row last when a check fails
    (the caller drops everything of that file's series then), or at once where the driver says.
    With a sink (`sink_json`) the cell rows are written to a file of it instead, which a failed
    check removes again; their count is appended to `written`."""
    written = [] if written is None else written
    wide = LongFile(row) if int(row.get("id_pos") if row.get("id_pos") is not None else -1) >= 0 else WideFile(row)
    if row.get("exact"):  # the driver chose the exact parse for its series (utilization.whole_overlaps)
        yield wide.marker()
        return
    sink = SinkFile(row["sink_json"], f"part-{int(row['file_id']):05d}.parquet", wide.written) \
        if row.get("sink_json") else None
    try:
        with _open(row["path"]) as stream:
            for table in wide.rows(stream):
                if sink is None or table.column(KIND)[0].as_py() != CELL:
                    yield table
                elif VERDICT in table.column_names:
                    sink.write(table)
                else:
                    sink.write(table.append_column(VERDICT, pa.array(np.full(table.num_rows, KEPT, np.int8))))
        if sink is not None:
            sink.close()
            written.append(sink.rows)
    except (NeedsExact, pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError, OSError):
        if sink is not None:
            sink.discard()
        yield wide.marker()


BATCH_ROWS = 1 << 20  # long rows handed to the engine per batch


def parse_files(batches: Iterator[pa.RecordBatch], tally_folder: str | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: rows of FILE_COLUMNS in, OUTPUT rows out, file by file, in
    batches of at most BATCH_ROWS rows; each file done is told to io.progress."""
    for batch in batches:
        for row in batch.to_pylist():
            rows, written = 0, []
            for table in one_file(row, written):
                rows += table.num_rows
                yield from table.to_batches(max_chunksize=BATCH_ROWS)
            progress.tally(tally_folder, row["path"], rows + sum(written))
