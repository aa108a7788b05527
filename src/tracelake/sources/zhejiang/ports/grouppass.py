"""The one pass over port files a group at a time: filepass's checks and rates for many files in one
set of numpy operations, where file by file the Python around them cost as much as the parse.

A group is GROUP_FILES files of one task. Each file is read and parsed once, alone
(filepass.read_port_file: parsing several files' bytes in one call was measured no faster); the
checks filepass makes per file are then made per file over the whole group at once, and the
files that pass them are rated together (arrays.segment_rates). A file the group cannot take
as it is (an instant out of order or twice, the 32-bit management port, polls that overlap the
hour before, a failed check, no rows, a parse that failed) goes to filepass's per-file functions
with its own rows, so its rows, marker or RERATE are exactly what filepass gives it alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from tracelake.io import progress
from tracelake.io.parse import KEPT, VERDICT
from tracelake.io.sinkfiles import SinkFile
from tracelake.sources.zhejiang.ports import carry, filepass
from tracelake.sources.zhejiang.ports.arrays import rate_columns, segment_rates
from tracelake.sources.zhejiang.ports.filepass import (
    COUNTERS,
    OUTSIDE_HOUR,
    PASS_OUTPUT,
    RATE_OUT_OF_BOUNDS,
    REPEATED_INSTANT,
    RERATE,
    SAVE_TIME_UNPROVEN,
    YIELDED,
)
from tracelake.sources.zhejiang.ports.rules import is_32bit, line_rate_of
from tracelake.sources.zhejiang.savetime import save_time_unproven_files

# files per group: enough to spread the group's Python over many files (measured at this size only,
# docs/engine-notes.md); what waits in Sail's queue is still bounded by filepass.BATCH_ROWS
GROUP_FILES = 16


def _alone(tables: list[pa.Table], files: list[dict], state: dict) -> np.ndarray:
    """Per file, whether filepass must take it alone (module docstring)."""
    alone = filepass.failed_checks(tables, [f["folder_device_name"] for f in files],
                                   [f["file_port_name"] for f in files])
    for i, (table, file) in enumerate(zip(tables, files)):
        ms = table.column("SaveTimeUTC").to_numpy()
        before = state.get((file["folder_device_name"], file["file_port_name"]))
        alone[i] |= (is_32bit(file["file_port_name"]) or bool(np.any(ms[1:] <= ms[:-1]))
                     or bool(before is not None and len(before[0]) and ms[0] <= before[0][-1]))
    return alone


def _per_file(values: list[str], segment: np.ndarray) -> pa.DictionaryArray:
    """Each row's file's value, as a dictionary of the group's distinct values."""
    distinct, codes = np.unique(np.array(values, dtype=object), return_inverse=True)
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)[segment]), pa.array(distinct, pa.string()))


def _with_state(ms: np.ndarray, counts: list[np.ndarray], sizes: np.ndarray, befores: list) -> tuple:
    """(instants, counters, series sizes, own rows) with each file's carried state (filepass.state_of's
    entry: instants, 1 where non-zero) ahead of its rows, as standalone_rates puts it."""
    if not any(b is not None and len(b[0]) for b in befores):
        return ms, counts, sizes, None
    edges = np.concatenate([[0], np.cumsum(sizes)])
    ahead = [np.asarray(b[0] if b is not None else [], np.int64) for b in befores]
    nonzero = [np.asarray(b[1] if b is not None else [], np.int64) for b in befores]

    def woven(rows: np.ndarray, state: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([p for i in range(len(sizes)) for p in (state[i], rows[edges[i]:edges[i + 1]])])

    own = woven(np.ones(len(ms), bool), [np.zeros(len(a), bool) for a in ahead])
    return (woven(ms, ahead), [woven(c, nonzero) for c in counts], sizes + [len(a) for a in ahead], own)


def rated_group(table: pa.Table, counts: np.ndarray, files: list[dict], state: dict, max_util: float) -> pa.Table:
    """filepass._rated of files that are each in time order with no instant twice, no 32-bit port
    and no overlap with the hour before: their rows (one after another, `counts` each) rated in one go."""
    n, k = table.num_rows, len(files)
    segment = np.repeat(np.arange(k), counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    ms = table.column("SaveTimeUTC").to_numpy()
    values = [table.column(c).to_numpy() for c in COUNTERS]
    befores = [state.get((f["folder_device_name"], f["file_port_name"])) for f in files]
    series_ms, series_counts, sizes, own = _with_state(ms, values, counts, befores)
    rates_bps = [line_rate_of(f["file_port_name"]) for f in files]
    rates = segment_rates(series_ms, series_counts, np.repeat(np.arange(k), sizes),
                          np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
                          np.repeat([np.nan if b is None else float(b) for b in rates_bps], sizes))
    if own is not None:
        rates = {name: v[own] for name, v in rates.items()}
    bps = np.repeat([0 if b is None else b for b in rates_bps], counts).astype(np.int64)
    no_rate = np.repeat([b is None for b in rates_bps], counts)
    false = pa.array(np.zeros(n, bool))
    columns = {
        "hour_cst": _per_file([f["hour_cst"] for f in files], segment),
        "device_name": _per_file([f["folder_device_name"] for f in files], segment),
        "port_name": _per_file([f["file_port_name"] for f in files], segment),
        "save_time_utc": pa.array(ms * 1000, pa.timestamp("us", tz="UTC")),
        "save_time": table.column("SaveTime"),
        **{name: table.column(raw) for name, raw in (("in_pkts", "InPkts"), ("in_octets", "InOctets"),
                                                       ("out_pkts", "OutPkts"), ("out_octets", "OutOctets"),
                                                       ("in_ratio", "InRatio"), ("out_ratio", "OutRatio"))},
        "folder_device_name": _per_file([f["folder_device_name"] for f in files], segment),
        "file_port_name": _per_file([f["file_port_name"] for f in files], segment),
        "source_file": _per_file([f["source_file"] for f in files], segment),
        "line_number": pa.array(np.arange(n, dtype=np.int64) - np.repeat(starts, counts) + 2),
        **rate_columns(rates), "counter_wrapped": false,
        "line_rate_bps": pa.array(bps, mask=no_rate) if no_rate.any() else pa.array(bps),
        REPEATED_INSTANT: false,
        SAVE_TIME_UNPROVEN: pa.array(save_time_unproven_files(table.column("SaveTime"), ms, counts)),
        RATE_OUT_OF_BOUNDS: filepass.rates_out_of_bounds(rates, max_util),
        OUTSIDE_HOUR: pa.array(filepass.outside_hour(ms, np.repeat([filepass.hour_start_ms(f["hour_cst"]) for f in files],
                                                                   counts))),
        VERDICT: pa.array(np.full(n, KEPT, np.int8)), RERATE: false,
    }
    return pa.table(columns, schema=PASS_OUTPUT)


def one_group(files: list[dict], state: dict | None, max_util: float,
              marks: carry.Marks | None = None) -> tuple[list[pa.Table], list[int]]:
    """(the group's tables, the rows each file gave): one table of the files rated together, and
    one per file taken alone. Each file is read and parsed once (filepass.read_port_file). With
    `marks`, the files' rows are added to them (carry)."""
    state = state or {}
    typed = [filepass.read_port_file(f["path"]) for f in files]
    together = [i for i, t in enumerate(typed) if t is not None and t.num_rows]
    tables, rows = [], [0] * len(files)
    alone = np.ones(len(files), bool)
    if together:
        apart = _alone([typed[i] for i in together], [files[i] for i in together], state)
        alone[together] = apart
        kept = [i for i, a in zip(together, apart) if not a]
        if kept:
            counts = np.array([typed[i].num_rows for i in kept], np.int64)
            table = pa.concat_tables([typed[i] for i in kept])
            tables.append(rated_group(table, counts, [files[i] for i in kept], state, max_util))
            for i, n in zip(kept, counts):
                rows[i] = int(n)
            if marks is not None:
                carry.marks_of_series(table.column("SaveTimeUTC").to_numpy(),
                                          [table.column(c).to_numpy() for c in COUNTERS], counts,
                                          [(files[i]["folder_device_name"], files[i]["file_port_name"]) for i in kept], marks)
    for i in np.nonzero(alone)[0]:
        tables.append(filepass.file_rows(typed[i], files[i], state, max_util))
        rows[i] = tables[-1].num_rows
        if marks is not None:
            carry.marks_of(tables[-1], marks)
    return tables, rows


def _written_off(table: pa.Table, sink: SinkFile) -> pa.Table:
    """`table` (YIELDED rows) less the rows written to `sink`: those kept and not set apart
    (RERATE), in their staged form (filepass.WRITTEN)."""
    verdicts = table.column(VERDICT).to_numpy(zero_copy_only=False)
    apart = table.column(RERATE).fill_null(True).to_numpy(zero_copy_only=False)
    written = (verdicts == KEPT) & ~apart
    if not written.any():
        return table
    every = bool(written.all())  # the usual group: a filter would copy all its columns for nothing
    kept = table if every else table.filter(pa.array(written))
    for name, kind in filepass.WRITTEN:
        if name not in kept.column_names:
            kept = kept.append_column(name, pa.nulls(kept.num_rows, kind))
    sink.write(kept)
    return table.slice(0, 0) if every else table.filter(pa.array(~written))


def parse_files(batches: Iterator[pa.RecordBatch], tally_folder: str | None = None, *, max_util: float,
                state: dict | None = None, dictionary: bool = False, carry_folder: str | None = None,
                sink_json: str | None = None) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: rows of filepass.FILE_COLUMNS in, YIELDED rows out, GROUP_FILES files
    at a time, handed over in batches of at most filepass.BATCH_ROWS rows; the files of each group
    done are told to io.progress. `max_util`: the limit of silver's rates_within_line_rate (its
    suite's meta.limits). `state`: filepass.state_of the hour before the files' hour. With
    `dictionary` (the engine takes them: io.frames.takes_dictionary_strings), the
    REPEATED_STRINGS come as dictionaries. With `carry_folder` (a folder on this machine), the state these
    files leave for the hour after is written there once they are all done (carry). With `sink_json`
    (io.sinkfiles.sink_spec), the kept rows not set apart are written to one file of the sink by
    this task instead of handed over (_written_off); a task that fails removes its file again."""
    marks: carry.Marks = {}
    paths: list[str] = []
    sink = None if sink_json is None else SinkFile(sink_json, f"part-{uuid.uuid4().hex}-written.parquet",
                                                   filepass.WRITTEN, filepass.WRITTEN_REQUIRED)
    try:
        for batch in batches:
            files = batch.to_pylist()
            for first in range(0, len(files), GROUP_FILES):
                group = files[first:first + GROUP_FILES]
                tables, rows = one_group(group, state, max_util, marks if carry_folder is not None else None)
                progress.tally_files(tally_folder, [(f["path"], n) for f, n in zip(group, rows)])
                paths.extend(f["path"] for f in group)
                table = filepass.with_problems(pa.concat_tables(tables))
                if sink is not None:
                    table = _written_off(table, sink)
                yield from (table if dictionary else table.cast(YIELDED)).to_batches(max_chunksize=filepass.BATCH_ROWS)
    except BaseException:
        if sink is not None:
            sink.discard()
        raise
    if sink is not None:
        sink.close()
    if carry_folder is not None:
        carry.write_part(carry_folder, paths, marks)
