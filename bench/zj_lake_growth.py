"""The lake grows: generate and ingest Zhejiang hours one at a time into ONE lake, each raw hour
deleted after its ingest, then re-ingest a middle hour as a scheduler's retry would. Prints per
hour the CLI's wall time and peak RSS (its own process: parse, gate, Delta, rates, correlation),
and rows and files per table; asserts nothing.

    python bench/zj_lake_growth.py [--hours 24] [--ports all|monitored] [--tasks 2] [--work DIR] [--backfill] [--rev REV]
                                   [--repeat-last N] [--skip-hours K]

Targets (issue text): the last hour's wall <= 1.2x the second hour's; every peak <= 6 GB; the
re-ingest <= 1.2x a new hour and every other hour's rows untouched (compared per hour below);
the correlation of the tasks over the whole lake <= 120 s. After the hours it projects a month
(744 hourly ingests): the mean hour's wall, the peak, the disk a month of tables takes, and the
steps whose time grows with the lake (month_projection). The first hour is a full ingest
(workbook, task logs, traffic); later hours use --hours, as the hourly Airflow DAG does. Beside
the last/second ratio it prints the last hour over the first later hour whose iterations have
counter evidence of the same tasks as the last's: an hour without a task's traffic does less
work, so that ratio is the growth alone. With --skip-hours K the world spans K + --hours hours and
the lake starts at its hour K: a day chosen after the tasks have started (the generator starts them
30-70 % into its world) has their traffic in every hour, so last / second hour compares like with like.

With --rev REV, every hour is also ingested by that git revision's code (bench/revision.py) into a
lake of its own, right before or after this code's ingest of the same raw hour (the order
alternates hour by hour, so the machine's drift hits both alike), and the day's totals are
compared (the hot-path issue's target: the day >= 2.5x faster than the code before it).
--repeat-last N (with --rev) then ingests the last hour N more times with each code, each time
on a copy of that code's lake as it stood before the hour, alternating A B B A ..., and prints
each code's walls and its mean seconds per step: one hour's cost, step by step, without the
day's drift between hours. The middle hour's re-ingest and the whole-lake correlation are then
left out: they would run on this code's lake only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from deltalake import DeltaTable
from revision import export_rev

TABLES = ("bronze/zj_port_counters", "silver/zj_port_rates", "bronze/zj_flow", "bronze/zj_nic",
          "bronze/zj_link", "bronze/zj_port_minute", "gold/zj_iteration_network")
CLI = [sys.executable, "-m", "tracelake"]


STEP = re.compile(r"✓ (?P<label>.+?): .*?(?P<s>\d+\.\d) s(?:, ETA .*|, last)?$")  # a plain progress line's step and seconds


def run_measured(args: list[str], src: Path | None = None) -> tuple[float, float, int, str]:
    """(wall s, peak RSS GB, exit code, stderr) of one CLI process (of the code under `src`, when given)."""
    started = time.perf_counter()
    env = {**os.environ, "RUST_LOG": "error", **({"PYTHONPATH": str(src)} if src else {})}
    cli = CLI if src is None or (src / "tracelake" / "__main__.py").is_file() else [  # an older tree's entry point
        sys.executable, "-c", "import sys; from tracelake.cli import main; sys.exit(main())"]
    process = subprocess.Popen([*cli, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    stderr = process.stderr.read()  # read while it runs, so a full pipe cannot stall the CLI
    _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss / 1024 / 1024, os.waitstatus_to_exitcode(status), stderr


def slowest_steps(stderr: str, most: int = 4) -> str:
    """The CLI's longest progress steps (its plain lines: stderr is not a terminal), e.g.
    `zj_port_rates 5.5s`, and every step of the correlation (the tables that grow with a task's
    hours if anything does): where an hour's time went, so a slower hour says which step grew."""
    steps = []
    for line in stderr.splitlines():
        if (match := STEP.search(line)) and not match["label"].startswith("hour "):
            seconds = float(match["s"])
            name = match["label"].split(":")[0].split(".")[-1]
            steps.append((seconds, f"{name}{'(w)' if 'writing' in line else ''} {seconds:.1f}s"))
    ranked = sorted(steps, key=lambda s: -s[0])
    shown = ranked[:most] + [s for s in ranked[most:] if "iteration" in s[1] or "task_network" in s[1]]
    return " ".join(label for seconds, label in shown if seconds >= 0.1)


def step_seconds(stderr: str) -> dict[str, float]:
    """Every progress step's seconds, by its label (the table, plus `(w)` for its write)."""
    found: dict[str, float] = {}
    for line in stderr.splitlines():
        if (match := STEP.search(line)) and not match["label"].startswith("hour "):
            name = match["label"].split(":")[0] + ("(w)" if "writing" in line else "")
            found[name] = found.get(name, 0.0) + float(match["s"])
    return found


MONTH_HOURS = 744  # 31 days


def lake_bytes(lake: Path) -> dict[str, int]:
    """Bytes on disk per layer.table of the lake (its data files and logs; no scratch). A file
    linked into two tables (the port pass's files: bronze.zj_port_counters' and
    silver.zj_port_rates') is one inode on disk and counts once, in the first table that holds it."""
    out: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    for log in sorted(lake.glob("*/*/_delta_log")):
        table, total = log.parent, 0
        for f in table.rglob("*"):
            stat = f.stat()
            if f.is_file() and (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
        out[f"{table.parent.name}.{table.name}"] = total
    return out


def month_projection(walls: list[float], peaks: list[float], steps: list[dict[str, float]],
                     disk_first: dict[str, int], disk_last: dict[str, int], hours: int,
                     alike: list[int] | None = None) -> list[str]:
    """A month of hourly ingests from the hours measured (the first, a full ingest of the
    workbook and task logs too, left out of the per-hour cost): the mean hour x MONTH_HOURS, the
    peak, the disk a month of tables takes (each table's growth per hour after the first, x
    MONTH_HOURS), and each step whose last quarter of hours took more than 1.2x its first quarter
    (a step that grows with the lake), among the hours `alike` (indexes of hours with the same
    tasks' traffic as the last: a task's hours do the correlation's work, the others do not)."""
    later = walls[1:]
    mean = sum(later) / len(later)
    per_hour = {t: (disk_last.get(t, 0) - disk_first.get(t, 0)) / max(1, hours - 1) for t in disk_last}
    month_bytes = sum(disk_last.values()) + sum(per_hour.values()) * (MONTH_HOURS - hours)
    biggest = sorted(per_hour.items(), key=lambda kv: -kv[1])[:3]
    compared = [steps[i] for i in (alike or range(1, len(steps)))]
    quarter = max(1, len(compared) // 4)
    grows = []
    for label in sorted({k for hour in compared for k in hour}):
        values = [hour.get(label, 0.0) for hour in compared]
        first, last = sum(values[:quarter]) / quarter, sum(values[-quarter:]) / quarter
        if last >= 0.5 and last > 1.2 * first:  # steps under half a second are noise here
            grows.append(f"{label} {first:.1f}s -> {last:.1f}s")
    return [
        f"month projection from {hours} hours ({len(later)} hourly ingests after the first): "
        f"{mean:.1f} s an hour x {MONTH_HOURS} = {mean * MONTH_HOURS / 3600:.1f} h of ingest a month "
        f"({mean / 36:.1f} % of the wall clock); peak RSS {max(peaks):.2f} GB",
        f"  disk: {sum(disk_last.values()) / 1e9:.2f} GB after {hours} hours, +{sum(per_hour.values()) / 1e9:.3f} GB "
        f"an hour -> {month_bytes / 1e9:.0f} GB for a month (most per hour: "
        + ", ".join(f"{t} {b / 1e6:.0f} MB" for t, b in biggest) + ")",
        f"  steps that grow with the lake (of {len(compared)} hours with the last hour's tasks, the last quarter "
        "> 1.2x the first): " + ("; ".join(grows) or "none"),
    ]


def add_actions(path: Path) -> dict[str, list] | None:
    """The Delta log's add actions of the table at `path`, column by column (None: no table)."""
    if not (path / "_delta_log").is_dir():
        return None
    import pyarrow as pa

    return pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).to_pydict()


def per_hour_rows(lake: Path, table: str) -> Counter:
    """Rows per hour_cst from the Delta log's file statistics (no data read)."""
    actions = add_actions(lake / table)
    if actions is None:
        return Counter()
    hours = actions.get("partition.hour_cst") or ["-"] * len(actions["num_records"])
    counts: Counter = Counter()
    for hour, n in zip(hours, actions["num_records"]):
        counts[hour] += n or 0
    return counts


def table_line(lake: Path) -> str:
    parts = []
    for table in TABLES:
        path = lake / table
        if (path / "_delta_log").is_dir():
            files = len(DeltaTable(str(path)).file_uris())
            parts.append(f"{table.split('/')[1]}={sum(per_hour_rows(lake, table).values())}r/{files}f")
    return " ".join(parts)


def tasks_by_hour(lake: Path) -> dict[str, frozenset]:
    """The tasks whose iterations starting in each hour have counter evidence, from the Delta log's
    partition values of silver.zj_iteration_counters (no data read)."""
    actions = add_actions(lake / "silver" / "zj_iteration_counters")
    if actions is None:
        return {}
    found: dict[str, set] = {}
    for task, hour in zip(actions["partition.task_id"], actions["partition.hour_cst"]):
        found.setdefault(hour, set()).add(task)
    return {hour: frozenset(t) for hour, t in found.items()}


def backfill(hours: list[str], world: list[str], raw: Path, lake: Path) -> None:
    """All hours generated first, then one `ingest --hours FROM..TO` run over them."""
    for hour in hours:
        generated = subprocess.run([*CLI, *world, "--only-hour", hour], capture_output=True, text=True)
        if generated.returncode != 0:
            sys.exit(f"generate {hour} failed: {generated.stderr[-500:]}")
    wall, peak, rc, err = run_measured(["ingest", "zhejiang", "--raw", str(raw), "--hours", f"{hours[0]}..{hours[-1]}",
                                        "--lake", str(lake)])
    print(f"backfill of {len(hours)} hours in one run: {wall:.1f} s, peak {peak:.2f} GB, rc {rc}  {table_line(lake)}")
    print(f"  steps: {slowest_steps(err)}")


def repeat_last(hour: str, raw: Path, work: Path, old_src: Path, rev: str, times: int) -> None:
    """The last hour again, `times` runs of each code on a fresh copy of its lake as it stood
    before the hour (A B B A ...), then each code's walls and mean seconds per step."""
    runs: dict[str, list[tuple[float, dict[str, float]]]] = {"this code": [], rev: []}
    for k in range(times):
        order = [("this code", None, "lake"), (rev, old_src, "lake-rev")]
        for label, src, name in order if k % 2 == 0 else order[::-1]:
            trial = work / "trial"
            shutil.copytree(work / f"{name}-before-last", trial, symlinks=True)
            wall, _, rc, err = run_measured(["ingest", "zhejiang", "--raw", str(raw), "--hours", hour,
                                             "--lake", str(trial)], src)
            shutil.rmtree(trial)
            if rc != 0:
                sys.exit(f"{label}'s ingest of {hour} failed: {err.strip().splitlines()[-1] if err.strip() else rc}")
            runs[label].append((wall, step_seconds(err)))
    print(f"\nthe last hour {hour} again, {times} runs of each code alternated, each on its lake as before the hour:")
    for label, done in runs.items():
        print(f"  {label}: walls {' '.join(f'{w:.1f}' for w, _ in done)} s, mean {sum(w for w, _ in done) / times:.2f} s")
    names = sorted({n for done in runs.values() for _, steps in done for n in steps},
                   key=lambda n: -sum(steps.get(n, 0.0) for _, steps in runs["this code"]))
    print(f"  {'step':<44} {'this code':>9} {rev:>9}  (mean s)")
    for name in names:
        means = [sum(steps.get(name, 0.0) for _, steps in runs[label]) / times for label in runs]
        if max(means) >= 0.05:
            print(f"  {name:<44} {means[0]:9.2f} {means[1]:9.2f}")


def reingest_middle(hours: list[str], walls: list[float], one_hour, lake: Path) -> None:
    """A scheduler's retry of the middle hour: its wall against a new hour's, and which hours' rows
    it changed (none but its own may)."""
    middle = hours[len(hours) // 2]
    before = {t: per_hour_rows(lake, t) for t in TABLES}
    again = one_hour(middle, f"{middle}*")
    after = {t: per_hour_rows(lake, t) for t in TABLES}
    changed = sorted({h for t in TABLES for h in set(before[t]) | set(after[t]) if before[t][h] != after[t][h]})
    print(f"\nre-ingest of {middle}: {again:.1f} s = {again / (sum(walls[1:]) / max(1, len(walls) - 1)):.2f}x a new hour;"
          f" hours whose rows changed: {changed or 'none'}")


def correlate_whole_lake(raw: Path, lake: Path) -> None:
    """The tasks over every stored hour: a run without --hours rebuilds the correlation whole."""
    wall, peak, rc, err = run_measured(["ingest", "zhejiang", "--raw", str(raw), "--lake", str(lake)])
    print(f"whole-lake correlation of the tasks (full ingest, no traffic left to read): {wall:.1f} s, "
          f"peak {peak:.2f} GB, rc {rc} (target <= 120 s)")
    print(f"  steps: {slowest_steps(err)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--ports", choices=("all", "monitored"), default="all")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--start", default="2024052400")
    parser.add_argument("--skip-hours", type=int, default=0,
                        help="the world starts K hours before the first hour ingested (module docstring)")
    parser.add_argument("--work", help="work folder (default: a temp folder, removed at the end)")
    parser.add_argument("--rev", help="also ingest every hour with this git revision's code, alternating, and compare the day")
    parser.add_argument("--repeat-last", type=int, default=0,
                        help="with --rev: ingest the last hour N more times with each code on copies of the lakes "
                             "as they stood before it, alternating, and compare step by step")
    parser.add_argument("--backfill", action="store_true",
                        help="instead: generate the hours, then ingest them in ONE run (--hours FROM..TO), "
                             "as a backfill does; prints its wall and peak (target: an hour's peak, <= 6 GB)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="zj_growth_"))
    raw, lake = work / "raw", work / "lake"
    start = datetime.strptime(args.start, "%Y%m%d%H")
    hours = [(start + timedelta(hours=i)).strftime("%Y%m%d%H") for i in range(args.skip_hours, args.skip_hours + args.hours)]
    world = ["generate", "zhejiang", "--out", str(raw), "--hours", str(args.skip_hours + args.hours), "--start", args.start,
             "--tasks", str(args.tasks), "--ports", args.ports]
    print(f"# {args.hours} hours from {hours[0]} (world from {args.start}), ports={args.ports}, tasks={args.tasks}, "
          f"work={work}")
    print("hour        gen_s  ingest_s  peak_GB  rc  tables (rows r / files f)")
    walls: list[float] = []
    peaks: list[float] = []  # this code's peak RSS of each ingest
    old_src = export_rev(args.rev, Path(tempfile.mkdtemp(prefix="zj_growth_rev_"))) if args.rev else None
    old: list[tuple[float, float, int]] = []  # (wall, peak, rc) of the revision's ingest of each hour

    def old_hour(hour: str, scope: list[str]) -> None:
        wall, peak, rc, err = run_measured(["ingest", "zhejiang", "--raw", str(raw), *scope, "--lake",
                                            str(work / "lake-rev")], old_src)
        old.append((wall, peak, rc))
        print(f"{'':11} {args.rev}: {wall:.1f} s, peak {peak:.2f} GB, rc {rc}"
              + (f"  error: {err.strip().splitlines()[-1] if err.strip() else rc}" if rc else ""), flush=True)

    steps: list[dict[str, float]] = []  # each hour's progress steps, for the projection
    disk: list[dict[str, int]] = []  # the lake's bytes per table after each hour

    def one_hour(hour: str, label: str, full: bool = False, compare: bool = False, keep_raw: bool = False) -> float:
        started = time.perf_counter()
        generated = subprocess.run([*CLI, *world, "--only-hour", hour], capture_output=True, text=True)
        gen_s = time.perf_counter() - started
        if generated.returncode != 0:
            sys.exit(f"generate {hour} failed: {generated.stderr[-500:]}")
        scope = [] if full else ["--hours", hour]  # the first run also takes the workbook and task logs
        old_first = compare and len(old) % 2 == 1  # alternate: new, old / old, new / …
        if old_first:
            old_hour(hour, scope)
        wall, peak, rc, err = run_measured(["ingest", "zhejiang", "--raw", str(raw), *scope, "--lake", str(lake)])
        peaks.append(peak)
        steps.append(step_seconds(err))
        disk.append(lake_bytes(lake))
        if compare and not old_first:
            old_hour(hour, scope)
        if not keep_raw:
            shutil.rmtree(raw / "trafficinfo" / hour, ignore_errors=True)  # disk stays bounded
        print(f"{label:<11} {gen_s:5.1f}  {wall:8.1f}  {peak:7.2f}  {rc:2d}  {table_line(lake)}", flush=True)
        print(f"{'':11} steps: {slowest_steps(err)}", flush=True)
        if rc != 0:
            print(f"  error: {err.strip().splitlines()[-1] if err.strip() else rc}")
        return wall

    if args.backfill:
        backfill(hours, world, raw, lake)
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
        return
    repeat = args.repeat_last if old_src is not None and len(hours) > 1 else 0
    for i, hour in enumerate(hours):
        if repeat and i == len(hours) - 1:
            for name in ("lake", "lake-rev"):
                shutil.copytree(work / name, work / f"{name}-before-last", symlinks=True)
        walls.append(one_hour(hour, hour, full=i == 0, compare=old_src is not None, keep_raw=bool(repeat)))
    if repeat:
        repeat_last(hours[-1], raw, work, old_src, args.rev, repeat)
    if old:
        print(f"\nthe day, {len(hours)} hours: this code {sum(walls):.0f} s, {args.rev} {sum(w for w, _, _ in old):.0f} s: "
              f"{sum(w for w, _, _ in old) / sum(walls):.2f}x faster (target >= 2.5); peak RSS max {max(peaks):.2f} GB "
              f"against {max(p for _, p, _ in old):.2f} GB; {args.rev}'s last / second hour "
              f"{old[-1][0] / old[1][0] if len(old) > 1 else float('nan'):.2f}x; failed hours of {args.rev}: "
              f"{sum(1 for _, _, rc in old if rc)}")
    if len(walls) >= 3:
        alike_tasks = tasks_by_hour(lake)
        alike = [i for i, hour in enumerate(hours) if i > 0 and alike_tasks.get(hour) == alike_tasks.get(hours[-1])]
        print()
        print("\n".join(month_projection(walls, peaks, steps, disk[0], disk[len(walls) - 1], len(walls), alike)))
    if not repeat:  # a run that repeats the last hour compares two codes; these steps would run on one
        reingest_middle(hours, walls, one_hour, lake)
    if len(walls) >= 2:
        print(f"last hour / second hour wall: {walls[-1] / walls[1]:.2f}x (target <= 1.2)")
    tasks = tasks_by_hour(lake)
    same = [i for i, hour in enumerate(hours) if i > 0 and tasks.get(hour) == tasks.get(hours[-1])]
    if len(same) >= 2:  # the growth alone: an hour with other tasks' traffic does other work
        first = same[0]
        print(f"last hour / first hour with the same tasks' evidence ({hours[first]}, tasks "
              f"{sorted(tasks.get(hours[-1], ()))}): {walls[-1] / walls[first]:.2f}x ({walls[-1]:.1f} s against "
              f"{walls[first]:.1f} s)")
    if not repeat:
        correlate_whole_lake(raw, lake)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
