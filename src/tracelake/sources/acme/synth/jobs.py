"""Synthetic AcmeTrace job CSVs (trace_seren.csv, trace_kalos.csv) in the release's formats,
calibrated to the published figures, plus acme_ground_truth.json with what was drawn.

Formats and quirks (docs/formats/acmetrace.md §1.2): Seren 13 columns, integer ids, +08:00
timestamps, integer queue; Kalos 17 columns, 16-char ids, +00:00 timestamps, float queue,
fail_time set on failed jobs and stop_time on cancelled ones (empty otherwise, i.e. mostly),
`duration` = end − submit as in the README's Kalos example, 3 RUNNING rows with no end. Seren has
a PREEMPTED share. Calibration at scale 1 (§1.3 and the paper): Seren 818,327 jobs / 450,590 GPU
jobs, Kalos 62,413 / 19,907; GPU-job states 46.1/33.9/10.2/9.7 % completed/failed/cancelled/
preempted (Seren) and 54.1/39.7/6.2 % (Kalos); Kalos all-job states as reported; GPU-job types
as decoded from the paper's treemap; Pretrain GPU-time share 69.5 % / 95.5 % (Pretrain run times
are rescaled after drawing to hit it); median run time about 2 min, median GPU count 1, max 1,024.
Everything not published (CPU-job mix, per-type GPU counts and run times, queueing) is an
assumption stated in the tables below. Counts are allocated exactly (largest remainder), every
other value is drawn with numpy from one seeded Generator.

The ground truth describes run time (end − start) and queue (start − submit), which is what
silver.jobs holds; the released Kalos `duration` column is end − submit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracelake.schema import load_schema
from tracelake.sources.acme import layout as jobs

GROUND_TRUTH = "acme_ground_truth.json"
SEREN_HEADER = ",".join(jobs.SEREN_HEADER)
KALOS_HEADER = ",".join(load_schema(jobs.TABLE).raw_header)  # the schema's raw header is Kalos's
GPUS_PER_NODE = 8
MAX_RUN_S = 45 * 86_400  # longest run time drawn before the Pretrain rescale
STATE_RUN_FACTOR = {"COMPLETED": 1.0, "FAILED": 0.5, "CANCELLED": 0.8, "TIMEOUT": 4.0,
                    "NODE_FAIL": 2.0, "PREEMPTED": 1.5, "RUNNING": 1.0}
# per type: GPU counts and their weights (GPU jobs), run-time lognormal median (s) and sigma
GPU_CHOICES = {
    "Eval": ([1, 2, 4, 8], [0.78, 0.06, 0.06, 0.10]),
    "SFT": ([1, 2, 4, 8, 16, 32, 64], [0.30, 0.05, 0.10, 0.30, 0.12, 0.08, 0.05]),
    "Other": ([1, 2, 4, 8, 16], [0.60, 0.10, 0.10, 0.15, 0.05]),
    "Debug": ([1, 2, 4, 8, 16, 32], [0.50, 0.10, 0.10, 0.20, 0.05, 0.05]),
    "MLLM": ([1, 8, 16, 32, 64, 128], [0.30, 0.30, 0.15, 0.10, 0.10, 0.05]),
    "Pretrain": ([8, 16, 32, 64, 128, 256, 512, 1024], [0.05, 0.10, 0.15, 0.25, 0.20, 0.13, 0.08, 0.04]),
}
RUN_TIME = {"Eval": (140, 1.6), "SFT": (900, 2.0), "Other": (200, 2.2), "Debug": (240, 1.8),
            "MLLM": (1200, 2.0), "Pretrain": (10800, 1.3), "cpu": (110, 2.2)}
CPU_CHOICES = [1, 2, 4, 8, 16, 32, 64]
# how much more (or less) often than average a GPU job type ends in a state (not published)
STATE_TILT = {"Pretrain": {"COMPLETED": 0.6, "FAILED": 1.5, "CANCELLED": 1.8},
              "Debug": {"FAILED": 1.6, "CANCELLED": 1.4}, "Eval": {"FAILED": 0.9},
              "SFT": {"CANCELLED": 1.3}, "MLLM": {"FAILED": 1.2}}
QUEUE = (8.0, 2.0, 0.25)  # lognormal median (s), sigma; share of jobs that start at once


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    offset_hours: int
    period: tuple[str, str]  # local wall time, [start, end)
    jobs: int
    gpu_states: dict[str, int]  # GPU-job counts per state at scale 1
    cpu_states: dict[str, int]
    gpu_types: dict[str, float]  # GPU-job type shares
    cpu_types: dict[str, float]
    pretrain_gpu_time_share: float
    cpus_per_gpu: int
    first_id: int = 0


SEREN = ClusterSpec(
    name="seren", offset_hours=8, period=("2023-03-01", "2023-09-01"), jobs=818_327,
    gpu_states={"COMPLETED": 207_722, "FAILED": 152_750, "CANCELLED": 45_960, "PREEMPTED": 43_707,
                "TIMEOUT": 300, "NODE_FAIL": 151},
    # not published: an assumed mix that keeps about 40 % of all jobs failed
    cpu_states={"COMPLETED": 191_223, "FAILED": 161_804, "CANCELLED": 12_871, "TIMEOUT": 1_103,
                "NODE_FAIL": 736},
    gpu_types={"Eval": 64.9, "SFT": 14.9, "Other": 14.6, "Pretrain": 2.9, "Debug": 1.9, "MLLM": 0.9},
    cpu_types={"Other": 70.0, "Eval": 20.0, "Debug": 10.0},
    pretrain_gpu_time_share=0.695, cpus_per_gpu=16, first_id=5_000_000,
)
KALOS = ClusterSpec(
    name="kalos", offset_hours=0, period=("2023-05-01", "2023-09-01"), jobs=62_413,
    gpu_states={"COMPLETED": 10_770, "FAILED": 7_903, "CANCELLED": 1_234},
    # all-job counts reported (47,311 / 13,836 / 1,263 / 3 RUNNING) minus the GPU jobs
    cpu_states={"COMPLETED": 36_541, "FAILED": 5_933, "CANCELLED": 29, "RUNNING": 3},
    gpu_types={"Eval": 92.8, "Pretrain": 3.2, "Debug": 2.5, "Other": 1.5},
    cpu_types={"Other": 60.0, "Eval": 35.0, "Debug": 5.0},
    pretrain_gpu_time_share=0.955, cpus_per_gpu=15,
)
CLUSTERS = (SEREN, KALOS)


def allocate(total: int, weights: dict[str, float], at_least_one: bool = False) -> dict[str, int]:
    """Split `total` into integer counts proportional to weights (largest remainder; exact
    when the weights are the scale-1 counts). With at_least_one, a key with weight > 0 that got
    nothing takes one row from the largest count, so rare states stay visible at small scales."""
    keys = [k for k, w in weights.items() if w > 0]
    w = np.array([weights[k] for k in keys], dtype=float)
    exact = w / w.sum() * total
    counts = np.floor(exact + 1e-9).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - int(counts.sum())]] += 1
    if at_least_one and total >= len(keys):
        for i in np.flatnonzero(counts == 0):
            counts[np.argmax(counts)] -= 1
            counts[i] = 1
    return {k: int(c) for k, c in zip(keys, counts)}


def _scaled_states(spec: ClusterSpec, scale: float) -> tuple[dict[str, int], dict[str, int]]:
    total = max(2, round(spec.jobs * scale))
    gpu_total = sum(spec.gpu_states.values())
    gpu = max(1, round(gpu_total * scale))
    gpu = min(gpu, total - 1)
    return (allocate(gpu, spec.gpu_states, at_least_one=True),
            allocate(total - gpu, spec.cpu_states, at_least_one=True))


def _joint(states: dict[str, int], types: dict[str, float]) -> dict[str, dict[str, float]]:
    """Type × state weights with the given margins and STATE_TILT's interactions (iterative
    proportional fitting), so job types differ in how often they fail."""
    t_keys, s_keys = list(types), list(states)
    m = np.array([[types[t] * max(states[s], 1e-9) * STATE_TILT.get(t, {}).get(s, 1.0) for s in s_keys]
                  for t in t_keys])
    type_target = np.array([types[t] for t in t_keys]) / sum(types.values()) * sum(states.values())
    state_target = np.array([states[s] for s in s_keys], dtype=float)
    for _ in range(100):
        m *= (type_target / m.sum(axis=1))[:, None]
        m *= (state_target / np.maximum(m.sum(axis=0), 1e-12))[None, :]
    return {s: {t: float(m[i, j]) for i, t in enumerate(t_keys)} for j, s in enumerate(s_keys)}


def _cells(spec: ClusterSpec, scale: float) -> list[tuple[bool, str, str, int]]:
    """(is GPU job, type, state, rows): state counts exact, types split per state."""
    gpu_states, cpu_states = _scaled_states(spec, scale)
    cells = []
    for is_gpu, states, types in ((True, gpu_states, spec.gpu_types), (False, cpu_states, spec.cpu_types)):
        weights = _joint(states, types) if is_gpu else {s: types for s in states}
        for state, n in states.items():
            for job_type, k in allocate(n, weights[state]).items():
                if k:
                    cells.append((is_gpu, job_type, state, k))
    return cells


def _lognormal(rng: np.random.Generator, median: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    return median * np.exp(sigma * rng.standard_normal(len(median)))


def _epoch(day: str) -> int:
    return int(np.datetime64(day, "s").astype(np.int64))


def draw_cluster(spec: ClusterSpec, scale: float, rng: np.random.Generator) -> pd.DataFrame:
    """One row per job with the true values (UTC epoch seconds, run time, queue)."""
    cells = _cells(spec, scale)
    sizes = [c[3] for c in cells]
    is_gpu = np.repeat([c[0] for c in cells], sizes)
    job_type = np.repeat(np.array([c[1] for c in cells], dtype=object), sizes)
    state = np.repeat(np.array([c[2] for c in cells], dtype=object), sizes)
    n = len(state)

    gpu_num = np.zeros(n, dtype=np.int64)
    for t, (values, weights) in GPU_CHOICES.items():
        mask = is_gpu & (job_type == t)
        p = np.array(weights) / np.sum(weights)
        gpu_num[mask] = rng.choice(values, size=int(mask.sum()), p=p)
    pretrain = np.flatnonzero(is_gpu & (job_type == "Pretrain"))
    if len(pretrain):
        gpu_num[pretrain[0]] = max(GPU_CHOICES["Pretrain"][0])  # the paper's largest job

    kind = np.where(is_gpu, job_type, "cpu")
    median = np.array([RUN_TIME[k][0] for k in kind], dtype=float)
    sigma = np.array([RUN_TIME[k][1] for k in kind], dtype=float)
    median *= np.array([STATE_RUN_FACTOR[s] for s in state])
    run = np.clip(np.rint(_lognormal(rng, median, sigma)), 1, MAX_RUN_S).astype(np.int64)
    run = _calibrate_pretrain(run, gpu_num, pretrain, spec.pretrain_gpu_time_share)

    q_med, q_sigma, q_zero = QUEUE
    queue = np.rint(_lognormal(rng, np.full(n, q_med), np.full(n, q_sigma))).astype(np.int64)
    queue[rng.random(n) < q_zero] = 0
    queue = np.minimum(queue, 3 * 86_400)

    offset = spec.offset_hours * 3600
    start, end = _epoch(spec.period[0]) - offset, _epoch(spec.period[1]) - offset
    submit = rng.integers(start, end, size=n)
    running = state == "RUNNING"
    submit[running] = end - 3600 - rng.integers(0, 86_400, size=int(running.sum()))  # still running at the end

    frame = pd.DataFrame({
        "is_gpu": is_gpu, "type": job_type, "state": state, "gpu_num": gpu_num,
        "run_s": run, "queue_s": queue, "submit": submit, "running": running,
    })
    frame = frame.sort_values("submit", kind="stable").reset_index(drop=True)
    frame["start"] = frame["submit"] + frame["queue_s"]
    frame["end"] = frame["start"] + frame["run_s"]
    frame["node_num"] = np.where(frame["is_gpu"], -(-frame["gpu_num"] // GPUS_PER_NODE), 1)
    cpu_only = rng.choice(CPU_CHOICES, size=n)
    frame["cpu_num"] = np.where(frame["is_gpu"], frame["gpu_num"] * spec.cpus_per_gpu, cpu_only)
    return frame


def _calibrate_pretrain(run: np.ndarray, gpu_num: np.ndarray, pretrain: np.ndarray, share: float) -> np.ndarray:
    """Rescale Pretrain run times so Pretrain holds `share` of the GPU time."""
    if not len(pretrain) or not 0 < share < 1:
        return run
    gpu_time = run.astype(float) * gpu_num
    mine = gpu_time[pretrain].sum()
    others = gpu_time.sum() - mine
    if mine <= 0 or others <= 0:
        return run
    factor = share / (1 - share) * others / mine
    run = run.copy()
    run[pretrain] = np.maximum(1, np.rint(run[pretrain] * factor)).astype(np.int64)
    return run


# --- writing in the release formats

def _timestamps(epoch: np.ndarray, offset_hours: int) -> np.ndarray:
    local = (epoch + offset_hours * 3600).astype("datetime64[s]")
    text = np.char.replace(np.datetime_as_string(local, unit="s"), "T", " ")
    return np.char.add(text, f"+{offset_hours:02d}:00").astype(object)


def _blank_where(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = values.astype(object)
    out[mask] = ""
    return out


def _users(rng: np.random.Generator, n: int, cluster: str) -> np.ndarray:
    if cluster == "seren":
        pool = np.array([f"u{i}" for i in rng.choice(np.arange(1000, 10000), size=400, replace=False)])
    else:
        pool = np.array([f"u{i:03x}" for i in rng.choice(np.arange(0x100, 0x1000), size=150, replace=False)])
    weights = rng.pareto(1.2, size=len(pool)) + 0.05
    return pool[rng.choice(len(pool), size=n, p=weights / weights.sum())]


def _kalos_ids(rng: np.random.Generator, n: int) -> np.ndarray:
    alphabet = np.array(list("0123456789abcdefghijklmnopqrstuvwxyz"))
    ids = np.empty(0, dtype="<U16")
    while len(ids) < n:  # redraw the (astronomically rare) duplicates
        tail = alphabet[rng.integers(0, 36, size=(n - len(ids), 13))]
        fresh = np.char.add("dlc", np.ascontiguousarray(tail).view("<U13")[:, 0])
        ids = np.unique(np.concatenate([ids, fresh]))
    return rng.permutation(ids)[:n]


def _release_frame(frame: pd.DataFrame, spec: ClusterSpec, rng: np.random.Generator) -> pd.DataFrame:
    n = len(frame)
    running = frame["running"].to_numpy()
    state = frame["state"].to_numpy()
    ts = lambda col: _timestamps(frame[col].to_numpy(), spec.offset_hours)  # noqa: E731
    end = _blank_where(ts("end"), running)
    if spec.name == "seren":
        released = frame["run_s"].to_numpy()  # end − start, as the README defines it
        ids = (spec.first_id + np.cumsum(rng.integers(1, 4, size=n))).astype(str)
    else:
        released = (frame["end"] - frame["submit"]).to_numpy()  # end − submit, like the README row
        ids = _kalos_ids(rng, n)
    duration = pd.array(np.where(running, 0, released), dtype="Int64")
    duration[running] = pd.NA
    gpu_time = np.where(running, np.nan, released.astype(float) * frame["gpu_num"].to_numpy())
    out = {
        "job_id": ids, "user": _users(rng, n, spec.name), "node_num": frame["node_num"],
        "gpu_num": frame["gpu_num"], "cpu_num": frame["cpu_num"],
    }
    if spec.name == "kalos":
        gpu = frame["is_gpu"].to_numpy()
        pods = np.minimum(frame["gpu_num"].to_numpy(), GPUS_PER_NODE)
        out["mem_per_pod_GB"] = np.where(gpu, pods * 125, rng.choice([8, 16, 32, 64], size=n))
        out["shared_mem_per_pod"] = np.where(gpu, pods * 12.5, rng.choice([0.0, 8.0], size=n))
    out |= {"type": frame["type"], "state": state, "submit_time": ts("submit"),
            "start_time": ts("start"), "end_time": end}
    if spec.name == "kalos":
        out["fail_time"] = _blank_where(end, state != "FAILED")
        out["stop_time"] = _blank_where(end, state != "CANCELLED")
    queue = frame["queue_s"].to_numpy()
    out |= {"duration": duration, "queue": queue.astype(float) if spec.name == "kalos" else queue,
            "gpu_time": gpu_time}
    return pd.DataFrame(out)


# --- ground truth: what silver.jobs / the gold tables must show

def _stats(values: np.ndarray) -> dict[str, float | None]:
    values = values[~np.isnan(values)]
    if not len(values):
        return {"mean": None, "median": None, "p90": None}
    return {"mean": float(values.mean()), "median": float(np.percentile(values, 50)),
            "p90": float(np.percentile(values, 90))}


def _buckets(gpu_num: np.ndarray) -> dict[str, int]:
    edges = {"1": (1, 1), "2_8": (2, 8), "9_64": (9, 64), "65_256": (65, 256), "257_plus": (257, 1 << 30)}
    return {k: int(((gpu_num >= lo) & (gpu_num <= hi)).sum()) for k, (lo, hi) in edges.items()}


def ground_truth(frame: pd.DataFrame) -> dict:
    run = np.where(frame["running"], np.nan, frame["run_s"].astype(float))
    queue = frame["queue_s"].to_numpy(dtype=float)
    gpu_num = frame["gpu_num"].to_numpy()
    gpu_hours = np.nan_to_num(run * gpu_num / 3600.0)
    total_hours = gpu_hours.sum()
    is_gpu = gpu_num > 0
    groups = []
    for (job_type, state), idx in frame.groupby(["type", "state"], sort=True).indices.items():
        d, q = _stats(run[idx]), _stats(queue[idx])
        groups.append({
            "job_type": job_type, "final_state": state, "jobs": int(len(idx)),
            "gpu_jobs": int(is_gpu[idx].sum()), "gpu_hours": float(gpu_hours[idx].sum()),
            "gpu_hour_share": float(gpu_hours[idx].sum() / total_hours),
            "duration_mean_s": d["mean"], "duration_median_s": d["median"], "duration_p90_s": d["p90"],
            "queue_mean_s": q["mean"], "queue_median_s": q["median"], "queue_p90_s": q["p90"],
            "gpu_buckets": _buckets(gpu_num[idx]),
        })
    gpu_run = run[is_gpu]
    by_type = frame[is_gpu].assign(h=gpu_hours[is_gpu]).groupby("type")["h"].sum()
    gpu_states = frame[is_gpu]["state"].value_counts()
    counts = pd.DataFrame({"g": gpu_num[is_gpu], "h": gpu_hours[is_gpu]}).groupby("g")["h"].agg(["size", "sum"])
    g = _stats(gpu_run)
    return {
        "jobs": int(len(frame)), "gpu_jobs": int(is_gpu.sum()), "gpu_hours": float(total_hours),
        "jobs_by_state": {k: int(v) for k, v in frame["state"].value_counts().sort_index().items()},
        "gpu_jobs_by_state": {k: int(v) for k, v in gpu_states.sort_index().items()},
        "gpu_jobs_by_type": {k: int(v) for k, v in frame[is_gpu]["type"].value_counts().sort_index().items()},
        "gpu_hour_share_by_type": {k: float(v / total_hours) for k, v in by_type.sort_index().items()},
        "failed_share_gpu_jobs": float((frame[is_gpu]["state"] == "FAILED").mean()),
        "median_duration_s": _stats(run)["median"],
        "gpu_job_duration_mean_s": g["mean"], "gpu_job_duration_median_s": g["median"],
        "gpu_job_duration_p90_s": g["p90"],
        "gpu_num_median": float(np.median(gpu_num[is_gpu])), "gpu_num_max": int(gpu_num.max()),
        "gpu_count": {str(k): {"gpu_jobs": int(r["size"]), "gpu_hours": float(r["sum"])} for k, r in counts.iterrows()},
        "groups": groups,
    }


def generate(out: Path, scale: float, seed: int) -> list[Path]:
    """Write trace_seren.csv, trace_kalos.csv and acme_ground_truth.json into `out`."""
    rng = np.random.default_rng(seed)
    truth = {"scale": scale, "seed": seed,
             "definitions": {"duration": "run time, end - start (the released Kalos duration column is end - submit)",
                             "queue": "start - submit", "gpu_hours": "duration x gpu_num / 3600",
                             "percentiles": "linear interpolation (numpy default)",
                             "gpu_job": "gpu_num > 0"},
             "clusters": {}}
    written = []
    for spec in CLUSTERS:
        frame = draw_cluster(spec, scale, rng)
        path = out / f"trace_{spec.name}.csv"
        _release_frame(frame, spec, rng).to_csv(path, index=False, lineterminator="\n", na_rep="")
        written.append(path)
        truth["clusters"][spec.name] = ground_truth(frame)
    truth_path = out / GROUND_TRUTH
    truth_path.write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return written + [truth_path]
