"""One pass over each per-port counter file: read, checked, typed and rated together, in Arrow.

One file is one port's series for one hour, so a file is the unit: the function reads it whole
with pyarrow's CSV reader (by path, where the engine's task runs: a local path or any URL
pyarrow.fs opens), checks everything the exact line-by-line parse would, types it, and computes
each row's rate with numpy. No shuffle, no sort of the hour, no second read.

What it checks, and what it does when a check fails: every line splits into the header's ten
fields (an empty line or a stray comma fails the read), the bytes are UTF-8, every value casts
to its column's type and is present, times are epoch milliseconds of the years 2000-2099,
ratios are finite, every row names the file's own port and switch, and two rows of one instant
are the same poll twice (an exact copy is a row of its own with the verdict REPEATED, counted as
repeated and not kept; a copy with other values is a conflict). A file that fails any
check yields a single marker row (the verdict EXACT) and no data: parser.PortParser parses such
files line by line, where each line keeps its value or its reasons, exactly as before. So the
pass never has to reproduce a quarantine reason.

Rates (window.port_rates' rules, vectorised), under silver.zj_port_rates' own column
names: a file continues from the carried state of its port's hour before (window.carried_state,
collected by parser.carried_into_pass: a few instants per port), so its rates are the window's over
both hours, and its rows can be silver's as they are staged. Two kinds of file cannot be: one
whose polls overlap the hour before (re-delivered polls must find their twins there, which the
state does not hold) and a management port whose 32-bit counters wrapped (silver's counts then
differ from the delivered ones). Their rows carry RERATE, are rated as if their hour were the whole
history, and are staged apart; rebuild.rebuild_rates computes their silver rows again.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from tracelake.io import objectstore
from tracelake.io.frames import arrow_ddl
from tracelake.io.parse import (
    EPOCH_MS_MAX,
    EPOCH_MS_MIN,
    EXACT,
    EXACT_REASON,
    KEPT,
    PARSE_ERRORS,
    REPEATED,
    STAGED_RAW_LINE,
    STAGED_RAW_VALUES,
    VERDICT,
)
from tracelake.schema import RESERVED_PREFIX
from tracelake.sources.zhejiang.clock import hour_start_utc
from tracelake.sources.zhejiang.ports.arrays import rate_columns, standalone_rates
from tracelake.sources.zhejiang.ports.rules import STATUSES, is_32bit, line_rate_of
from tracelake.sources.zhejiang.savetime import save_time_unproven

REPEATED_INSTANT = f"{RESERVED_PREFIX}repeated_instant"  # the row's instant is its file's row before's: a key twice
# the row's SaveTime text was not shown to be SaveTimeUTC + 8 h (save_time_unproven): where no row
# is, the gate records the suite's rule save_time_matches_utc as passed without its query
SAVE_TIME_UNPROVEN = f"{RESERVED_PREFIX}save_time_unproven"
# the row is one silver's critical rule rates_within_line_rate could return (an unknown status, a
# utilisation outside 0..the rule's max_util, an interval not above 0): where no staged row is, its
# gate records that rule as passed without its query over the hour's rows (rates_out_of_bounds)
RATE_OUT_OF_BOUNDS = f"{RESERVED_PREFIX}rate_out_of_bounds"
# the row's SaveTimeUTC lies outside its CST hour folder: where no row is, the gate records the
# suite's rule samples_in_hour_folder (a group-by of the hour) as passed without its query
OUTSIDE_HOUR = f"{RESERVED_PREFIX}outside_hour_folder"
HOUR_MS = 3_600_000
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
RERATE = f"{RESERVED_PREFIX}rerate"  # the file's silver rows are computed again (module docstring): its rows are staged apart
FILE_COLUMNS = ("path", "source_file", "hour_cst", "folder_device_name", "file_port_name")
OUTPUT = pa.schema([
    ("hour_cst", pa.string()), ("device_name", pa.string()), ("port_name", pa.string()),
    ("save_time_utc", pa.timestamp("us", tz="UTC")), ("save_time", pa.string()),
    ("in_pkts", pa.int64()), ("in_octets", pa.int64()), ("out_pkts", pa.int64()), ("out_octets", pa.int64()),
    ("in_ratio", pa.float64()), ("out_ratio", pa.float64()),
    ("folder_device_name", pa.string()), ("file_port_name", pa.string()),
    ("source_file", pa.string()), ("line_number", pa.int64()), *RATE_COLUMNS, (REPEATED_INSTANT, pa.bool_()),
    (SAVE_TIME_UNPROVEN, pa.bool_()), (RATE_OUT_OF_BOUNDS, pa.bool_()), (OUTSIDE_HOUR, pa.bool_()),
    (VERDICT, pa.int8()), (RERATE, pa.bool_()),
])
# the strings a file repeats on every row, yielded as dictionaries (one value each, the status one of
# eight): the engine's Parquet writer then takes them for less. Measured on a full generated
# hour's pass and staged write, 3 + 3 runs alternated in process: 9.8-10.2 s against 10.6-11.6 s,
# 19.4 s of the engine's CPU against 21.1 s. An engine that refuses them gets YIELDED (parse_files).
REPEATED_STRINGS = ("hour_cst", "device_name", "port_name", "folder_device_name", "file_port_name", "source_file",
                    "status")
DICTIONARY = pa.dictionary(pa.int32(), pa.string())
PASS_OUTPUT = pa.schema([f.with_type(DICTIONARY) if f.name in REPEATED_STRINGS else f for f in OUTPUT])
# what the pass hands over: its rows with their parse problems (io.parse.PARSE_ERRORS), made here
# in Arrow so that staging evaluates nothing per row (FastParse.clean): a marker row's problem
# (io.parse.EXACT_REASON) says its file is parsed line by line; every other row has none. Measured
# on a full generated hour's pass and staged write, 3 + 3 runs alternated in process: 9.2-9.9 s
# against 10.2-11.1 s with the problems and the staged form computed by the engine, 18-19 s of its
# CPU against 20-22 s.
PROBLEMS = pa.field(PARSE_ERRORS, pa.list_(pa.string()))
YIELDED = pa.schema([*OUTPUT, PROBLEMS])
OUTPUT_DDL = arrow_ddl(YIELDED)
# a kept row in its staged form (quality.split.staged_form of a clean parse), as the pass writes it
# itself into the run's sink (io.sinkfiles, beside the sink's constants: the lineage and the
# quarantine rules' flags): no line number or row id, no raw text, no problems
WRITTEN = [(f.name, f.type) for f in PASS_OUTPUT if f.name != "line_number"] + [
    (STAGED_RAW_LINE, pa.string()), (STAGED_RAW_VALUES, pa.string()), (PROBLEMS.name, PROBLEMS.type)]
# the written columns no kept row leaves null (io.sinkfiles: required columns, cheaper to write):
# every raw value (read_port_file sends a file with a missing one to the exact parse), the names
# and file, the status, the wrap and the pass's own flags. A null there would fail the pass's
# task, and its files would be parsed line by line instead (run.parsing), never stored half.
WRITTEN_REQUIRED = frozenset(
    [f.name for f in OUTPUT if f.name not in {"line_number", *(n for n, _ in RATE_COLUMNS)}]
    + ["status", "counter_wrapped", REPEATED_INSTANT, SAVE_TIME_UNPROVEN, RATE_OUT_OF_BOUNDS, OUTSIDE_HOUR,
       VERDICT, RERATE])


HEADER = ",".join(RAW).encode()
BOM = b"\xef\xbb\xbf"


def read_port_file(path: str) -> pa.Table | None:
    """The file typed by the documented header's columns, or None when any line would need the
    exact parse (another header, a field count off, an empty line, a byte that is not UTF-8, a
    value that does not cast or is missing)."""
    with objectstore.open_raw(path) as stream:
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


def failed_checks(tables: list[pa.Table], devices: list[str], ports: list[str]) -> np.ndarray:
    """Per file typed by read_port_file, whether a row fails a check that the exact parse and the
    quarantine rules would otherwise make per row: an instant outside the years 2000-2099, a ratio
    that is not finite, a row naming another switch or port than the file's; a file of no rows
    fails too, as it always has (the exact parse then reads it). Made for a group of
    files at once (grouppass) as for one (_holds)."""
    counts = np.array([t.num_rows for t in tables], np.int64)
    ends = np.cumsum(counts)

    def values(name: str) -> np.ndarray:
        return np.concatenate([t.column(name).to_numpy() for t in tables])

    ms = values("SaveTimeUTC")
    bad = (ms < EPOCH_MS_MIN) | (ms > EPOCH_MS_MAX) | ~np.isfinite(values("InRatio")) | ~np.isfinite(values("OutRatio"))
    seen = np.concatenate([[0], np.cumsum(bad)])
    failed = (seen[ends] - seen[ends - counts] > 0) | (counts == 0)  # no rows: the exact parse says why
    for i, (table, device, port) in enumerate(zip(tables, devices, ports)):
        failed[i] |= _names_differ(table.column("PortName"), port) or _names_differ(table.column("DeviceName"), device)
    return failed


def _names_differ(column: pa.ChunkedArray, name: str) -> bool:
    """Whether a value of a file's column is not `name`: its value bytes compared in one go with
    the name repeated."""
    values = column.combine_chunks()
    if not len(values):
        return False
    _, offsets, data = values.buffers()
    ends = np.frombuffer(offsets, np.int32, len(values) + 1, values.offset * 4)
    encoded = name.encode()
    return not (bool(np.all(np.diff(ends) == len(encoded)))
                and data.slice(int(ends[0]), int(ends[-1] - ends[0])).equals(pa.py_buffer(encoded * len(values))))


def _holds(table: pa.Table, device: str, port: str) -> bool:
    """The checks the exact parse and the quarantine rules would otherwise make per row."""
    return not failed_checks([table], [device], [port])[0]


def state_of(rows: list[tuple]) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
    """The carried state the pass reads, from the rows of window.carried_state (device,
    port, epoch ms, 1 if non-zero) of one hour: per (switch, port), its instants in time order
    and whether each row is non-zero. A few rows per port: small enough to ship with the function."""
    state: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for device, port, ms, nonzero in rows:
        state.setdefault((device, port), []).append((int(ms), int(nonzero)))
    return {key: tuple(map(list, zip(*sorted(v)))) for key, v in state.items()}


def rates_out_of_bounds(rates: dict[str, np.ndarray], max_util: float) -> pa.Array:
    """RATE_OUT_OF_BOUNDS of rows rated by arrays, `max_util` the rule's limit (its suite's
    meta.limits; NaN there is null: a comparison with it returns no row, as in the rule's query)."""
    status = rates["status"]
    unknown = (status < 0) | (status >= len(STATUSES))
    utils = [rates[name] for name in ("in_util", "out_util")]
    outside = np.logical_or.reduce([(u > max_util) | (u < 0) for u in utils])
    return pa.array(unknown | outside | (rates["seconds"] <= 0))


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


def rated_rows(table: pa.Table, file: dict, before: tuple[list[int], list[int]] | None, max_util: float) -> pa.Table | None:
    """The file's rows as the parse contract's typed columns plus the rate columns (continuing
    from `before`, see _rated); an exact copy of a poll is a row of its own, with the verdict REPEATED
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
        rated = _rated(table.take(kept), ms[kept], lines[kept], file, before, max_util)
        return pa.concat_tables([rated, _copy_rows(table.take(repeats), ms[repeats], lines[repeats], file)])
    return _rated(table, ms, lines, file, before, max_util)


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


@cache
def hour_start_ms(hour: str) -> int:
    """The epoch milliseconds a CST hour folder `YYYYMMDDHH` starts at (clock.hour_start_utc)."""
    return int(hour_start_utc(hour).timestamp()) * 1000


def outside_hour(ms: np.ndarray, start_ms: np.ndarray) -> np.ndarray:
    """Rows whose instant lies outside the hour starting at `start_ms` (samples_in_hour_folder's test)."""
    return (ms < start_ms) | (ms >= start_ms + HOUR_MS)


def _rated(table: pa.Table, ms: np.ndarray, lines: np.ndarray, file: dict,
           before: tuple[list[int], list[int]] | None, max_util: float) -> pa.Table:
    """The file's rows with their rates; continuing from `before` (state_of's entry for its port)
    unless the file overlaps it or is a wrapped 32-bit port's (then RERATE, rated alone)."""
    counts = [table.column(c).to_numpy() for c in COUNTERS]
    port = file["file_port_name"]
    n = len(ms)
    wrapped = np.logical_or.reduce([c < 0 for c in counts]) if is_32bit(port) else np.zeros(n, bool)
    overlap = before is not None and len(before[0]) > 0 and n > 0 and ms[0] <= before[0][-1]
    rerate = bool(overlap or wrapped.any())
    rates = standalone_rates(ms, counts, port, before=None if rerate else before)
    bps = line_rate_of(port)
    columns = {
        **_typed(table, ms, lines, file), **rate_columns(rates),
        "counter_wrapped": pa.array(wrapped), "line_rate_bps": pa.nulls(n, pa.int64()) if bps is None
        else pa.array(np.full(n, bps, np.int64)),
        REPEATED_INSTANT: pa.array(np.concatenate([[False], ms[1:] == ms[:-1]]) if n else np.zeros(0, bool)),
        SAVE_TIME_UNPROVEN: pa.array(save_time_unproven(table.column("SaveTime"), ms)),
        RATE_OUT_OF_BOUNDS: rates_out_of_bounds(rates, max_util),
        OUTSIDE_HOUR: pa.array(outside_hour(ms, np.full(n, hour_start_ms(file["hour_cst"])))),
        VERDICT: pa.array(np.full(n, KEPT, np.int8)),
        RERATE: pa.array(np.full(n, rerate)),
    }
    return pa.table(columns, schema=PASS_OUTPUT)


def _copy_rows(table: pa.Table, ms: np.ndarray, lines: np.ndarray, file: dict) -> pa.Table:
    """Exact copies of kept polls: typed like them, with no rate (they are counted, not kept)."""
    n = len(ms)
    columns = {f.name: pa.nulls(n, f.type) for f in PASS_OUTPUT}
    columns.update(_typed(table, ms, lines, file), **{REPEATED_INSTANT: pa.array(np.zeros(n, bool)),
                                                       SAVE_TIME_UNPROVEN: pa.array(np.zeros(n, bool)),
                                                       OUTSIDE_HOUR: pa.array(np.zeros(n, bool)),
                                                       VERDICT: pa.array(np.full(n, REPEATED, np.int8)),
                                                       RERATE: pa.array(np.ones(n, bool))})
    return pa.table(columns, schema=PASS_OUTPUT)


def _marker(file: dict) -> pa.Table:
    """One row saying: parse this file line by line."""
    row = {f.name: pa.nulls(1, f.type) for f in PASS_OUTPUT}
    row.update(source_file=_constant(file["source_file"], 1), hour_cst=_constant(file["hour_cst"], 1),
               **{VERDICT: pa.array([EXACT], pa.int8()), RERATE: pa.array([True])})
    return pa.table(row, schema=PASS_OUTPUT)


def file_rows(table: pa.Table | None, file: dict, state: dict | None, max_util: float) -> pa.Table:
    """The pass's rows of one file typed by read_port_file (None: it needs the exact parse)."""
    if table is None or not _holds(table, file["folder_device_name"], file["file_port_name"]):
        return _marker(file)
    rows = rated_rows(table, file, (state or {}).get((file["folder_device_name"], file["file_port_name"])), max_util)
    return _marker(file) if rows is None else rows


def one_file(file: dict, state: dict | None, max_util: float) -> pa.Table:
    """The pass's rows of one file, read alone: grouppass's reference."""
    return file_rows(read_port_file(file["path"]), file, state, max_util)


# files' rows handed to the engine together (at most; grouppass). Sail queues up to 16 batches per
# task between the function and the engine's writer, so while the pass runs ahead of the write,
# the batch size sets what waits: measured on a full generated hour (the CLI, 4 + 4 runs
# alternated), 32 K rows peaked at 1,347-1,847 MiB (median 1,611) against 1,776-2,088 MiB (median
# 1,890) with 128 K, at the same wall (0.99x); 8 K rows lowered the peak little more and cost 2 %
# of the wall
BATCH_ROWS = 32_768


def with_problems(table: pa.Table) -> pa.Table:
    """`table` (PASS_OUTPUT rows) with PROBLEMS: EXACT_REASON on a marker row, none on the others."""
    marker = table.column(VERDICT).to_numpy(zero_copy_only=False) == EXACT
    offsets = np.concatenate([[0], np.cumsum(marker)]).astype(np.int32)
    reasons = pa.array([EXACT_REASON] * int(offsets[-1]), pa.string())
    return table.append_column(PROBLEMS, pa.ListArray.from_arrays(pa.array(offsets), reasons))
