"""Synthetic AcmeTrace utilization files in the release's layout (acme/utilization.py documents it).

One month, 2023-07-15 to 2023-08-15 UTC, for Seren and Kalos: DCGM GPU_UTIL, SM_ACTIVE, FB_USED,
POWER_USAGE (`<IP>-<gpu>` columns, split into -2023-07 / -2023-08 files), Prometheus
NODE_CPU_UTILIZATION and NODE_MEMORY_UTILIZATION (split too) and NODE_IB_SEND / NODE_IB_RECEIVE
(`<IP>-mlx5_0` columns, one file each), plus Seren's IPMI power files. The release's quirks are
in: nodes that report only part of the month (empty cells), duplicate Time rows inside files and
across the month boundary, the NODE_MEMORY bad window of 2023-07-19 with `<IP>.1` columns, Kalos
CPU utilization above 1.0, and type-B servers without MEM_Power.

`scale` sets both the node count (~4 x scale per cluster) and the sampling rate (every
3600 / scale s, at least 15 s), so the size grows with scale^2: scale 1 is about 1 MB, scale ~33
about 1 GB. `nodes` and `interval` set them apart, for files as wide as the release's (the real
Seren DCGM files have ~2,000 GPU columns). utilization/manifest.json records, per metric and power file, the non-empty cells
written, the distinct cells (one per key) and the duplicate cells, for tests to compare.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

START = int(datetime(2023, 7, 15, tzinfo=UTC).timestamp())
END = int(datetime(2023, 8, 15, tzinfo=UTC).timestamp())
MONTH_BREAK = int(datetime(2023, 8, 1, tzinfo=UTC).timestamp())
BAD_WINDOW = (int(datetime(2023, 7, 19, 3, 35, tzinfo=UTC).timestamp()),
              int(datetime(2023, 7, 19, 6, 1, tzinfo=UTC).timestamp()))  # 11:35-14:01 +08:00
GPUS_PER_NODE = 8
BOUNDARY_REPEATS = 2       # last July rows repeated at the top of the August file
REPEAT_RATE = 0.005        # share of rows written twice inside a file
DCGM = ("GPU_UTIL", "SM_ACTIVE", "FB_USED", "POWER_USAGE")
NODE = ("NODE_CPU_UTILIZATION", "NODE_MEMORY_UTILIZATION")
IB = ("NODE_IB_SEND", "NODE_IB_RECEIVE")
SUBNET = {"seren": "10.140", "kalos": "10.150"}
WRITE = pacsv.WriteOptions(include_header=False, quoting_style="none")


def sizes(scale: float) -> tuple[int, int]:
    """(nodes per cluster, sampling interval in s) for a scale."""
    nodes = max(2, round(4 * scale))
    interval = max(15, 15 * round(3600 / scale / 15))
    return nodes, interval


def _ips(cluster: str, n: int, offset: int = 0) -> list[str]:
    return [f"{SUBNET[cluster]}.{(i + offset) // 250}.{(i + offset) % 250 + 1}" for i in range(n)]


def _presence(rng: np.random.Generator, times: np.ndarray, n_nodes: int) -> np.ndarray:
    """(time, node) mask of reporting nodes: some join late or leave early, a few samples lost."""
    span = END - START
    join = START + (rng.random(n_nodes) < 0.3) * rng.uniform(0, 0.2, n_nodes) * span
    leave = END - (rng.random(n_nodes) < 0.2) * rng.uniform(0, 0.2, n_nodes) * span
    mask = (times[:, None] >= join[None, :]) & (times[:, None] < leave[None, :])
    return mask & (rng.random(mask.shape) > 0.003)


def _busy(rng: np.random.Generator, n_times: int, n_cols: int, interval: int) -> np.ndarray:
    """Load 0..1 per (time, column), constant over 6-hour blocks like jobs holding GPUs."""
    block = max(1, 6 * 3600 // interval)
    n_blocks = -(-n_times // block)
    levels = rng.beta(0.6, 0.5, size=(n_blocks, n_cols))
    return np.repeat(levels, block, axis=0)[:n_times]


def _values(metric: str, cluster: str, busy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    noise = rng.normal(size=busy.shape)
    if metric == "GPU_UTIL":
        return np.clip(np.round(100 * busy + 5 * noise), 0, 100)
    if metric == "SM_ACTIVE":
        return np.round(np.clip(0.8 * busy + 0.05 * noise, 0, 1), 3)
    if metric == "FB_USED":
        return np.clip(np.round(78000 * busy + 500 * noise), 0, 81920)
    if metric == "POWER_USAGE":
        return np.round(60 + 340 * busy + 10 * np.abs(noise), 1)
    if metric == "NODE_CPU_UTILIZATION":
        cpu = np.clip(0.3 * busy + 0.03 * noise, 0, 1)
        if cluster == "kalos":  # the release's Kalos CPU goes above 100 % (up to ~239 %)
            spikes = rng.random(busy.shape) < 0.02
            cpu = np.where(spikes, np.minimum(1.0 + 1.39 * rng.random(busy.shape), 2.39), cpu)
        return np.round(cpu, 3)
    if metric == "NODE_MEMORY_UTILIZATION":
        return np.round(np.clip(0.1 + 0.7 * busy + 0.02 * noise, 0, 1), 3)
    return np.round(np.clip(2.0e10 * busy + 1.0e8 * noise, 0, None))  # IB bytes/s


def _rows_with_repeats(rng: np.random.Generator, n: int) -> np.ndarray:
    """Row order with ~REPEAT_RATE of the rows written twice, the copy right after the original."""
    order = np.arange(n)
    if n == 0:
        return order
    picks = rng.choice(n, size=max(1, int(n * REPEAT_RATE)), replace=False)
    return np.sort(np.concatenate([order, picks]), kind="stable")


def _write_wide(path: Path, names: list[str], times: np.ndarray, values: np.ndarray,
                integer: bool) -> dict:
    """Write `Time` + columns; NaN is an empty cell. Returns its counts for the manifest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [pa.array(times, pa.int64())]
    for j in range(values.shape[1]):
        col = values[:, j]
        mask = np.isnan(col)
        columns.append(pa.array(np.nan_to_num(col).astype(np.int64) if integer else col, mask=mask))
    table = pa.Table.from_arrays(columns, names=[f"c{i}" for i in range(len(columns))])
    with open(path, "wb") as fh:
        fh.write((",".join(["Time", *names]) + "\n").encode())
        pacsv.write_csv(table, fh, WRITE)
    filled = ~np.isnan(values)
    return {"lines": int(len(times)), "cells": int(filled.sum()),
            "empty": int(values.size - filled.sum())}


def _metric(out: Path, cluster: str, metric: str, ips: list[str], times: np.ndarray,
            interval: int, rng: np.random.Generator, split: bool) -> tuple[list[Path], dict]:
    if metric in DCGM:
        names = [f"{ip}-{g}" for ip in ips for g in range(GPUS_PER_NODE)]
        present = np.repeat(_presence(rng, times, len(ips)), GPUS_PER_NODE, axis=1)
    else:
        suffix = "-mlx5_0" if metric in IB else ""
        names = [f"{ip}{suffix}" for ip in ips]
        present = _presence(rng, times, len(ips))
    values = _values(metric, cluster, _busy(rng, len(times), len(names), interval), rng)
    values = np.where(present, values, np.nan)
    if cluster == "seren" and metric == "NODE_MEMORY_UTILIZATION":
        # release quirk: in this window the columns are named '<IP>.1' instead of '<IP>'
        window = (times >= BAD_WINDOW[0]) & (times <= BAD_WINDOW[1])
        wrong = np.where(window[:, None], values, np.nan)
        values = np.where(window[:, None], np.nan, values)
        names, values = names + [f"{ip}.1" for ip in ips], np.hstack([values, wrong])
    integer = metric in ("GPU_UTIL", "FB_USED")
    folder = out / "utilization" / cluster
    parts = [(folder / f"{metric}.csv", np.arange(len(times)))]
    if split:
        july = np.nonzero(times < MONTH_BREAK)[0]
        august = np.nonzero(times >= MONTH_BREAK)[0]
        august = np.concatenate([july[-BOUNDARY_REPEATS:], august])  # overlap across the files
        parts = [(folder / f"{metric}-2023-07.csv", july), (folder / f"{metric}-2023-08.csv", august)]
    paths, counts = [], {"lines": 0, "cells": 0, "empty": 0}
    for path, rows in parts:
        rows = rows[_rows_with_repeats(rng, len(rows))]
        part_values = values[rows]
        keep = ~np.all(np.isnan(part_values), axis=0)  # a month's export lists reporting columns only
        part_names = [n for n, k in zip(names, keep) if k]
        written = _write_wide(path, part_names, times[rows], part_values[:, keep], integer)
        counts = {k: counts[k] + written[k] for k in counts}
        paths.append(path)
    # every time is written at least once and copies repeat the same cells, so the distinct
    # cells are the non-empty cells of the matrix before splitting and repeating
    distinct = int((~np.isnan(values)).sum())
    counts["distinct_cells"] = distinct
    counts["duplicate_cells"] = counts["cells"] - distinct
    return paths, counts


def _power(out: Path, ips: list[str], interval: int, rng: np.random.Generator) -> tuple[list[Path], dict]:
    """IPMI files: one line per (Time, server); type-B servers (odd GPU_AB rows) lack MEM_Power."""
    times = np.arange(START, END, interval * 4)
    third = max(1, len(ips) // 3)
    groups = {"GPU_AB": ips[third:], "GPU_C": ips[:third],
              "CPU_D": _ips("seren", max(2, len(ips) // 4), offset=2000)}
    folder = out / "utilization" / "ipmi"
    folder.mkdir(parents=True, exist_ok=True)
    paths, manifest = [], {}
    for kind, servers in groups.items():
        n = len(times) * len(servers)
        t = np.repeat(times, len(servers))
        node = np.tile(np.array(servers), len(times))
        busy = rng.beta(0.6, 0.5, n)
        readings = {"CPU_Power": np.round(150 + 250 * rng.random(n), 1),
                    "MEM_Power": np.round(60 + 60 * rng.random(n), 1)}
        if kind != "CPU_D":  # CPU servers have no GPU reading
            readings["GPU_Power"] = np.round(400 + 2400 * busy, 1)
        if kind == "GPU_AB":  # type-B servers (every other one) report no MEM_Power
            readings["MEM_Power"][np.tile(np.arange(len(servers)) % 2 == 1, len(times))] = np.nan
        base = sum(np.nan_to_num(v) for v in readings.values())
        readings["Sys_Total_Power"] = np.round(base + 300 + 50 * rng.random(n), 1)
        mem = readings["MEM_Power"]
        rows = _rows_with_repeats(rng, n)
        stamps = pc.strftime(pa.array(t[rows] + 8 * 3600, pa.timestamp("s")),
                             format="%Y-%m-%d %H:%M:%S")  # naive Asia/Shanghai, as pandas wrote them
        cols = [stamps, pa.array(node[rows])] + [
            pa.array(v[rows], mask=np.isnan(v[rows])) for v in readings.values()]
        path = folder / f"{kind}_Power.csv"
        with open(path, "wb") as fh:
            fh.write((",".join(["Time", "IP", *readings]) + "\n").encode())
            pacsv.write_csv(pa.Table.from_arrays(cols, names=["t", "ip", *readings]), fh, WRITE)
        filled = sum(int((~np.isnan(v[rows])).sum()) for v in readings.values())
        distinct = sum(int((~np.isnan(v)).sum()) for v in readings.values())
        manifest[f"seren/{kind}"] = {"lines": int(len(rows)), "cells": filled, "distinct_cells": distinct,
                                     "duplicate_cells": filled - distinct,
                                     "mem_power_cells": int((~np.isnan(mem)).sum())}
        paths.append(path)
    return paths, manifest


def generate(out: Path, scale: float, seed: int, nodes: int | None = None,
             interval: int | None = None) -> list[Path]:
    """Write the utilization files and utilization/manifest.json under `out`. `nodes` (Seren's
    node count; Kalos has half) and `interval` (s) override what `scale` sets, e.g. the release's
    width: 250 Seren nodes give DCGM files of 2,000 GPU columns."""
    out = Path(out)
    rng = np.random.default_rng(seed)
    nodes, interval = nodes or sizes(scale)[0], interval or sizes(scale)[1]
    times = np.arange(START, END, interval, dtype=np.int64)
    paths: list[Path] = []
    metrics: dict[str, dict] = {}
    for cluster, n in (("seren", nodes), ("kalos", max(2, nodes // 2))):
        ips = _ips(cluster, n)
        for metric in (*DCGM, *NODE, *IB):
            written, counts = _metric(out, cluster, metric, ips, times, interval, rng,
                                      split=metric not in IB)
            paths += written
            metrics[f"{cluster}/{metric}"] = counts
        if cluster == "seren":
            written, power = _power(out, ips, interval, rng)
            paths += written
    manifest = {
        "seed": seed, "scale": scale, "nodes": nodes, "interval_s": interval,
        "period_utc": [START, END],
        "bronze.acme_utilization": {"metrics": metrics, **_totals(metrics)},
        "bronze.acme_power": {"files": power, **_totals(power)},
    }
    path = out / "utilization" / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return [*paths, path]


def _totals(parts: dict[str, dict]) -> dict[str, int]:
    keys = ("cells", "distinct_cells", "duplicate_cells")
    return {k: sum(p[k] for p in parts.values()) for k in keys}
