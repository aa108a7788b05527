"""Ingest throughput for the Zhejiang per-port counter files: tracelake on the embedded engine
against DuckDB, Polars and a pandas notebook converting the same CSVs to Parquet, in one run so the ratio is
visible (target: a full hour end to end at >= 0.5x DuckDB's plain CSV -> Parquet throughput).
Prints figures; asserts nothing.

    python bench/zj_ports.py [--raw RELEASE_DIR] [--repeat 3]

--raw is a release folder holding trafficinfo/<hour>/<switch>/<port>.csv (default: the real
sample at ../shared/data/zhejiang, 350 files); only its trafficinfo/ is ingested. tracelake's
figure is the whole ingest: plan, parse, quality gate, quarantine, Delta write (MERGE, or the
append it reduces to) into bronze.zj_port_counters, and the derived silver.zj_port_rates (window
rates, gate, partition replace), with a breakdown of where the time goes; measured in-process on
a warm engine, and again end to end as a user runs it (`tracelake ingest zhejiang`, process
start to exit) beside DuckDB's, Polars's and pandas's processes from start to exit (pandas as a
notebook does it: read_csv with the pyarrow engine per file, a file-name column, concat,
to_parquet). Beside it, the same engine's plain CSV -> Parquet of the files (the ceiling for any
ingest on that engine) and its CSV -> rates -> Parquet in one pass (the ceiling for any ingest
that also stores the rates, as this one must). DuckDB, Polars and pandas run in child processes so each peak memory
(VmHWM) is its own; tracelake's peak includes the in-process engine. Wall times depend on what
else runs on the machine; CPU seconds are printed beside them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RUST_LOG", "error")

from pyspark.sql import functions as F  # noqa: E402

from tracelake.config import load_config  # noqa: E402
from tracelake.delta import commit as lake  # noqa: E402
from tracelake.engine import start_engine  # noqa: E402
from tracelake.run import bronze, derived  # noqa: E402
from tracelake.run.pipeline import run_ingest  # noqa: E402
from tracelake.sources.zhejiang import ports  # noqa: E402
from tracelake.sources.zhejiang.ports import TABLE, find_port_files  # noqa: E402
from tracelake.sources.zhejiang.transforms.ports import COUNTERS, port_rates  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
COLUMNS = {"SaveTime": "VARCHAR", "SaveTimeUTC": "BIGINT", "DeviceName": "VARCHAR", "PortName": "VARCHAR",
           "InPkts": "BIGINT", "InOctets": "BIGINT", "OutPkts": "BIGINT", "OutOctets": "BIGINT",
           "InRatio": "DOUBLE", "OutRatio": "DOUBLE"}
# each phase patched where it is called from (the callers import it by name)
PHASES = {bronze: ("settle", "run_gate", "commit"), derived: ("stage_rows", "run_gate", "commit"),
          ports: ("parse_port_files",), lake: ("commit_staged",)}

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
        floor = _rates_floor(engine.spark, files, work, repeat)
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


def _rates_floor(spark, files: list[str], work: Path, repeat: int) -> list[tuple[float, float]]:
    """The engine's CSV -> port_rates -> Parquet of the same files in one pass: the product's rate
    transform on typed rows, without lineage, gate, quarantine, a bronze copy or Delta. No ingest
    that stores the rates can be faster on this engine, so its ratio bounds item 5's."""
    schema = ", ".join(f"{name} {'STRING' if kind == 'VARCHAR' else kind}" for name, kind in COLUMNS.items())
    runs = []
    for i in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        rows = spark.read.schema(schema).option("header", True).csv(files)
        typed = rows.select(
            F.lit("hour").alias("hour_cst"), F.col("DeviceName").alias("device_name"),
            F.col("PortName").alias("port_name"), F.timestamp_millis("SaveTimeUTC").alias("save_time_utc"),
            *[F.col(raw).alias(name) for raw, name in zip(("InPkts", "InOctets", "OutPkts", "OutOctets"), COUNTERS)])
        port_rates(typed).write.parquet(str(work / f"floor-{i}.parquet"))
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return runs


def _child(script: str, files: list[str], out: Path) -> tuple[float, float, int, int, float]:
    """(conversion wall, its CPU, rows, peak RSS KB, the process's wall from start to exit)."""
    payload = json.dumps([files, str(out), COLUMNS])
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, text=True, check=True)
    outer = time.perf_counter() - started
    wall, cpu, rows, rss = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, cpu, rows, rss, outer


def _cli_ingest(release: Path, lake: Path) -> tuple[float, float]:
    """(wall, peak RSS GB) of `tracelake ingest zhejiang` as a user runs it: process start to
    exit (imports, engine start, plan, parse, gate, Delta, rates, correlation)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "tracelake", "ingest", "zhejiang", "--raw", str(release),
                                "--lake", str(lake)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "RUST_LOG": "error"})
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"tracelake ingest failed: {process.stderr.read()[-2000:]}")
    return wall, usage.ru_maxrss / 1024 / 1024


def _competitor(name: str, script: str, files: list[str], work: Path, repeat: int) -> tuple[list, int, int]:
    runs, rows, rss, outer = [], 0, 0, []
    for i in range(repeat):
        wall, cpu, rows, peak, whole = _child(script, files, work / f"{name}-{i}.parquet")
        runs.append((wall, cpu))
        rss = max(rss, peak)
        outer.append(whole)
    return runs, rows, rss, statistics.median(outer)


def _line(label: str, runs: list[tuple[float, float]], rows: int, extra: str = "") -> float:
    wall = statistics.median(w for w, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    print(f"{label}: {rows:,} rows, median {wall:.2f} s wall ({cpu:.2f} s CPU) of {len(runs)} "
          f"-> {rows / wall:,.0f} rows/s{extra}")
    return rows / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", default=str(REPO.parent / "shared" / "data" / "zhejiang"))
    parser.add_argument("--repeat", type=int, default=3)
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
        ours, rows, phases, plain, floor = _tracelake(_release(raw, work), work, args.repeat)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ours_rate = _line("tracelake ingest (local/Sail: parse, gate, Delta, silver rates)", ours, rows,
                          f", peak RSS {peak:,.0f} MB (process incl. engine)")
        for name, (wall, cpu) in sorted(phases.items(), key=lambda kv: -kv[1][0]):
            print(f"    {name:40s} {wall:6.2f} s wall {cpu:6.2f} s CPU (last run)")
        plain_rate = _line("sail CSV -> Parquet alone (same engine; no lineage, gate, Delta, rates)", plain, rows)
        print(f"    ratio tracelake / sail alone: {ours_rate / plain_rate:.3f}x")
        floor_rate = _line("sail CSV -> rates -> Parquet in one pass (the floor of an ingest that stores rates)",
                           floor, rows)
        release = _release(raw, work / "cli")
        cli = [_cli_ingest(release, work / f"cli-lake-{i}") for i in range(args.repeat)]
        cli_wall = statistics.median(w for w, _ in cli)
        print(f"tracelake ingest zhejiang, CLI process start to exit (an hour's full ingest): median {cli_wall:.2f} s "
              f"of {len(cli)}, peak RSS {max(g for _, g in cli):.2f} GB")
        for name, script in (("duckdb", DUCKDB), ("polars", POLARS), ("pandas", PANDAS)):
            try:
                runs, their_rows, rss, whole = _competitor(name, script, files, work, args.repeat)
            except subprocess.CalledProcessError as exc:
                print(f"{name}: failed ({exc.stderr.strip().splitlines()[-1] if exc.stderr else exc})")
                continue
            rate = _line(f"{name} CSV -> Parquet (typed, with file name)", runs, their_rows,
                         f", peak RSS {rss / 1024:,.0f} MB")
            print(f"    ratio tracelake / {name}: {ours_rate / rate:.3f}x; sail alone / {name}: "
                  f"{plain_rate / rate:.3f}x; sail with rates, one pass / {name}: {floor_rate / rate:.3f}x")
            print(f"    end to end (process start to exit): {name} {whole:.2f} s, tracelake CLI {cli_wall:.2f} s: "
                  f"ratio {whole / cli_wall:.3f}x")


if __name__ == "__main__":
    main()
