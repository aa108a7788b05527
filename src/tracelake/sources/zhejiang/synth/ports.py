"""Per-port counter files in the exact release format (docs/formats/zhejiang.md §3, §8), driven by a load function.

One call writes one hour of chosen switch ports to
`<out_root>/trafficinfo/<hour_cst>/<switch folder>/<port file>.csv`, reproducing what the
parser and silver.zj_port_rates must cope with:
  * the header, UTF-8 Chinese weekday `SaveTime` (CST), epoch-ms `SaveTimeUTC`, LF, no BOM;
  * one time vector per switch (all its ports share it), jittered poll gaps drawn from the
    measured Δt quantiles (p50 541 ms, p95 991 ms, rare multi-second gaps), storage leafs
    polled a little faster; the collector outage after the second row up to 00:04:14.359;
  * on GPU leafs a few ports (about 3 to 12 of 95) that miss rows, usually 1-73, sometimes ~15 %;
  * all-zero rows where the switch counter had not refreshed since the previous poll (a refresh
    clock of 1.0-1.2 s per port): the next non-zero row carries those bytes, so volumes add up;
  * the management port `_0`: never stale, small background chatter, and in some files one
    32-bit wrap (negative OutOctets and OutRatio);
  * ratios: 200G octets/Δt/line rate, 400G the same × 0.622, text `0`, `x.xx`, `x.x`, `100`.
The bytes of a non-zero row are exactly the load integrated over (previous non-zero row, this
row], so a parser that follows the carry rule recovers the load exactly. (On the real files the
bytes of one row look closer to one ~1 s refresh period than to the poll span; the generator
keeps the simpler carry so that round trips are exact, see transforms.zhejiang_ports.)
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import csv as pa_csv

from tracelake.sources.zhejiang.layout import MGMT_PORT, TRAFFIC, device_name, file_name_for_port

HEADER = "SaveTime,SaveTimeUTC,DeviceName,PortName,InPkts,InOctets,OutPkts,OutOctets,InRatio,OutRatio"
CST = timezone(timedelta(hours=8))
WEEKDAYS = "一二三四五六日"
OUTAGE_END_MS = 254_359  # first row after the collector outage, ms after the hour (all switches)
# measured Δt quantiles (probability, ms) on the GPU leafs; storage leafs poll ~0.53 s on average
GPU_LEAF_DT = ((0.0, 500), (0.05, 500), (0.25, 502), (0.5, 541), (0.75, 639), (0.95, 991),
               (0.99, 1865), (0.999, 4221), (0.9999, 5000), (1.0, 15500))
STORAGE_LEAF_DT = ((0.0, 500), (0.25, 500), (0.5, 503), (0.75, 520), (0.95, 590), (0.99, 900),
                   (0.999, 2000), (1.0, 4000))
LINE_BPS = {"TwoHundredGigE": 200e9, "FourHundredGigE": 400e9, "M-GigabitEthernet": 1e9}
RATIO_400G = 0.622  # reported / computed on 400G ports
MGMT_CHATTER_BPS = (3_000.0, 45_000.0)  # background in/out bytes/s of a management port
WRAP = 1 << 32
GRID_S = 0.05  # the load is integrated on this grid
NO_QUOTES = pa_csv.WriteOptions(include_header=False, quoting_style="none")

Load = Callable[[str, str, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _rng(seed: int, *parts: str) -> np.random.Generator:
    return np.random.default_rng([seed, *[zlib.crc32(p.encode()) for p in parts]])


def _hour_start_ms(hour_cst: str) -> int:
    start = datetime.strptime(hour_cst, "%Y%m%d%H").replace(tzinfo=CST)
    return int(start.timestamp() * 1000)


def _is_storage_leaf(folder: str) -> bool:
    return "-ST-leaf-" in folder


def poll_times(folder: str, hour_cst: str, seed: int) -> np.ndarray:
    """Epoch-ms poll instants of one switch for one hour, with the outage after row 2."""
    rng = _rng(seed, "polls", hour_cst, folder)
    start = _hour_start_ms(hour_cst)
    first = start + int(rng.integers(602, 1236))
    times = [first, first + int(rng.integers(500, 510)), start + OUTAGE_END_MS]
    table = STORAGE_LEAF_DT if _is_storage_leaf(folder) else GPU_LEAF_DT
    probs, gaps = np.array([p for p, _ in table]), np.array([g for _, g in table], dtype=float)
    steps = np.interp(rng.random(12_000), probs, gaps).astype(np.int64)
    rest = times[-1] + np.cumsum(steps)
    rest = rest[rest < start + 3_600_000]
    return np.concatenate([np.array(times, dtype=np.int64), rest])


def _kept_rows(folder: str, port: str, n: int, hour_cst: str, seed: int) -> np.ndarray:
    """Indices of the switch's polls this port has: some GPU-leaf ports miss a few rows."""
    keep = np.ones(n, dtype=bool)
    rng = _rng(seed, "drops", hour_cst, folder, port)
    if _is_storage_leaf(folder) or port == MGMT_PORT or rng.random() > 7.5 / 95:
        return np.flatnonzero(keep)
    missing = int(rng.integers(1, 74)) if rng.random() < 0.85 else int(0.15 * n)
    keep[3 + rng.choice(n - 3, size=min(missing, n - 3), replace=False)] = False
    return np.flatnonzero(keep)


def _fresh(port: str, times_ms: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Whether the switch counter refreshed since the previous poll (else the row reads zero)."""
    if port == MGMT_PORT:
        return np.ones(len(times_ms), dtype=bool)
    period = rng.uniform(1000.0, 1200.0)
    ticks = np.floor((times_ms - rng.uniform(0.0, period)) / period)
    fresh = np.ones(len(times_ms), dtype=bool)
    fresh[1:] = ticks[1:] > ticks[:-1]
    return fresh


def _cumulative_bytes(load_fn: Load, folder: str, port: str, times_ms: np.ndarray,
                      line_bps: float) -> tuple[np.ndarray, np.ndarray]:
    """Bytes in and out since a point before the first poll, at every poll instant."""
    t0 = times_ms[0] / 1000.0 - 0.5
    edges = np.arange(t0, times_ms[-1] / 1000.0 + GRID_S, GRID_S)
    mids = edges[:-1] + GRID_S / 2
    util_in, util_out = load_fn(folder, port, mids)
    per_cell = line_bps / 8.0 * GRID_S
    out = []
    for util, chatter in zip((util_in, util_out), MGMT_CHATTER_BPS):
        cell = np.clip(np.broadcast_to(np.asarray(util, dtype=float), mids.shape), 0.0, 1.0) * per_cell
        if port == MGMT_PORT:
            cell = cell + chatter * GRID_S
        cum = np.concatenate([[0.0], np.cumsum(cell)])
        out.append(np.interp(times_ms / 1000.0, edges, cum))
    return out[0], out[1]


@lru_cache(maxsize=1)
def _ratio_tables() -> tuple[np.ndarray, np.ndarray]:
    """Percent text for every value 0.00..100.00, by hundredths: two decimals, and one."""
    cents = range(10_001)
    full = [str(c // 100) if c % 100 == 0 else f"{c / 100:.2f}" for c in cents]
    short = []
    for c in cents:
        tenth = round(c / 100, 1)
        short.append(full[c] if c == 0 or tenth == 0 or tenth.is_integer() else f"{tenth:.1f}")
    return np.array(full, dtype=object), np.array(short, dtype=object)


def _ratio_text(values: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    """The switch's percent text: `0`, integers as `100`, else two decimals (400G: some one)."""
    full, short = _ratio_tables()
    cents = np.clip(np.rint(values * 100.0), 0, 10_000).astype(np.int64)
    texts = full[cents]
    if kind == "FourHundredGigE":
        pick = rng.random(len(values)) < 0.12
        texts[pick] = short[cents[pick]]
    return texts


def _save_time_text(ms: np.ndarray) -> list[str]:
    texts = []
    for value in ms.tolist():
        local = datetime.fromtimestamp(value / 1000.0, CST)
        texts.append(f"{local:%Y/%m/%d} 星期{WEEKDAYS[local.weekday()]} {local:%H:%M:%S}.{value % 1000:03d}")
    return texts


def _port_rows(folder: str, port: str, times_ms: np.ndarray, time_text: pa.Array, hour_cst: str,
               load_fn: Load, seed: int) -> pa.Table:
    """One port's rows as a table in the file's column order."""
    kind = next(k for k in LINE_BPS if port.startswith(k))
    line_bps = LINE_BPS[kind]
    rng = _rng(seed, "port", hour_cst, folder, port)
    rows = _kept_rows(folder, port, len(times_ms), hour_cst, seed)
    t = times_ms[rows]
    cum_in, cum_out = _cumulative_bytes(load_fn, folder, port, t, line_bps)
    fresh = _fresh(port, t, rng)
    fresh_cum_in = np.maximum.accumulate(np.where(fresh, cum_in, 0.0))
    fresh_cum_out = np.maximum.accumulate(np.where(fresh, cum_out, 0.0))
    prev_in = np.concatenate([[0.0], fresh_cum_in[:-1]])
    prev_out = np.concatenate([[0.0], fresh_cum_out[:-1]])
    in_oct = np.where(fresh, np.round(cum_in - prev_in), 0).astype(np.int64)
    out_oct = np.where(fresh, np.round(cum_out - prev_out), 0).astype(np.int64)
    size_in, size_out = (146.0, 1082.0) if port == MGMT_PORT else tuple(rng.uniform(3000.0, 4100.0, 2))
    in_pkts = np.where(in_oct > 0, np.maximum(1, np.round(in_oct / size_in)), 0).astype(np.int64)
    out_pkts = np.where(out_oct > 0, np.maximum(1, np.round(out_oct / size_out)), 0).astype(np.int64)
    dt_s = np.diff(t, prepend=t[0] - 500) / 1000.0
    scale = 100.0 * 8.0 / (dt_s * line_bps) * (RATIO_400G if kind == "FourHundredGigE" else 1.0)
    in_ratio = _ratio_text(np.minimum(in_oct * scale, 100.0), kind, rng)
    out_ratio = _ratio_text(np.minimum(out_oct * scale, 100.0), kind, rng)
    if port == MGMT_PORT and rng.random() < 0.125:  # a 32-bit wrap of OutOctets somewhere
        i = int(rng.integers(3, len(t)))
        out_oct[i] -= WRAP
        out_ratio[i] = f"{-rng.uniform(3.0, 11.0):.2f}"  # the switch's ratio wraps as well
    n = len(t)
    return pa.table({
        "SaveTime": time_text.take(pa.array(rows)), "SaveTimeUTC": t,
        "DeviceName": pa.repeat(device_name(folder), n), "PortName": pa.repeat(port, n),
        "InPkts": in_pkts, "InOctets": in_oct, "OutPkts": out_pkts, "OutOctets": out_oct,
        "InRatio": pa.array(in_ratio, pa.string()), "OutRatio": pa.array(out_ratio, pa.string()),
    })


def write_port_hour(
    out_root: Path,
    hour_cst: str,
    ports: list[tuple[str, str]],
    load: Load,
    seed: int,
) -> list[Path]:
    """Write one hour (CST `YYYYMMDDHH`) of the given (switch folder, port name) files.

    `load(folder, port, epoch_seconds)` gives (in, out) utilisation as fractions of line rate;
    in = bytes the switch port receives. Deterministic for a seed; returns the files written."""
    by_switch: dict[str, list[str]] = defaultdict(list)
    for folder, port in ports:
        file_name_for_port(folder, port)  # validates both names
        if port not in by_switch[folder]:
            by_switch[folder].append(port)
    written = []
    for folder, names in sorted(by_switch.items()):
        times = poll_times(folder, hour_cst, seed)
        time_text = pa.array(_save_time_text(times), pa.string())
        target = Path(out_root) / TRAFFIC / hour_cst / folder
        target.mkdir(parents=True, exist_ok=True)
        for port in names:
            path = target / file_name_for_port(folder, port)
            table = _port_rows(folder, port, times, time_text, hour_cst, load, seed)
            with open(path, "wb") as fh:
                fh.write((HEADER + "\n").encode("utf-8"))
                pa_csv.write_csv(table, fh, NO_QUOTES)
            written.append(path)
    return sorted(written)
