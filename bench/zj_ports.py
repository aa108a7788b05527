"""Ingest throughput for the Zhejiang per-port counter files: tracelake against DuckDB, Polars and a
pandas notebook on the same CSVs, in one run so the ratios are visible (target: a full hour end
to end at >= 0.5x DuckDB's plain CSV -> Parquet, peak RSS <= 3 GB). Prints figures; asserts nothing.

    python bench/zj_ports.py [--raw RELEASE_DIR] [--repeat 3] [--spark] [--cluster] [--skip-in-process] [--floor]

--raw is a release folder holding trafficinfo/<hour>/<switch>/<port>.csv (default: the real
sample at ../shared/data/zhejiang, 350 files; a full generated hour:
`tracelake generate zhejiang --out DIR --ports all`); only its trafficinfo/ is ingested.

1. In process, on a warm engine, one ingest with a breakdown of where its time goes, and beside
   it the same engine's floors: its plain CSV -> Parquet of the files, and tracelake's own one
   pass (each file read, checked, typed and rated) -> Parquet, without gate, lineage or Delta.
2. End to end as a user runs it, alternating A B A B in one loop so that the machine's drift hits
   both alike: `tracelake ingest zhejiang` (process start to exit: imports, engine, parse, gate,
   bronze and silver commits, every derived table) against DuckDB's plain CSV -> Parquet of the
   same files, DuckDB computing the same rates with SQL windows (the fair peer), Polars, and
   pandas as a notebook does it. Each in its own process, from start to exit, with its peak RSS.
   With --spark, classic Spark + delta-spark joins every round: the CLI on `local[2]`; with
   --cluster, deploy/spark-submit.sh to a standalone master with 2 one-core workers that the
   bench starts on 127.0.0.1 and stops by PID (--skip-in-process leaves out part 1). With --floor,
   the embedded engine's own plain CSV -> Parquet joins every round as a process from start to
   exit: the floor of any design on that engine.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from peak import peak_rss_mb

os.environ.setdefault("RUST_LOG", "error")


from tracelake.api.contract import limits_proven_by  # noqa: E402
from tracelake.config import load_config  # noqa: E402
from tracelake.delta import commit as lake  # noqa: E402
from tracelake.engine import start_engine  # noqa: E402
from tracelake.run import bronze, derived  # noqa: E402
from tracelake.run.pipeline import run_ingest  # noqa: E402
from tracelake.schema import load_schema  # noqa: E402
from tracelake.sources.zhejiang.ports import RATES_TABLE, TABLE, parser  # noqa: E402
from tracelake.sources.zhejiang.ports.files import find_port_files  # noqa: E402
from tracelake.sources.zhejiang.ports.parser import PortParser  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MAX_UTIL = limits_proven_by(RATES_TABLE, PortParser.name)["max_util"]
COLUMNS = {"SaveTime": "VARCHAR", "SaveTimeUTC": "BIGINT", "DeviceName": "VARCHAR", "PortName": "VARCHAR",
           "InPkts": "BIGINT", "InOctets": "BIGINT", "OutPkts": "BIGINT", "OutOctets": "BIGINT",
           "InRatio": "DOUBLE", "OutRatio": "DOUBLE"}
# each phase patched where it is called from (the callers import it by name)
PHASES = {bronze: ("settle_parse", "run_gate", "commit"), derived: ("stage_rows", "run_gate", "commit"),
          PortParser: ("parse",), lake: ("commit_staged",)}

DUCKDB = """
import duckdb, json, sys, time
files, out, columns = json.loads(sys.stdin.read())
con = duckdb.connect()
start, cpu = time.perf_counter(), time.process_time()
con.execute(f"COPY (SELECT * FROM read_csv(?, header=true, columns=?, filename=true)) TO '{out}' (FORMAT parquet)",
            [files, columns])
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
rows = con.execute(f"SELECT count(*) FROM '{out}'").fetchone()[0]
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps([wall, cpu, rows, peak]))
"""
DUCKDB_RATES = """
import duckdb, json, sys, time
files, out, columns = json.loads(sys.stdin.read())
con = duckdb.connect()
start, cpu = time.perf_counter(), time.process_time()
con.execute(f\"\"\"COPY (
  WITH t AS (SELECT *, SaveTimeUTC AS ms, (InPkts = 0 AND InOctets = 0 AND OutPkts = 0 AND OutOctets = 0) AS zero
             FROM read_csv(?, header=true, columns=?, filename=true)),
  w AS (SELECT *, lag(ms) OVER p AS prev_ms,
               min(ms) OVER (p ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS first_ms,
               max(CASE WHEN NOT zero THEN ms END) OVER (p ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS upd_ms
        FROM t WINDOW p AS (PARTITION BY DeviceName, PortName ORDER BY ms)),
  s AS (SELECT *, coalesce(upd_ms, first_ms) AS anchor,
               CASE WHEN prev_ms IS NULL THEN 'first' WHEN ms = prev_ms THEN 'repeated' WHEN ms - prev_ms > 5000 THEN 'gap'
                    WHEN NOT zero THEN 'update' WHEN ms - coalesce(upd_ms, first_ms) <= 5000 THEN 'no_new_data'
                    ELSE 'idle' END AS status FROM w),
  r AS (SELECT *, CASE WHEN status = 'update' THEN (CASE WHEN prev_ms - anchor <= 5000 THEN anchor ELSE prev_ms END)
                       WHEN status = 'idle' THEN prev_ms END AS start_ms FROM s)
  SELECT filename, DeviceName, PortName, ms, status, start_ms, (ms - start_ms) / 1000.0 AS interval_s,
         InOctets / ((ms - start_ms) / 1000.0) AS in_bytes_per_s, OutOctets / ((ms - start_ms) / 1000.0) AS out_bytes_per_s
  FROM r) TO '{out}' (FORMAT parquet)\"\"\", [files, columns])
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
rows = con.execute(f"SELECT count(*) FROM '{out}'").fetchone()[0]
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps([wall, cpu, rows, peak]))
"""
POLARS = """
import json, sys, time
import polars as pl
files, out, columns = json.loads(sys.stdin.read())
types = {"VARCHAR": pl.Utf8, "BIGINT": pl.Int64, "DOUBLE": pl.Float64}
schema = {k: types[v] for k, v in columns.items()}
start, cpu = time.perf_counter(), time.process_time()
pl.scan_csv(files, schema=schema, include_file_paths="filename").sink_parquet(out)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
rows = pl.scan_parquet(out).select(pl.len()).collect().item()
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps([wall, cpu, rows, peak]))
"""
PANDAS = """
import json, sys, time
import pandas as pd
files, out, columns = json.loads(sys.stdin.read())
types = {"VARCHAR": "string[pyarrow]", "BIGINT": "int64", "DOUBLE": "float64"}
start, cpu = time.perf_counter(), time.process_time()
frames = [pd.read_csv(f, engine="pyarrow", dtype={k: types[v] for k, v in columns.items()}).assign(filename=f)
          for f in files]
pd.concat(frames, ignore_index=True).to_parquet(out)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
rows = len(pd.read_parquet(out, columns=["SaveTimeUTC"]))
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps([wall, cpu, rows, peak]))
"""


def _instrument(totals: dict[str, list[float]]) -> None:
    """Accumulate wall and CPU seconds of the ingest's phases (measurement only)."""
    for module, names in PHASES.items():
        for name in names:
            original = getattr(module, name)

            @functools.wraps(original)
            def timed(*args, _f=original, _n=name, **kwargs):
                wall, cpu = time.perf_counter(), time.process_time()
                label = (f"{_n} {args[2].full_name}" if _n == "commit"  # per table
                         else f"{_n} {args[1].full_name}" if _n == "stage_rows" else _n)
                if threading.current_thread() is not threading.main_thread():  # run/alongside.py: overlaps the rest
                    label += " (alongside)"
                try:
                    return _f(*args, **kwargs)
                finally:
                    spent = totals.setdefault(label, [0.0, 0.0])
                    spent[0] += time.perf_counter() - wall
                    spent[1] += time.process_time() - cpu

            setattr(module, name, timed)


def _release(raw: Path, work: Path) -> Path:
    """A raw folder with only the release's trafficinfo/ (no workbook, no task logs)."""
    folder = work / "raw"
    folder.mkdir(parents=True)
    (folder / "trafficinfo").symlink_to((raw / "trafficinfo").resolve())
    return folder


def _warm_up_release(raw: Path, work: Path) -> Path:
    """Two of the files, linked into their own release folder: enough to warm the engine up."""
    folder = work / "warm"
    for path in [Path(f.path) for f in find_port_files(raw)][:2]:
        target = folder / "trafficinfo" / path.parent.parent.name / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(path.resolve())
    return folder


def _tracelake(raw: Path, work: Path, repeat: int) -> tuple[list[tuple[float, float]], int, dict]:
    totals: dict[str, list[float]] = {}
    config0 = load_config(profile="local", overrides={"lake_root": str(work / "lake-warm")})
    runs, rows, phases = [], 0, {}
    with start_engine(config0) as engine:
        # warm-up on two files: imports, the GX context, the first plans
        run_ingest(engine, config0, "zhejiang", str(_warm_up_release(raw, work)))
        _instrument(totals)
        for i in range(repeat):
            totals.clear()
            config = load_config(profile="local", overrides={"lake_root": str(work / f"lake-{i}")})
            wall, cpu = time.perf_counter(), time.process_time()
            stats = run_ingest(engine, config, "zhejiang", str(raw))
            runs.append((time.perf_counter() - wall, time.process_time() - cpu))
            rows = next(s.rows_read for s in stats if s.table == TABLE)
            phases = {k: tuple(v) for k, v in totals.items()}
        files = [f.path for f in find_port_files(raw)]
        plain = _plain_conversion(engine.spark, files, work, repeat)
        floor = _pass_floor(engine.spark, raw, work, repeat)
    return runs, rows, phases, plain, floor


def _plain_conversion(spark, files: list[str], work: Path, repeat: int) -> list[tuple[float, float]]:
    """The engine's own CSV -> Parquet of the same files, typed, without lineage, gate, Delta or
    rates: the ceiling any ingest on this engine works under."""
    schema = ", ".join(f"{name} {'STRING' if kind == 'VARCHAR' else kind}" for name, kind in COLUMNS.items())
    runs = []
    for i in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        spark.read.schema(schema).option("header", True).csv(files).write.parquet(str(work / f"sail-{i}.parquet"))
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return runs


def _pass_floor(spark, raw: Path, work: Path, repeat: int) -> list[tuple[float, float]]:
    """tracelake's one pass -> Parquet (parser.one_pass: each file read, checked, typed and rated),
    without staging for the gate, quarantine, lineage or Delta: the floor of this design."""
    files = find_port_files(raw)
    schema = load_schema(TABLE)
    runs = []
    for i in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        parser.one_pass(spark, files, schema, None, MAX_UTIL).write.parquet(str(work / f"pass-{i}.parquet"))
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return runs


SPARK_LOCAL = ("--profile", "spark", "--conf", "master=local[2]")


def _cli_ingest(release: Path, lake: Path, flags: tuple[str, ...] = (), command: list[str] | None = None,
                env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """(wall, CPU s, peak RSS GB) of `tracelake ingest zhejiang` as a user runs it: process start
    to exit (imports, engine start, plan, parse, gate, Delta, rates, correlation); `flags` pick
    the profile, `command` replaces the CLI (spark-submit to a cluster)."""
    started = time.perf_counter()
    argv = command or [sys.executable, "-m", "tracelake", "ingest", "zhejiang", "--raw", str(release),
                       "--lake", str(lake), *flags]
    # stderr to a file: a pipe nobody reads while waiting stalls a chatty driver (Spark's log
    # lines under spark-submit filled it, and its scheduler blocked on the write)
    with tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                   env={**os.environ, "RUST_LOG": "error", **(env or {})})
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        if status != 0:
            err.seek(0)
            raise SystemExit(f"tracelake ingest failed: {err.read()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024 / 1024


def _process(script: str, files: list[str], out: Path) -> tuple[float, float, int, float]:
    """(wall from process start to exit, CPU s, rows, peak RSS GB) of a peer's child process."""
    payload = json.dumps([files, str(out), COLUMNS])
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate(payload)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(stderr.strip().splitlines()[-1] if stderr.strip() else "failed")
    _, cpu, rows, rss = json.loads(stdout.strip().splitlines()[-1])
    return wall, cpu, rows, rss / 1024 / 1024


@contextlib.contextmanager
def _spark_runs(release: Path, work: Path, spark: bool, cluster: bool):
    """The classic Spark rows (delta-spark): the CLI on `local[2]`, and deploy/spark-submit.sh to a
    standalone master with 2 one-core workers on 127.0.0.1 (tests/deploy/standalone.py), each a
    function of the round that returns (wall, CPU, peak RSS)."""
    runs = {}
    if spark:
        runs["tracelake --profile spark (local[2])"] = lambda i: _cli_ingest(release, work / f"spark-lake-{i}",
                                                                             SPARK_LOCAL)
    if not cluster:
        yield runs
        return
    sys.path[:0] = [str(REPO / "tests" / "deploy"), str(REPO / "tests")]  # the cluster helper and its own helpers
    from standalone import standalone_cluster

    with standalone_cluster(work / "cluster", workers=2, cores=1, memory="3g") as live:
        submit = ["bash", str(REPO / "deploy" / "spark-submit.sh"), "zhejiang", str(release)]
        env = {**live.env, "SPARK_MASTER": live.master, "PYSPARK_PYTHON": sys.executable}
        runs["spark-submit, standalone (2 workers x 1 core)"] = lambda i: _cli_ingest(
            release, work, command=[*submit, str(work / f"cluster-lake-{i}")], env=env)
        yield runs

# the floor of any design on this engine: the embedded engine started as the CLI starts it, and
# its own CSV reader's plain conversion of the same files, nothing else (no check, lineage, rate,
# gate or Delta), from process start to exit (--floor)
ENGINE_PLAIN = """
import json, resource, sys, time
files, out, columns = json.loads(sys.stdin.read())
from tracelake.config import load_config
from tracelake.engine import start_engine
types = {"VARCHAR": "STRING"}
schema = ", ".join(f"{name} {types.get(kind, kind)}" for name, kind in columns.items())
cpu = time.process_time()
with start_engine(load_config(profile="local", overrides={"lake_root": out + "-lake"})) as engine:
    engine.spark.read.schema(schema).option("header", True).csv(files).write.parquet(out)
    rows = engine.spark.read.parquet(out).count()
cpu = time.process_time() - cpu + sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f)
                                       for f in ("ru_utime", "ru_stime"))
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps([0.0, cpu, rows, peak]))
"""


def _alternated(raw: Path, files: list[str], work: Path, repeat: int, spark: bool = False,
                cluster: bool = False, floor: bool = False) -> None:
    """The CLI and every peer, one after another in each round, `repeat` rounds. The CLI and
    DuckDB's plain conversion (the target's pair) swap places every other round, so each of them
    starts right after the last round's pandas notebook (5 GB) as often as the other: a fixed order
    put the CLI there in every round but the first."""
    release = _release(raw, work / "cli")
    peers = {"duckdb CSV -> Parquet": DUCKDB, "duckdb CSV -> rates (SQL windows) -> Parquet": DUCKDB_RATES,
             "polars CSV -> Parquet": POLARS, "pandas notebook CSV -> Parquet": PANDAS}
    if floor:
        peers["the embedded engine's plain CSV -> Parquet, process start to exit"] = ENGINE_PLAIN
    results: dict[str, list[tuple[float, float, float]]] = {"tracelake": []}
    rows: dict[str, int] = {}
    with _spark_runs(release, work, spark, cluster) as engines:
        _rounds(release, files, work, repeat, peers, engines, results, rows)
    _report(results, rows)


def _rounds(release, files, work, repeat, peers, engines, results, rows) -> None:
    for i in range(repeat):
        order = ["tracelake", *peers, *engines]
        if i % 2:
            order[:2] = order[1::-1]
        for name in order:
            if name == "tracelake":
                results["tracelake"].append(_cli_ingest(release, work / f"cli-lake-{i}"))
                continue
            if name in engines:
                results.setdefault(name, []).append(engines[name](i))
                rows[name] = rows.get("duckdb CSV -> Parquet", 0)
                continue
            script = peers[name]
            try:
                wall, cpu, n, rss = _process(script, files, work / f"peer-{i}-{order.index(name)}.parquet")
            except RuntimeError as exc:
                print(f"{name}: failed ({exc})")
                continue
            results.setdefault(name, []).append((wall, cpu, rss))
            rows[name] = n


def _report(results, rows) -> None:
    ours = results.pop("tracelake")
    wall = statistics.median(w for w, _, _ in ours)
    cpu = statistics.median(c for _, c, _ in ours)
    print(f"tracelake ingest zhejiang, CLI process start to exit: median {wall:.2f} s wall, {cpu:.2f} s CPU of "
          f"{len(ours)}, peak RSS {max(r for _, _, r in ours):.2f} GB")
    for name, runs in results.items():
        pairs = list(zip(ours, runs))
        wall_ratio = statistics.median(theirs[0] / mine[0] for mine, theirs in pairs)
        cpu_ratio = statistics.median(theirs[1] / mine[1] for mine, theirs in pairs)
        print(f"{name}: {rows[name]:,} rows, median {statistics.median(w for w, _, _ in runs):.2f} s wall "
              f"({statistics.median(c for _, c, _ in runs):.2f} s CPU), peak RSS {max(r for _, _, r in runs):.2f} GB")
        print(f"    its wall / tracelake's: {wall_ratio:.3f}x (CPU {cpu_ratio:.3f}x), paired run by run")
        plain = results.get("duckdb CSV -> Parquet")
        if name.startswith(("tracelake --profile", "spark-submit")) and plain:
            ratio = statistics.median(duck[0] / theirs[0] for duck, theirs in zip(plain, runs))
            print(f"    DuckDB's plain conversion wall / its wall: {ratio:.3f}x, paired run by run")


def _line(label: str, runs: list[tuple[float, float]], rows: int, extra: str = "") -> float:
    wall = statistics.median(w for w, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    print(f"{label}: {rows:,} rows, median {wall:.2f} s wall ({cpu:.2f} s CPU) of {len(runs)} "
          f"-> {rows / wall:,.0f} rows/s{extra}")
    return rows / wall


def _in_process(raw: Path, work: Path) -> None:
    ours, rows, phases, plain, floor = _tracelake(_release(raw, work), work, 1)
    peak = peak_rss_mb()  # the engine is stopped by now
    ours_rate = _line("tracelake ingest in process (warm engine: parse, gate, Delta, silver rates)", ours, rows,
                      f", peak RSS {peak:,.0f} MB (this process or its engine, the larger; CPU: this process alone)")
    for name, (wall, cpu) in sorted(phases.items(), key=lambda kv: -kv[1][0]):
        print(f"    {name:40s} {wall:6.2f} s wall {cpu:6.2f} s CPU")
    plain_rate = _line("engine's plain CSV -> Parquet (no checks, lineage, gate, Delta, rates)", plain, rows)
    floor_rate = _line("tracelake's one pass -> Parquet (read, check, type, rate; no gate, Delta)", floor, rows)
    print(f"    in process, tracelake / plain: {ours_rate / plain_rate:.3f}x; tracelake / one pass: "
          f"{ours_rate / floor_rate:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", default=str(REPO.parent / "shared" / "data" / "zhejiang"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also classic Spark + delta-spark on local[2]")
    parser.add_argument("--cluster", action="store_true",
                        help="also spark-submit to a standalone cluster of 2 workers started on 127.0.0.1")
    parser.add_argument("--skip-in-process", action="store_true", help="only the alternated end-to-end runs")
    parser.add_argument("--floor", action="store_true",
                        help="also the embedded engine's own plain conversion as a process: the floor of any design on it")
    args = parser.parse_args()
    raw = Path(args.raw)
    if not (raw / "trafficinfo").is_dir():
        sys.exit(f"{raw} has no trafficinfo/ folder")
    files = [f.path for f in find_port_files(raw)]
    size = sum(Path(f).stat().st_size for f in files)
    print(f"input: {len(files):,} port files, {size / 1e6:,.0f} MB under {raw}/trafficinfo; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-zj-") as tmp:
        work = Path(tmp)
        if not args.skip_in_process:
            _in_process(raw, work)
        _alternated(raw, files, work, args.repeat, args.spark, args.cluster, args.floor)


if __name__ == "__main__":
    main()
