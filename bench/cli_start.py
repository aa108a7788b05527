"""How long the command line takes to answer: `tracelake --help`, a `query` with and without
`tracelake serve`, and optionally `tracelake demo`; each beside the same command of another git
revision when `--rev` is given, and the served query beside `duckdb -c` of the same aggregate
over the same Parquet files, alternated A B A B (targets: served <= 3x DuckDB's wall; with its
own engine <= 1 s on an idle machine). Prints figures; asserts nothing.

    python bench/cli_start.py [--rev HEAD] [--repeat 3] [--lake DIR] [--demo]

Each figure is the median wall time of `--repeat` runs of a fresh process (subprocess and
time.perf_counter only). The query runs on `--lake` (default: a small ITP lake generated and
ingested into a temporary folder). `--rev` exports that revision's `src/` with `git archive`
into a temporary folder and runs it with the same interpreter; `--demo` adds the demo (tens of
seconds each: it is run once per tree).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revision import export_rev

REPO = Path(__file__).resolve().parents[1]
QUERY = ("SELECT cluster, count(*) AS jobs, round(sum(duration * num_gpu) / 3600, 1) AS gpu_hours "
         "FROM bronze.itp_jobs GROUP BY cluster ORDER BY cluster")
DUCKDB = Path(sys.executable).parent / "duckdb"  # the duckdb-cli package of the bench extra


def _duckdb_sql(lake: Path) -> str:
    files = f"read_parquet('{lake}/bronze/itp_jobs/**/*.parquet')"
    return QUERY.replace("bronze.itp_jobs", files)


def _timed(command: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {done.stderr.strip()[-500:]}")
    return took


def _run(src: Path, *args: str, cwd: Path | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "RUST_LOG": "error"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True, env=env, cwd=cwd)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{src}: tracelake {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return took


def _median(src: Path, repeat: int, *args: str) -> float:
    return statistics.median(_run(src, *args) for _ in range(repeat))


def _served(src: Path, lake: Path) -> subprocess.Popen | None:
    """`tracelake serve` of this tree on the lake, once its record is written; None when the tree
    has no serve command."""
    env = {**os.environ, "PYTHONPATH": str(src), "RUST_LOG": "error"}
    process = subprocess.Popen([sys.executable, "-m", "tracelake", "serve", "--lake", str(lake)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not (lake / "_serve" / "engine.json").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            return None
        time.sleep(0.1)
    return process


def _figures(name: str, src: Path, lake: Path, repeat: int, demo: bool, work: Path) -> dict[str, float | None]:
    figures: dict[str, float | None] = {"--help": _median(src, repeat, "--help")}
    figures["query (own engine)"] = _median(src, repeat, "query", QUERY, "--lake", str(lake))
    server = _served(src, lake)
    if server is None:
        figures["query (served)"] = None
    else:
        try:
            ours, peer = [], []
            for _ in range(repeat):  # A B A B: the machine's drift hits both alike
                ours.append(_run(src, "query", QUERY, "--lake", str(lake)))
                if DUCKDB.exists():
                    peer.append(_timed([str(DUCKDB), "-csv", "-c", _duckdb_sql(lake)]))
            figures["query (served)"] = statistics.median(ours)
            if peer:
                figures["duckdb -c, same files"] = statistics.median(peer)
                figures["served / duckdb"] = figures["query (served)"] / figures["duckdb -c, same files"]
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    if demo:
        folder = work / f"demo-{name}"
        folder.mkdir()
        figures["demo"] = _run(src, "demo", "--lake", str(folder / "lake"), cwd=folder)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="also time this git revision (e.g. HEAD, main)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lake", help="lake to query (default: a small generated ITP lake)")
    parser.add_argument("--demo", action="store_true", help="also time `tracelake demo` (once per tree)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-") as tmp:
        work = Path(tmp)
        here = REPO / "src"
        lake = Path(args.lake) if args.lake else work / "lake"
        if not args.lake:
            _run(here, "generate", "itp", "--out", str(work / "raw"), "--scale", "0.02")
            _run(here, "ingest", "itp", "--raw", str(work / "raw"), "--lake", str(lake))
        trees = {"working tree": here}
        if args.rev:
            (work / "rev").mkdir()
            trees[args.rev] = export_rev(args.rev, work / "rev")
        results = {name: _figures(f"t{i}", src, lake, args.repeat, args.demo, work)
                   for i, (name, src) in enumerate(trees.items())}
    names = list(results)
    print(f"{'seconds (median of ' + str(args.repeat) + ')':<28}" + "".join(f"{n:>16}" for n in names))
    for figure in results[names[0]]:
        cells = [results[n].get(figure) for n in names]
        print(f"{figure:<28}" + "".join(f"{'-' if c is None else f'{c:.2f}':>16}" for c in cells))


if __name__ == "__main__":
    main()
