"""The rate rules (rules.py) over ports' rows in numpy: the one pass rates a port file, or a group
of them, with these instead of the window (window.port_rates, the reference it equals row for
row), and hands the rates over as the Arrow columns silver.zj_port_rates names (rate_columns)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.sources.zhejiang.ports.rules import (
    FIRST,
    GAP,
    IDLE,
    MAX_GAP_S,
    MAX_UTIL,
    NEGATIVE,
    NO_NEW_DATA,
    OVER_LINE_RATE,
    REPEATED,
    STATUSES,
    UPDATE,
    WRAP,
    is_32bit,
    line_rate_of,
)

SEGMENT_BITS = 41  # a segment's instants span less than 2**41 ms (70 years): its running maxima stay apart
STATUS_NAMES = pa.array(STATUSES, pa.string())


def standalone_rates(ms: np.ndarray, counts: list[np.ndarray], port: str, max_gap_s: float = MAX_GAP_S,
                     max_util: float = MAX_UTIL, before: tuple[np.ndarray, np.ndarray] | None = None,
                     ) -> dict[str, np.ndarray]:
    """segment_rates of one port's rows in time order, as one segment. `before` is the port's
    carried state of the hour before, (instants, 1 where the row is non-zero) in time order, all
    before the first row: the rows are rated after it as the window rates them over the union;
    without it, as if no row came before them."""
    ahead = 0 if before is None else len(before[0])
    if ahead:  # the state's rows first: only whether they are zero matters, and their own rates are dropped
        ms = np.concatenate([np.asarray(before[0], np.int64), ms])
        counts = [np.concatenate([np.asarray(before[1], np.int64), c]) for c in counts]
    bps = line_rate_of(port)
    rates = segment_rates(ms, counts, np.zeros(len(ms), np.int64), np.arange(min(1, len(ms))),
                          np.nan if bps is None else float(bps), wrapping=is_32bit(port),
                          max_gap_s=max_gap_s, max_util=max_util)
    return {name: values[ahead:] for name, values in rates.items()}


def segment_rates(ms: np.ndarray, counts: list[np.ndarray], segment: np.ndarray, firsts: np.ndarray,
                  bps: float | np.ndarray, wrapping: bool | np.ndarray = False, max_gap_s: float = MAX_GAP_S,
                  max_util: float = MAX_UTIL) -> dict[str, np.ndarray]:
    """Status codes, interval start (ms, NaN for none), interval, dt (ms), bytes/s and utilisation
    of rows that are several ports' series one after another: `segment` numbers each row's series
    (0, 1, ... in row order), `firsts` are the rows that open one, each series is in time order.
    `bps` is the line rate per row (NaN where none is known); `wrapping` marks the rows of a 32-bit
    port, whose negative deltas have wrapped. Every value equals what the rules give each series
    alone: the running last update restarts per series through keys (series, instant)."""
    n = len(ms)
    negative = np.logical_or.reduce([c < 0 for c in counts]) & ~np.asarray(wrapping)
    counts = [np.where(np.asarray(wrapping) & (c < 0), c + WRAP, c) for c in counts]
    zero = np.logical_and.reduce([c == 0 for c in counts])
    opens = np.zeros(n, bool)
    opens[firsts] = True
    t = ms.astype(np.float64)
    prev = np.empty(n)
    prev[1:] = t[:-1]
    prev[opens] = np.nan
    # the instant of the last non-zero row before each row of its series: a running maximum of
    # keys that order by series first, where a zero row's key is its series' floor
    base = int(ms.min()) if n else 0
    floor = segment.astype(np.int64) << SEGMENT_BITS
    running = np.maximum.accumulate(np.where(zero, floor - 1, floor + (ms - base)))
    last = np.empty(n, np.int64)
    last[1:] = running[:-1]
    found = ~opens & (last >= floor)
    opening = np.repeat(t[firsts], np.diff(np.append(firsts, n)))
    anchor = np.where(found, (last - floor + base).astype(np.float64), opening)
    limit = max_gap_s * 1000.0
    dt = t - prev
    status = np.select([np.isnan(prev), dt == 0, dt > limit, ~zero, (t - anchor) <= limit],
                       [FIRST, REPEATED, GAP, UPDATE, NO_NEW_DATA], IDLE)
    carried = (prev - anchor) <= limit
    start = np.where(status == UPDATE, np.where(carried, anchor, prev), np.where(status == IDLE, prev, np.nan))
    seconds = (t - start) / 1000.0
    with np.errstate(divide="ignore", invalid="ignore"):
        in_bps, out_bps = counts[1] / seconds, counts[3] / seconds
        in_util, out_util = in_bps * 8 / bps, out_bps * 8 / bps
    too_fast = (status == UPDATE) & (np.fmax(in_util, out_util) > max_util)
    status = np.where(negative, NEGATIVE, np.where(too_fast, OVER_LINE_RATE, status))
    keep = ~np.isnan(start) & ~too_fast & ~negative
    return {"status": status, "start": np.where(keep, start, np.nan), "seconds": np.where(keep, seconds, np.nan),
            "dt": dt, "in_bps": np.where(keep, in_bps, np.nan), "out_bps": np.where(keep, out_bps, np.nan),
            "in_util": np.where(keep, in_util, np.nan), "out_util": np.where(keep, out_util, np.nan)}


def nullable(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.float64(), from_pandas=True)  # NaN -> null


def rate_columns(rates: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """segment_rates' arrays as the columns silver.zj_port_rates names (the line rate and whether a
    counter wrapped are the caller's): the status as a dictionary of STATUSES, null where no rate."""
    start = rates["start"]
    return {
        "status": pa.DictionaryArray.from_arrays(pa.array(rates["status"].astype(np.int32)), STATUS_NAMES),
        "interval_start_utc": pc.cast(pa.array(np.where(np.isnan(start), 0, start).astype(np.int64) * 1000,
                                               mask=np.isnan(start)), pa.timestamp("us", tz="UTC")),
        "interval_s": nullable(rates["seconds"]), "dt_s": nullable(rates["dt"] / 1000.0),
        "in_bytes_per_s": nullable(rates["in_bps"]), "out_bytes_per_s": nullable(rates["out_bps"]),
        "in_util": nullable(rates["in_util"]), "out_util": nullable(rates["out_util"]),
    }
