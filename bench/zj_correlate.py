"""Benchmark the Zhejiang cross-layer correlation on the local profile.

Generates one release-shaped folder: one task of 4 hosts (32 ranks) whose log covers a whole day,
H hours (default 4) of per-port counters for ALL 24 switches (20 GPU leafs x 95 ports + 4 storage
leafs x 65 = 2,160 files, about 11.3 M rows an hour, as the real release), the hourly
flow/nic/link/port CSVs and the ground truth. The world generator writes counters only for the
ports its tasks use; here the port writer is asked for every port, with the world's load model.

Each phase runs in its own process, so its peak RSS is its own (the larger of the phase's
process and the engine it started: the local profile's Sail server runs in a child process,
which the phase waits for when it stops the engine):
  ingest     tracelake's zhejiang ingest into ONE lake, hour by hour: the first run takes the
             workbook, the task and the first traffic hour; each later run is `--hours H`, as
             the hourly schedule runs it (traffic only; the correlation of the task is updated
             incrementally for the hours that changed);
  correlate  after 1, 2, 4 hours: silver.zj_task_paths, gold.zj_iteration_network and
             gold.zj_task_network_summary for the task, computed from that one lake, reading
             only the task's hours (hour_cst partitions) of the network tables, written to
             Parquet: the correlation step alone, as a whole-task rebuild.
  interference  at the same points, alternating with correlate (C I C I): the whole lake's
             gold.zj_iteration_interference (from gold.zj_iteration_network, the paths, ranks,
             per-iteration evidence and every flow hour of the lake) and gold.zj_task_interference,
             written to Parquet: the interference step alone, as a whole-lake rebuild.
Prints wall time and peak memory, recall/precision of the suspects against the ground truth, and
each interference run's wall beside the correlation's run before it (no timed assert).

    python bench/zj_correlate.py [--hours 1 2 4] [--tasks 1] [--rounds 2] [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

from peak import peak_rss_mb

SEED = 3
DAY_S = 24 * 3600


def _all_ports() -> list[tuple[str, str]]:
    from tracelake.sources.zhejiang.synth.cluster import LEAF_RACKS, ST_LEAFS, leaf_name, switch_folder

    ports = []
    for n in range(1, len(LEAF_RACKS) + 1):
        folder = switch_folder(leaf_name(n))
        ports += [(folder, "M-GigabitEthernet0/0/0")]
        ports += [(folder, f"TwoHundredGigE1/0/{p}:{s}") for p in range(1, 31) for s in (1, 2)]
        ports += [(folder, f"FourHundredGigE1/0/{p}") for p in range(31, 65)]
    for device in ST_LEAFS:
        folder = switch_folder(device)
        ports += [(folder, "M-GigabitEthernet0/0/0")] + [(folder, f"FourHundredGigE1/0/{p}") for p in range(1, 65)]
    return ports


def _every_port_writer():
    """generate_ports asked for every port of every switch, with the world's load model."""
    import importlib

    mod = importlib.import_module("tracelake.sources.zhejiang.synth.ports")
    everything = _all_ports()

    def write_port_hour(root, hour, ports, load, seed):
        return mod.write_port_hour(root, hour, sorted(set(everything) | set(ports)), load, seed)

    return types.SimpleNamespace(write_port_hour=write_port_hour)


def _whole_day(original):
    """write_tasks that first continues every task at its base pace until a day after its start."""
    from tracelake.sources.zhejiang.synth.world import Iteration

    def write_tasks(world, out, seed):
        for task in world.tasks:
            t, i = task.iterations[-1].end, task.iterations[-1].index
            while t < task.start + DAY_S:
                i += 1
                comm = t + task.base_iter_s * (1 - task.comm_frac)
                end = comm + task.base_iter_s * task.comm_frac
                pause = task.base_iter_s * 0.75 if i % task.save_steps == 1 else 0.0  # checkpoint
                task.iterations.append(Iteration(i, round(t, 3), round(end + pause, 3), round(comm, 3), round(end, 3),
                                                 ["checkpoint"] if pause else []))
                t = end + pause
        return original(world, out, seed)

    return write_tasks


def generate_world(raw: Path, hours: int, tasks: int = 1) -> None:
    from tracelake.run.registry import generate
    from tracelake.sources.zhejiang import synth as zj

    with contextlib.ExitStack() as stack:
        saved = zj._port_writer, zj.write_tasks
        stack.callback(lambda: (setattr(zj, "_port_writer", saved[0]), setattr(zj, "write_tasks", saved[1])))
        zj._port_writer, zj.write_tasks = _every_port_writer, _whole_day(zj.write_tasks)
        generate("zhejiang", raw, scale=1.0, seed=SEED, hours=hours, tasks=tasks)


# ---------------------------------------------------------------- the measured phases



def _engine(lake: Path):
    from tracelake.config import load_config
    from tracelake.engine import start_engine

    config = load_config(profile="local", overrides={"lake_root": str(lake)},
                         conf_pairs=["spark_conf.spark.sql.shuffle.partitions=2"])
    return start_engine(config), config


def written_timed(spark, out: Path, timings: dict):
    """A step's frame written to Parquet under `out` once, its write timed into `timings`, read back."""
    def timed(name: str, frame):
        t = time.perf_counter()
        frame.write.mode("overwrite").parquet(str(out / name))
        timings[name] = time.perf_counter() - t
        back = spark.read.parquet(str(out / name))
        return back if back.columns else spark.createDataFrame([], frame.schema)  # Sail writes no file for no rows
    return timed


def phase_ingest(raw: Path, lake: Path, hour: str | None) -> dict:
    from tracelake.run.pipeline import run_ingest

    engine, config = _engine(lake)
    steps: dict[str, float] = {}

    @contextlib.contextmanager
    def step(label: str):
        t = time.perf_counter()
        yield
        steps[label] = time.perf_counter() - t

    t = time.perf_counter()
    stats = run_ingest(engine, config, "zhejiang", str(raw), step, hours=hour)
    wall = time.perf_counter() - t
    engine.stop()
    return {"wall_s": wall, "peak_mb": peak_rss_mb(), "steps": steps, "rows": {s.table: s.rows_read for s in stats}}


def phase_correlate(lake: Path, out: Path) -> dict:
    """The correlation tables from the lake (paths from the task tables, the gold table from
    the paths and the network tables, the summary from the gold table), each computed and
    written to Parquet once: the correlation step alone, without the quality gate."""
    from pyspark.sql import functions as F

    from tracelake.delta.catalog import read_tables
    from tracelake.sources.zhejiang.correlate import FLOW, LINK, MINUTE, RATES, task_hours
    from tracelake.sources.zhejiang.transforms.correlate import iteration_network, task_network_summary, task_paths

    engine, config = _engine(lake)
    spark, timings = engine.spark, {}
    t0 = time.perf_counter()

    timed = written_timed(spark, out, timings)

    ranks, iterations, *network = read_tables(spark, config, "silver.zj_task_ranks", "silver.zj_task_iterations",
                                              RATES, MINUTE, FLOW, LINK)
    span = iterations.agg(F.min("start_ts"), F.max("end_ts")).first()
    hours = sorted(task_hours(span[0], span[1]))  # the task's hours only: partition pruning
    network = [frame.filter(F.col("hour_cst").isin(hours)) for frame in network]
    paths = timed("paths", task_paths(ranks, iterations))
    gold = timed("iteration_network", iteration_network(paths, iterations, *network))
    summary = timed("summary", task_network_summary(gold))
    wall = time.perf_counter() - t0
    rows = {"paths": paths.count(), "iteration_network": gold.count(), "summary": summary.count(),
            "with_data": gold.filter("coverage > 0").count(),
            "counter_rows": network[0].count()}
    engine.stop()
    return {"wall_s": wall, "peak_mb": peak_rss_mb(), "steps": timings, "rows": rows}


def phase_interference(lake: Path, out: Path) -> dict:
    """gold.zj_iteration_interference of the whole lake from the tables the hourly ingests
    left (the verdicts, paths, ranks, per-iteration evidence and every flow hour), then
    gold.zj_task_interference from it, each written to Parquet once: the interference step
    alone, without the quality gate, as a build from scratch."""
    from tracelake.delta.catalog import read_tables
    from tracelake.sources.zhejiang.interference import OPTIONAL, REQUIRED
    from tracelake.sources.zhejiang.transforms.interference import interference, task_interference

    engine, config = _engine(lake)
    spark, timings = engine.spark, {}
    t0 = time.perf_counter()

    timed = written_timed(spark, out, timings)

    frames = read_tables(spark, config, *REQUIRED, *OPTIONAL)
    rows = timed("iteration_interference", interference(*frames))
    per_task = timed("task_interference", task_interference(rows))
    wall = time.perf_counter() - t0
    counts = {"rows": rows.count(), "ports": rows.select("task_id", "iteration", "device_name", "port_name").distinct().count(),
              "parties": rows.select("party").distinct().count(), "task_rows": per_task.count(),
              "flow_rows": frames[-1].count()}
    engine.stop()
    return {"wall_s": wall, "peak_mb": peak_rss_mb(), "steps": timings, "rows": counts}


def score(raw: Path, gold_parquet: Path, hours: int) -> str:
    """Recall over the episodes inside the first `hours` hours, precision over every suspect."""
    import pandas as pd

    truth = json.loads((raw / "ground_truth.json").read_text(encoding="utf-8"))
    gold = pd.read_parquet(gold_parquet).set_index(["task_id", "iteration"])
    window_end = pd.Timestamp(truth["window_utc"][0]) + pd.Timedelta(hours=hours)
    inside = [e for e in truth["episodes"] if pd.Timestamp(e["end_utc"]) <= window_end]
    episodes = {e["id"]: e for e in truth["episodes"]}
    causes = {(t["task_id"], it["iteration"]): it["causes"] for t in truth["tasks"] for it in t["iterations"]}

    records = {task: sorted(its) for task, its in gold.reset_index().groupby("task_id")["iteration"]}

    def blamed(task_id: str, step: int) -> tuple[str, str]:
        """The suspect of the log record covering `step` (a Megatron log's record covers several)."""
        its = records[task_id]
        at = bisect.bisect_left(its, step)
        if at == len(its):
            return None, None
        row = gold.loc[(task_id, its[at])]
        return row["suspect_device_name"], row["suspect_port_name"]

    found = sum(any(blamed(h["task_id"], i) == (e["switch"], e["port"])
                    for h in e["slowed_iterations"] for i in h["iterations"]) for e in inside)
    flagged = gold[gold["suspect_reason"] != "none"]
    def record_causes(task_id: str, iteration: int) -> set[str]:
        """The causes of every step a record covers: those after the task's record before it."""
        its = records[task_id]
        at = bisect.bisect_left(its, iteration)
        first = its[at - 1] + 1 if at > 0 else 1
        return {c for step in range(first, iteration + 1) for c in causes.get((task_id, step), [])}

    wrong = sum((r.suspect_device_name, r.suspect_port_name) not in {(episodes[c]["switch"], episodes[c]["port"])
                                                           for c in record_causes(*k) if c in episodes}
                for k, r in flagged.iterrows())
    return f"recall {found}/{len(inside)}, precision {len(flagged) - wrong}/{len(flagged)}"


# ---------------------------------------------------------------- driver

def _run_phase(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"phase {args[1]} failed with exit code {done.returncode} (-9: killed, e.g. out of "
                         f"memory):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_part(raw: Path, part: Path) -> tuple[Path, list[str]]:
    """A raw folder (links) with the workbook, the task and the first traffic hour, for the first
    full ingest; and every traffic hour of the release, in order."""
    hours = sorted(p.name for p in (raw / "trafficinfo").iterdir() if p.is_dir())
    (part / "trafficinfo").mkdir(parents=True)
    (part / "trafficinfo" / hours[0]).symlink_to(raw / "trafficinfo" / hours[0])
    for name in ("cluster_2000_A100.xlsx", "taskinfo"):
        (part / name).symlink_to(raw / name)
    return part, hours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--tasks", type=int, default=1, help="tasks in the world (3 or more: interference episodes)")
    parser.add_argument("--rounds", type=int, default=2, help="correlate/interference pairs at each point, alternated")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--phase", choices=["ingest", "correlate", "interference"], help=argparse.SUPPRESS)
    parser.add_argument("--hour", help=argparse.SUPPRESS)
    parser.add_argument("--raw", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--lake", type=Path, nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(args.raw, args.lake[0], args.hour)))
        return
    if args.phase == "correlate":
        print(json.dumps(phase_correlate(args.lake[0], args.lake[0] / "_bench")))
        return
    if args.phase == "interference":
        print(json.dumps(phase_interference(args.lake[0], args.lake[0] / "_bench")))
        return

    work = args.work or Path(tempfile.mkdtemp(prefix="zj-correlate-bench-"))
    shutil.rmtree(work / "world", ignore_errors=True)
    raw = work / "world" / "raw"
    t = time.perf_counter()
    generate_world(raw, max(args.hours), args.tasks)
    files = sum(1 for _ in (raw / "trafficinfo").glob("*/*/*.csv"))
    who = "one 4-host task" if args.tasks == 1 else f"{args.tasks} tasks"
    print(f"zj correlate bench in {work} (local profile): {who} over a day, {max(args.hours)} h of "
          f"counters for all 24 switches, {files:,} per-port files, generated in {time.perf_counter() - t:.0f} s")
    lake = work / "world" / "lake"
    first, hours = first_part(raw, work / "world" / "first")
    for n, hour in enumerate(hours, start=1):
        source, only = (first, None) if n == 1 else (raw, hour)
        done = _run_phase("--phase", "ingest", "--raw", str(source), "--lake", str(lake), *(["--hour", only] if only else []))
        slow = ", ".join(f"{k.split(':')[0]} {v:.0f} s" for k, v in done["steps"].items() if v >= 5)
        print(f"  ingest of hour {n} into the one lake: {done['wall_s']:6.1f} s, peak {done['peak_mb']:6.0f} MB, "
              f"{done['rows'].get('bronze.zj_port_counters', 0):,} counter rows ({slow})")
        if n not in args.hours:
            continue
        walls = {"correlate": [], "interference": []}
        for r in range(1, args.rounds + 1):  # alternated, so a loaded machine weighs on both alike
            corr = _run_phase("--phase", "correlate", "--lake", str(lake))
            rows = corr["rows"]
            if r == 1:
                print(f"\n{n} h of counters in the lake ({rows['counter_rows']:,} rate rows of the task's hours), "
                      f"{rows['iteration_network']:,} iterations ({rows['with_data']:,} with data), {rows['paths']} path ports")
            print(f"  correlate     {corr['wall_s']:6.1f} s  peak {corr['peak_mb']:6.0f} MB  ("
                  + ", ".join(f"{k} {v:.1f} s" for k, v in corr["steps"].items()) + ")")
            inter = _run_phase("--phase", "interference", "--lake", str(lake))
            rows = inter["rows"]
            print(f"  interference  {inter['wall_s']:6.1f} s  peak {inter['peak_mb']:6.0f} MB  ("
                  + ", ".join(f"{k} {v:.1f} s" for k, v in inter["steps"].items())
                  + f"; {rows['rows']:,} rows on {rows['ports']:,} (iteration, shared port) pairs, {rows['parties']} parties, "
                  f"{rows['flow_rows']:,} flow rows in the lake)  = {inter['wall_s'] / corr['wall_s']:.2f}x the correlation")
            walls["correlate"].append(corr["wall_s"])
            walls["interference"].append(inter["wall_s"])
        best = {k: min(v) for k, v in walls.items()}
        print(f"  best of {args.rounds}: interference {best['interference']:.1f} s, correlation {best['correlate']:.1f} s "
              f"= {best['interference'] / best['correlate']:.2f}x (target <= 2x)")
        print(f"  suspects   {score(raw, lake / '_bench' / 'iteration_network', n)}\n")
    if not args.keep:
        shutil.rmtree(work / "world", ignore_errors=True)
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
