"""One pass over each per-port counter file: read, checked, typed and rated together, in Arrow.

One file is one port's series for one hour, so a file is the unit: the function reads it whole
with pyarrow's CSV reader (by path, where the engine's task runs: a local path or any URL
pyarrow.fs opens), checks everything the exact line-by-line parse would, types it, and computes
each row's rate with numpy. No shuffle, no sort of the hour, no second read.

What it checks, and what it does when a check fails: every line splits into the header's ten
fields (an empty line or a stray comma fails the read), the bytes are UTF-8, every value casts
to its column's type and is present, times are epoch milliseconds of the years 2000-2099,
ratios are finite, every row names the file's own port and switch, and two rows of one instant
are the same poll twice (an exact copy is a row of its own marked REPEAT_COPY, counted as repeated
and not kept; a copy with other values is a conflict). A file that fails any
check yields a single marker row (`EXACT` true) and no data: ports.parse_port_files parses such
files line by line, where each line keeps its value or its reasons, exactly as before. So the
pass never has to reproduce a quarantine reason.

Rates (transforms/ports.port_rates' rules, vectorised), under silver.zj_port_rates' own column
names: a file continues from the carried state of its port's hour before (transforms/ports.carried_state,
collected by ports.parse_port_files: a few instants per port), so its rates are the window's over
both hours, and its rows can be silver's as they are staged. Two kinds of file cannot be: one
whose polls overlap the hour before (re-delivered polls must find their twins there, which the
state does not hold) and a management port whose 32-bit counters wrapped (silver's counts then
differ from the delivered ones). Their rows carry RERATE, are rated as if their hour were the whole
history, and are staged apart; ports.rebuild_rates computes their silver rows again.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from tracelake.io import objectstore, progress
from tracelake.io.parse import EPOCH_MS_MAX, EPOCH_MS_MIN, REPEAT_COPY
from tracelake.sources.zhejiang.layout import MGMT_PORT
from tracelake.sources.zhejiang.transforms.ports import LINE_RATES_BPS, MAX_GAP_S, MAX_UTIL, STATUSES, WRAP

EXACT = "_exact"  # the marker column: this file must be parsed line by line
REPEATED_INSTANT = "_repeated_instant"  # the row's instant is its file's row before's: a key twice
# the row's SaveTime text was not shown to be SaveTimeUTC + 8 h (save_time_unproven): where no row
# is, the gate records the suite's rule save_time_matches_utc as passed without its query
SAVE_TIME_UNPROVEN = "_save_time_unproven"
RAW = ("SaveTime", "SaveTimeUTC", "DeviceName", "PortName", "InPkts", "InOctets", "OutPkts", "OutOctets",
       "InRatio", "OutRatio")
RAW_TYPES = {"SaveTime": pa.string(), "SaveTimeUTC": pa.int64(), "DeviceName": pa.string(),
             "PortName": pa.string(), "InPkts": pa.int64(), "InOctets": pa.int64(), "OutPkts": pa.int64(),
             "OutOctets": pa.int64(), "InRatio": pa.float64(), "OutRatio": pa.float64()}
COUNTERS = ("InPkts", "InOctets", "OutPkts", "OutOctets")
# the columns the pass adds to the parse, named as silver.zj_port_rates names them (staged with it:
# the staged files of a clean hour are both tables' data files, each read by its own schema)
RATE_COLUMNS = (("status", pa.string()), ("interval_start_utc", pa.timestamp("us", tz="UTC")),
                ("interval_s", pa.float64()), ("dt_s", pa.float64()), ("counter_wrapped", pa.bool_()),
                ("line_rate_bps", pa.int64()), ("in_bytes_per_s", pa.float64()), ("out_bytes_per_s", pa.float64()),
                ("in_util", pa.float64()), ("out_util", pa.float64()))
RERATE = "_rerate"  # the file's silver rows are computed again (module docstring): its rows are staged apart
FILE_COLUMNS = ("path", "source_file", "hour_cst", "folder_device_name", "file_port_name")
OUTPUT = pa.schema([
    ("hour_cst", pa.string()), ("device_name", pa.string()), ("port_name", pa.string()),
    ("save_time_utc", pa.timestamp("us", tz="UTC")), ("save_time", pa.string()),
    ("in_pkts", pa.int64()), ("in_octets", pa.int64()), ("out_pkts", pa.int64()), ("out_octets", pa.int64()),
    ("in_ratio", pa.float64()), ("out_ratio", pa.float64()),
    ("folder_device_name", pa.string()), ("file_port_name", pa.string()),
    ("source_file", pa.string()), ("line_number", pa.int64()), *RATE_COLUMNS, (REPEATED_INSTANT, pa.bool_()),
    (SAVE_TIME_UNPROVEN, pa.bool_()),
    (REPEAT_COPY, pa.bool_()), (EXACT, pa.bool_()), (RERATE, pa.bool_()),
])
# the strings a file repeats on every row, yielded as dictionaries (one value each, the status one of
# eight): the engine's Parquet writer then takes them for less. Measured on a full generated
# hour's pass and staged write, 3 + 3 runs alternated in process: 9.8-10.2 s against 10.6-11.6 s,
# 19.4 s of the engine's CPU against 21.1 s. An engine that refuses them gets OUTPUT (parse_files).
REPEATED_STRINGS = ("hour_cst", "device_name", "port_name", "folder_device_name", "file_port_name", "source_file",
                    "status")
DICTIONARY = pa.dictionary(pa.int32(), pa.string())
PASS_OUTPUT = pa.schema([f.with_type(DICTIONARY) if f.name in REPEATED_STRINGS else f for f in OUTPUT])
SPARK_TYPES = {pa.string(): "string", pa.int64(): "bigint", pa.float64(): "double", pa.bool_(): "boolean",
               pa.timestamp("us", tz="UTC"): "timestamp"}
OUTPUT_DDL = ", ".join(f"`{f.name}` {SPARK_TYPES[f.type]}" for f in OUTPUT)
STATUS_NAMES = pa.array(STATUSES, pa.string())
FIRST, REPEATED, GAP, UPDATE, NO_NEW_DATA, IDLE, OVER_LINE_RATE, NEGATIVE = range(len(STATUSES))


def _open(path: str):
    """The file as a stream: a local path, or an object's URL (s3://, abfss://, …) opened with the
    settings the driver uses (io.objectstore: the AWS_* variables, a proxy), where the task runs."""
    if "://" in path:
        return objectstore.open_input(path)
    return pa.OSFile(path, "rb")


HEADER = ",".join(RAW).encode()
BOM = b"\xef\xbb\xbf"


def read_port_file(path: str) -> pa.Table | None:
    """The file typed by the documented header's columns, or None when any line would need the
    exact parse (another header, a field count off, an empty line, a byte that is not UTF-8, a
    value that does not cast or is missing)."""
    with _open(path) as stream:
        data = stream.read().removeprefix(BOM)  # as the exact parse strips it
    header = data[: data.find(b"\n")] if b"\n" in data else data
    if header.removesuffix(b"\r") != HEADER:
        return None
    try:
        table = pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(use_threads=False, column_names=list(RAW), skip_rows=1),
            parse_options=pcsv.ParseOptions(quote_char=False, ignore_empty_lines=False, newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(column_types=RAW_TYPES, strings_can_be_null=False,
                                                quoted_strings_can_be_null=False, null_values=[""],
                                                check_utf8=True),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    if any(table.column(c).null_count for c in RAW):
        return None
    return table


def _holds(table: pa.Table, device: str, port: str) -> bool:
    """The checks the exact parse and the quarantine rules would otherwise make per row."""
    ms = table.column("SaveTimeUTC")
    if pc.any(pc.or_(pc.less(ms, EPOCH_MS_MIN), pc.greater(ms, EPOCH_MS_MAX))).as_py():
        return False
    for name in ("InRatio", "OutRatio"):
        if not pc.all(pc.is_finite(table.column(name))).as_py():
            return False
    return (pc.all(pc.equal(table.column("PortName"), port)).as_py()
            and pc.all(pc.equal(table.column("DeviceName"), device)).as_py())


# SaveTime as delivered: "2024/05/24 星期五 00:00:01.005" (docs/formats/zhejiang.md), 33 bytes of
# UTF-8: the date, a three-character weekday, the China time of day. Read in place as one record
# per row of little-endian words: the date, its last two digits with the space and the weekday's
# first UTF-8 lead byte, the two other lead bytes (three 3-byte characters: the rule's 16th
# character is then byte 21), the space before the time, "hh:mm:ss" and ".fff".
SAVE_TIME_BYTES = 33
SAVE_TIME_RECORD = np.dtype({
    "names": ["date", "date_end", "lead2", "lead3", "space", "hms", "fraction"],
    "formats": ["<u8", "<u4", "u1", "u1", "u1", "<u8", "<u4"],
    "offsets": [0, 8, 14, 17, 20, 21, 29], "itemsize": SAVE_TIME_BYTES})
LEAD_MASK = 0xF0  # a 3-byte UTF-8 character's lead byte is 0xE_
CST_MS = 8 * 3_600_000
DAY_MS = 86_400_000


@functools.cache
def _time_words() -> tuple[np.ndarray, np.ndarray]:
    """("hh:mm:ss" of each second of a day, ".fff" of each millisecond) as SAVE_TIME_RECORD's words."""
    def text(values: np.ndarray, width: int) -> np.ndarray:  # the values' digits as bytes, one row each
        return np.stack([values // 10 ** k % 10 + ord("0") for k in range(width - 1, -1, -1)], axis=1)

    second, milli = np.arange(86_400), np.arange(1000)
    colon, dot = np.full((86_400, 1), ord(":")), np.full((1000, 1), ord("."))
    hms = np.hstack([text(second // 3600, 2), colon, text(second // 60 % 60, 2), colon, text(second % 60, 2)])
    fraction = np.hstack([dot, text(milli, 3)])
    return hms.astype(np.uint8).view("<u8")[:, 0], fraction.astype(np.uint8).view("<u4")[:, 0]


def save_time_unproven(text: pa.ChunkedArray | pa.Array, ms: np.ndarray) -> np.ndarray:
    """Per row, false where the SaveTime text is shown to name the instant SaveTimeUTC + 8 h, read
    as the suite's rule save_time_matches_utc reads it (the date, then the text from its 16th
    character); true where it may not (another layout: every row of the file). Each row's bytes
    are compared as words with the text its instant gives (its day's date, one per hour folder,
    and the time of day looked up): about 0.1 ms a file, where the gate's query casts a full
    hour's 11 M strings (0.9-1.0 s) to find nothing."""
    n = len(ms)
    column = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    if n == 0 or column.type != pa.string() or column.null_count:
        return np.ones(n, bool)
    _, offsets, data = column.buffers()
    ends = np.frombuffer(offsets, np.int32, n + 1, column.offset * 4)
    if np.any(np.diff(ends) != SAVE_TIME_BYTES):
        return np.ones(n, bool)
    rows = np.frombuffer(data, SAVE_TIME_RECORD, n, int(ends[0]))
    cst = ms + CST_MS
    days = cst // DAY_MS
    of_day = cst - days * DAY_MS
    seconds = of_day // 1000
    hms, fraction = _time_words()
    shown = ((rows["hms"] == hms[seconds]) & (rows["fraction"] == fraction[of_day - seconds * 1000])
             & (rows["space"] == ord(" ")) & (rows["lead2"] & LEAD_MASK == 0xE0) & (rows["lead3"] & LEAD_MASK == 0xE0))
    date_end = rows["date_end"] & np.uint32(0xF0FF_FFFF)  # the lead byte's high nibble
    for day in (days[:1] if days.min() == days.max() else np.unique(days)):
        date = str(np.datetime64(int(day), "D")).replace("-", "/").encode() + b" \xe0"
        shown &= (days != day) | ((rows["date"] == np.frombuffer(date[:8], "<u8")[0])
                                  & (date_end == np.frombuffer(date[8:], "<u4")[0]))
    return ~shown


def line_rate_bps(port: str) -> int | None:
    return next((bps for prefix, bps in LINE_RATES_BPS if port.startswith(prefix)), None)


def standalone_rates(ms: np.ndarray, counts: list[np.ndarray], port: str, max_gap_s: float = MAX_GAP_S,
                     max_util: float = MAX_UTIL, before: tuple[np.ndarray, np.ndarray] | None = None,
                     ) -> dict[str, np.ndarray]:
    """transforms/ports.port_rates over one port's rows in time order: status codes, interval
    start (ms, NaN for none), interval, dt (ms), bytes/s and utilisation. `before` is the port's
    carried state of the hour before, (instants, 1 where the row is non-zero) in time order, all
    before the first row: the rows are rated after it as the window rates them over the union;
    without it, as if no row came before them."""
    ahead = 0 if before is None else len(before[0])
    if ahead:  # the state's rows first: only whether they are zero matters, and their own rates are dropped
        ms = np.concatenate([np.asarray(before[0], np.int64), ms])
        counts = [np.concatenate([np.asarray(before[1], np.int64), c]) for c in counts]
    n = len(ms)
    mgmt = port == MGMT_PORT
    if mgmt:  # 32-bit counters: a negative delta has wrapped
        counts = [np.where(c < 0, c + WRAP, c) for c in counts]
    negative = np.zeros(n, bool) if mgmt else np.logical_or.reduce([c < 0 for c in counts])
    zero = np.logical_and.reduce([c == 0 for c in counts])
    t = ms.astype(np.float64)
    prev = np.empty(n)
    prev[:1], prev[1:] = np.nan, t[:-1]
    updates = np.maximum.accumulate(np.where(zero, -np.inf, t))
    last_update = np.empty(n)
    last_update[:1], last_update[1:] = -np.inf, updates[:-1]
    anchor = np.where(np.isfinite(last_update), last_update, t[0])
    limit = max_gap_s * 1000.0
    dt = t - prev
    status = np.select([np.isnan(prev), dt == 0, dt > limit, ~zero, (t - anchor) <= limit],
                       [FIRST, REPEATED, GAP, UPDATE, NO_NEW_DATA], IDLE)
    carried = (prev - anchor) <= limit
    start = np.where(status == UPDATE, np.where(carried, anchor, prev), np.where(status == IDLE, prev, np.nan))
    seconds = (t - start) / 1000.0
    with np.errstate(divide="ignore", invalid="ignore"):
        in_bps, out_bps = counts[1] / seconds, counts[3] / seconds
        bps = line_rate_bps(port)
        in_util = in_bps * 8 / bps if bps else np.full(n, np.nan)
        out_util = out_bps * 8 / bps if bps else np.full(n, np.nan)
    too_fast = (status == UPDATE) & (np.fmax(in_util, out_util) > max_util)
    status = np.where(negative, NEGATIVE, np.where(too_fast, OVER_LINE_RATE, status))
    keep = ~np.isnan(start) & ~too_fast & ~negative
    rates = {"status": status, "start": np.where(keep, start, np.nan), "seconds": np.where(keep, seconds, np.nan),
             "dt": dt, "in_bps": np.where(keep, in_bps, np.nan), "out_bps": np.where(keep, out_bps, np.nan),
             "in_util": np.where(keep, in_util, np.nan), "out_util": np.where(keep, out_util, np.nan)}
    return {name: values[ahead:] for name, values in rates.items()}


def state_of(rows: list[tuple]) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    """The carried state the pass reads, from the rows of transforms/ports.carried_state (device,
    port, epoch ms, 1 if non-zero) of one hour: per (switch, port), its instants in time order
    and whether each row is non-zero. A few rows per port: small enough to ship with the function."""
    state: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for device, port, ms, nonzero in rows:
        state.setdefault((device, port), []).append((int(ms), int(nonzero)))
    return {key: tuple(map(list, zip(*sorted(v)))) for key, v in state.items()}


def _nullable(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.float64(), from_pandas=True)  # NaN -> null


def _constant(value: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


VALUES = ("SaveTime", *COUNTERS, "InRatio", "OutRatio")  # beside the key (switch, port, instant)


def _copies(table: pa.Table, ms: np.ndarray) -> np.ndarray | None:
    """Over rows in time order: true on a row that repeats the row before it exactly (a poll
    delivered twice: the copy is counted, not kept); None when two rows of one instant differ
    (a conflict, which the exact parse quarantines with its reason)."""
    same = np.concatenate([[False], ms[1:] == ms[:-1]]) if len(ms) else np.zeros(0, bool)
    if not same.any():
        return same
    at = np.nonzero(same)[0]
    for name in VALUES:
        values = table.column(name).to_numpy(zero_copy_only=False)
        if np.any(values[at] != values[at - 1]):
            return None
    return same


def rated_rows(table: pa.Table, file: dict, before: tuple[list[int], list[int]] | None = None) -> pa.Table | None:
    """The file's rows as the parse contract's typed columns plus the rate columns (continuing
    from `before`, see _rated); an exact copy of a poll is a row of its own, marked REPEAT_COPY
    and not rated. None when a poll is delivered twice with different values."""
    ms = table.column("SaveTimeUTC").to_numpy()
    order = None if len(ms) < 2 or bool(np.all(ms[1:] >= ms[:-1])) else np.argsort(ms, kind="stable")
    if order is not None:
        table, ms = table.take(order), ms[order]
    lines = np.arange(2, len(ms) + 2, dtype=np.int64) if order is None else order.astype(np.int64) + 2
    copies = _copies(table, ms)
    if copies is None:
        return None
    if copies.any():
        kept, repeats = np.nonzero(~copies)[0], np.nonzero(copies)[0]
        rated = _rated(table.take(kept), ms[kept], lines[kept], file, before)
        return pa.concat_tables([rated, _copy_rows(table.take(repeats), ms[repeats], lines[repeats], file)])
    return _rated(table, ms, lines, file, before)


def _typed(table: pa.Table, ms: np.ndarray, lines: np.ndarray, file: dict) -> dict[str, pa.Array]:
    """The parse contract's columns of a file that held (_holds: every row names its switch and port)."""
    n = len(ms)
    return {
        "hour_cst": _constant(file["hour_cst"], n), "device_name": _constant(file["folder_device_name"], n),
        "port_name": _constant(file["file_port_name"], n), "save_time_utc": pa.array(ms * 1000, pa.timestamp("us", tz="UTC")),
        "save_time": table.column("SaveTime"), "in_pkts": table.column("InPkts"),
        "in_octets": table.column("InOctets"), "out_pkts": table.column("OutPkts"),
        "out_octets": table.column("OutOctets"), "in_ratio": table.column("InRatio"),
        "out_ratio": table.column("OutRatio"), "folder_device_name": _constant(file["folder_device_name"], n),
        "file_port_name": _constant(file["file_port_name"], n), "source_file": _constant(file["source_file"], n),
        "line_number": pa.array(lines),
    }


def _rated(table: pa.Table, ms: np.ndarray, lines: np.ndarray, file: dict,
           before: tuple[list[int], list[int]] | None = None) -> pa.Table:
    """The file's rows with their rates; continuing from `before` (state_of's entry for its port)
    unless the file overlaps it or is a wrapped 32-bit port's (then RERATE, rated alone)."""
    counts = [table.column(c).to_numpy() for c in COUNTERS]
    port = file["file_port_name"]
    n = len(ms)
    wrapped = np.logical_or.reduce([c < 0 for c in counts]) if port == MGMT_PORT else np.zeros(n, bool)
    overlap = before is not None and len(before[0]) > 0 and n > 0 and ms[0] <= before[0][-1]
    rerate = bool(overlap or wrapped.any())
    rates = standalone_rates(ms, counts, port, before=None if rerate else before)
    start = rates["start"]
    bps = line_rate_bps(port)
    columns = {
        **_typed(table, ms, lines, file),
        "status": pa.DictionaryArray.from_arrays(pa.array(rates["status"].astype(np.int32)), STATUS_NAMES),
        "interval_start_utc": pc.cast(pa.array(np.where(np.isnan(start), 0, start).astype(np.int64) * 1000,
                                               mask=np.isnan(start)), pa.timestamp("us", tz="UTC")),
        "interval_s": _nullable(rates["seconds"]), "dt_s": _nullable(rates["dt"] / 1000.0),
        "counter_wrapped": pa.array(wrapped), "line_rate_bps": pa.nulls(n, pa.int64()) if bps is None
        else pa.array(np.full(n, bps, np.int64)),
        "in_bytes_per_s": _nullable(rates["in_bps"]), "out_bytes_per_s": _nullable(rates["out_bps"]),
        "in_util": _nullable(rates["in_util"]), "out_util": _nullable(rates["out_util"]),
        REPEATED_INSTANT: pa.array(np.concatenate([[False], ms[1:] == ms[:-1]]) if n else np.zeros(0, bool)),
        SAVE_TIME_UNPROVEN: pa.array(save_time_unproven(table.column("SaveTime"), ms)),
        REPEAT_COPY: pa.array(np.zeros(n, bool)), EXACT: pa.array(np.zeros(n, bool)),
        RERATE: pa.array(np.full(n, rerate)),
    }
    return pa.table(columns, schema=PASS_OUTPUT)


def _copy_rows(table: pa.Table, ms: np.ndarray, lines: np.ndarray, file: dict) -> pa.Table:
    """Exact copies of kept polls: typed like them, with no rate (they are counted, not kept)."""
    n = len(ms)
    columns = {f.name: pa.nulls(n, f.type) for f in PASS_OUTPUT}
    columns.update(_typed(table, ms, lines, file), **{REPEATED_INSTANT: pa.array(np.zeros(n, bool)),
                                                       SAVE_TIME_UNPROVEN: pa.array(np.zeros(n, bool)),
                                                       REPEAT_COPY: pa.array(np.ones(n, bool)),
                                                       EXACT: pa.array(np.zeros(n, bool)),
                                                       RERATE: pa.array(np.ones(n, bool))})
    return pa.table(columns, schema=PASS_OUTPUT)


def _marker(file: dict) -> pa.Table:
    """One row saying: parse this file line by line."""
    row = {f.name: pa.nulls(1, f.type) for f in PASS_OUTPUT}
    row.update(source_file=_constant(file["source_file"], 1), hour_cst=_constant(file["hour_cst"], 1),
               **{EXACT: pa.array([True]), RERATE: pa.array([True])})
    return pa.table(row, schema=PASS_OUTPUT)


def one_file(file: dict, state: dict | None = None) -> pa.Table:
    table = read_port_file(file["path"])
    if table is None or not _holds(table, file["folder_device_name"], file["file_port_name"]):
        return _marker(file)
    rows = rated_rows(table, file, (state or {}).get((file["folder_device_name"], file["file_port_name"])))
    return _marker(file) if rows is None else rows


# files' rows handed to the engine together. Sail queues up to 16 batches per task between the
# function and the engine's writer, so while the pass runs ahead of the write, the batch size
# sets what waits: measured on a full generated hour (the CLI, 4 + 4 runs alternated), 32 K rows
# peaked at 1,347-1,847 MiB (median 1,611) against 1,776-2,088 MiB (median 1,890) with 128 K, at the
# same wall (0.99x); 8 K rows lowered the peak little more and cost 2 % of the wall
BATCH_ROWS = 32_768


def parse_files(batches: Iterator[pa.RecordBatch], tally_folder: str | None = None,
                state: dict | None = None, dictionary: bool = False) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: rows of FILE_COLUMNS in, OUTPUT rows out, file by file, handed
    over in batches of about BATCH_ROWS rows; each file done is told to io.progress. `state`:
    state_of the hour before the files' hour. With `dictionary` (the engine takes them:
    io.frames.takes_dictionary_strings), the REPEATED_STRINGS come as dictionaries."""
    def handed(tables: list[pa.Table]) -> list[pa.RecordBatch]:
        table = pa.concat_tables(tables)
        return (table if dictionary else table.cast(OUTPUT)).combine_chunks().to_batches()

    pending: list[pa.Table] = []
    rows = 0
    for batch in batches:
        for file in batch.to_pylist():
            table = one_file(file, state)
            progress.tally(tally_folder, file["path"], table.num_rows)
            pending.append(table)
            rows += table.num_rows
            if rows >= BATCH_ROWS:
                yield from handed(pending)
                pending, rows = [], 0
    if pending:
        yield from handed(pending)

