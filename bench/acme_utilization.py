"""Ingest throughput for AcmeTrace utilization (wide CSV -> long Delta rows): tracelake on the
embedded engine versus DuckDB unpivoting the same files, in one run so the ratio is visible.
Prints figures; asserts nothing.

    python bench/acme_utilization.py [--size-gb 1.0] [--width 2000] [--seed 0] [--no-breakdown] [--keep DIR]

Files are generated (tracelake.sources.acme.synth.utilization) into a temp dir at about
--size-gb, in a child process so the generator's memory is not counted. --width is the number
of GPU columns of a Seren DCGM file (the release's are ~2,000: 250 nodes x 8 GPUs; Kalos has half
the nodes); the sampling interval is then chosen to reach the size. Without --width, the
generator's scale sets both (narrow files: 4 x scale nodes). Then, in this process:
  * parse only (--no-breakdown skips it): the utilization parser written to Parquet, the part
    that is comparable to DuckDB's unpivot (past GROUP_BYTES of CSV the parser first runs its
    staged jobs over groups of files, acme/utilization.unpivot_files: they are in the figure);
  * tracelake ingest: run.pipeline.run_ingest(engine, config, "acme", raw) on the local profile
    (parse, quality gate, quarantine, Delta MERGE), utilization and IPMI power tables;
  * DuckDB: per file read_csv(all_varchar) + UNPIVOT ... ON COLUMNS(* EXCLUDE Time) (IPMI: EXCLUDE
    Time, IP) + TRY_CAST to double, written to Parquet. DuckDB drops empty cells like tracelake,
    but does no duplicate handling, quality gate or MERGE.
Rows are non-empty cells (rows read). Memory is this process's peak RSS (Sail runs inside it):
ru_maxrss after each phase, and the peak of /proc/self/status VmRSS sampled every 0.2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RUST_LOG", "error")

from tracelake.config import load_config  # noqa: E402
from tracelake.engine import start_engine  # noqa: E402
from tracelake.run.pipeline import run_ingest  # noqa: E402
from tracelake.schema import load_schema  # noqa: E402
from tracelake.sources.acme.utilization import plan  # noqa: E402

PILOT_SCALE = 4.0
GENERATE = "import sys; from pathlib import Path; from tracelake.sources.acme.synth.utilization import generate; " \
           "generate(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), *[int(a) or None for a in sys.argv[4:]])"
PILOT_INTERVAL = 3600


class RssSampler:
    """Peak resident memory of this process, sampled in a thread (ru_maxrss never goes down)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with open("/proc/self/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        self.peak = max(self.peak, int(line.split()[1]) * 1024)
            self._stop.wait(0.2)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.csv"))


def _widest(raw: Path) -> int:
    """Fields of the widest header line among the files."""
    widest = 0
    for path in raw.rglob("*.csv"):
        with open(path, encoding="utf-8") as fh:
            widest = max(widest, fh.readline().count(",") + 1)
    return widest


def _generate(out: Path, scale: float, seed: int, nodes: int = 0, interval: int = 0) -> None:
    subprocess.run([sys.executable, "-c", GENERATE, str(out), str(scale), str(seed), str(nodes), str(interval)],
                   check=True)


def generate_at_size(work: Path, size_gb: float, seed: int, width: int | None) -> tuple[Path, float, float]:
    """Files of about size_gb. Narrow (no width): size grows with scale^2, so one pilot run fixes
    the scale. At a width: size grows with 1/interval, so a pilot at an hourly interval fixes it."""
    pilot = work / "pilot"
    start = time.perf_counter()
    raw = work / "raw"
    if width is None:
        _generate(pilot, PILOT_SCALE, seed)
        scale = PILOT_SCALE * (size_gb * 1e9 / _du(pilot)) ** 0.5
        shutil.rmtree(pilot)
        _generate(raw, scale, seed)
    else:
        nodes = max(1, width // 8)
        _generate(pilot, 1.0, seed, nodes, PILOT_INTERVAL)
        interval = max(15, round(PILOT_INTERVAL * _du(pilot) / (size_gb * 1e9)))
        shutil.rmtree(pilot)
        scale = 0.0
        _generate(raw, scale, seed, nodes, interval)
    return raw, scale, time.perf_counter() - start


def _phase(label: str, rows: int, wall: float, cpu: float, sampler: RssSampler) -> None:
    print(f"{label}: {rows:,} rows in {wall:.1f} s -> {rows / wall:,.0f} rows/s "
          f"(cpu {cpu:.1f} s; peak RSS sampled {_gb(sampler.peak)}, ru_maxrss so far {_gb(_maxrss())})",
          flush=True)


def parse_only(engine, raw: Path, work: Path) -> tuple[int, float, float]:
    """The utilization parser alone, written to Parquet (what DuckDB's unpivot compares to)."""
    [util, *_] = plan(raw, work / "staging")
    out = work / "parse-only.parquet"
    start, cpu = time.perf_counter(), _cpu()
    util.parser(engine.spark, util.files, load_schema(util.table)).write.mode("overwrite").parquet(str(out))
    wall, used = time.perf_counter() - start, _cpu() - cpu
    rows = engine.spark.read.parquet(str(out)).count()
    shutil.rmtree(out)
    return rows, wall, used


def tracelake_ingest(engine, raw: Path, work: Path) -> tuple[int, float, float, list]:
    config = load_config(profile="local", overrides={"lake_root": str(work / "lake")})
    start, cpu = time.perf_counter(), _cpu()
    stats = run_ingest(engine, config, "acme", str(raw))
    return sum(s.rows_read for s in stats), time.perf_counter() - start, _cpu() - cpu, stats


def duckdb_unpivot(raw: Path, work: Path) -> tuple[int, float, float]:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    out = work / "duck"
    out.mkdir()
    start, cpu, rows = time.perf_counter(), _cpu(), 0
    files = sorted((raw / "utilization").rglob("*.csv"))
    for i, path in enumerate(files):
        ids = "Time, IP" if path.parent.name == "ipmi" else "Time"
        target = out / f"{i}.parquet"
        con.execute(
            f"COPY (SELECT Time, name, TRY_CAST(value AS DOUBLE) AS value FROM ("
            f"UNPIVOT (SELECT * FROM read_csv('{path}', header = true, all_varchar = true)) "
            f"ON COLUMNS(* EXCLUDE ({ids})) INTO NAME name VALUE value)) TO '{target}' (FORMAT parquet)"
        )
        rows += con.execute(f"SELECT count(*) FROM '{target}'").fetchone()[0]
    wall, used = time.perf_counter() - start, _cpu() - cpu
    con.close()
    return rows, wall, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--width", type=int, help="GPU columns of a Seren DCGM file (the release's: ~2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-breakdown", action="store_true", help="skip the parse-only phase")
    parser.add_argument("--keep", help="generate into this folder and keep it (reused if present)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-acme-") as tmp:
        work = Path(tmp)
        if args.keep and (Path(args.keep) / "utilization" / "manifest.json").is_file():
            raw, scale, gen_s = Path(args.keep), json.loads(
                (Path(args.keep) / "utilization" / "manifest.json").read_text())["scale"], 0.0
        else:
            raw, scale, gen_s = generate_at_size(work, args.size_gb, args.seed, args.width)
            if args.keep:
                shutil.copytree(raw, args.keep, dirs_exist_ok=True)
        manifest = json.loads((raw / "utilization" / "manifest.json").read_text())
        print(f"input: {_gb(_du(raw))} of CSV in {sum(1 for _ in raw.rglob('*.csv'))} files "
              f"(scale {scale:.1f}: {manifest['nodes']} Seren nodes, every {manifest['interval_s']} s, widest file "
              f"{_widest(raw):,} columns; "
              f"generated in {gen_s:.0f} s); cells {manifest['bronze.acme_utilization']['cells']:,} "
              f"utilization + {manifest['bronze.acme_power']['cells']:,} power", flush=True)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
        config0 = load_config(profile="local", overrides={"lake_root": str(work / "lake")})
        with start_engine(config0) as engine:
            if not args.no_breakdown:
                with RssSampler() as sampler:
                    rows, wall, cpu = parse_only(engine, raw, work)
                _phase("tracelake parse only (utilization -> Parquet)", rows, wall, cpu, sampler)
            with RssSampler() as sampler:
                rows, ours, cpu, stats = tracelake_ingest(engine, raw, work)
            _phase("tracelake ingest (local/Sail: parse, gate, quarantine, Delta MERGE)", rows, ours, cpu, sampler)
            for s in stats:
                print(f"  {s.table}: read {s.rows_read:,} kept {s.rows_kept:,} quarantined {s.rows_quarantined:,}")
        try:
            with RssSampler() as sampler:
                duck_rows, duck, cpu = duckdb_unpivot(raw, work)
        except ImportError:
            print("duckdb not installed: pip install -e '.[bench]' for the comparison")
            return
        _phase("duckdb unpivot (CSV -> long Parquet)", duck_rows, duck, cpu, sampler)
        print(f"ratio tracelake ingest / duckdb rows/s: {(rows / ours) / (duck_rows / duck):.3f}x")
        print(f"load average at end {os.getloadavg()[0]:.1f} (other processes share these cores)")


if __name__ == "__main__":
    main()
