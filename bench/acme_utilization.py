"""Ingest throughput for AcmeTrace utilization (wide CSV -> long Delta rows): the `tracelake ingest
acme` command, process start to exit, alternated round by round with DuckDB unpivoting the same
files, so that the ratio is measured on the same machine in one run. Prints figures; asserts
nothing.

    python bench/acme_utilization.py [--raw DIR | --size-gb 5 --width 2000 --keep DIR] [--rounds 2] [--rev REV]

Input: `--raw` is a folder with utilization/ and the generator's manifest.json (e.g. one kept by
an earlier `--keep`, or the held-out input of bench/acme_heldout.py: utilization files only, no
IPMI); otherwise files are generated (tracelake.sources.acme.synth.utilization) at
about --size-gb, in a child process. --width is the number of GPU columns of a Seren DCGM file
(the release's are ~2,000: 250 nodes x 8 GPUs; Kalos has half the nodes); the sampling interval
is then chosen to reach the size. Without --width the generator's scale sets both (narrow files).

Each round runs, one after the other (A B A B ...):
  * tracelake: `python -m tracelake ingest acme --raw DIR --lake <fresh lake>` (parse, quality
    gate, quarantine, Delta MERGE; utilization and IPMI power tables; the utilization files in
    one pass per file, acme/widepass.py);
  * with --rev REV: the same command of that git revision's src/ (e.g. the design before it);
  * DuckDB: per file read_csv(all_varchar) + UNPIVOT ... ON COLUMNS(* EXCLUDE Time) (IPMI: EXCLUDE
    Time, IP) + TRY_CAST to double, written to Parquet, 2 threads. DuckDB drops empty cells like
    tracelake, but does no duplicate handling, quality gate or MERGE.
Each is a process of its own: wall from /usr/bin/time; CPU (user + system) and peak RSS summed
over its process tree (the local engine is a child process, which /usr/bin/time does not count),
sampled every 0.2 s.
Rows are non-empty cells (rows read: the manifest's cells of both tables); DuckDB's are the rows
it wrote. The ratio printed is DuckDB's wall / ours (1 = as fast as DuckDB), CPU beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revision import export_rev

REPO = Path(__file__).resolve().parent.parent
PILOT_SCALE = 4.0
PILOT_INTERVAL = 3600
GENERATE = "import sys; from pathlib import Path; from tracelake.sources.acme.synth.utilization import generate; " \
           "generate(Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), *[int(a) or None for a in sys.argv[4:]])"
DUCKDB = """
import sys
from pathlib import Path
import duckdb
raw, out = Path(sys.argv[1]), Path(sys.argv[2])
con = duckdb.connect()
con.execute("SET threads = 2")
rows = 0
for i, path in enumerate(sorted((raw / "utilization").rglob("*.csv"))):
    ids = "Time, IP" if path.parent.name == "ipmi" else "Time"
    target = out / f"{i}.parquet"
    con.execute(
        f"COPY (SELECT Time, name, TRY_CAST(value AS DOUBLE) AS value FROM ("
        f"UNPIVOT (SELECT * FROM read_csv('{path}', header = true, all_varchar = true)) "
        f"ON COLUMNS(* EXCLUDE ({ids})) INTO NAME name VALUE value)) TO '{target}' (FORMAT parquet)")
    rows += con.execute(f"SELECT count(*) FROM '{target}'").fetchone()[0]
print(rows)
"""
TIME_FORMAT = "%e %U %S %M"  # wall s, user s, system s, peak RSS KiB of the largest single process


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
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def generate_at_size(work: Path, size_gb: float, seed: int, width: int | None) -> tuple[Path, float]:
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
        _generate(raw, 0.0, seed, nodes, interval)
    return raw, time.perf_counter() - start


PAGE = os.sysconf("SC_PAGE_SIZE")


TICKS = os.sysconf("SC_CLK_TCK")


def tree_usage(root: int, cpu: dict[int, float]) -> int:
    """Resident bytes of a process and all its descendants (the local engine runs in a child of
    the command, so the command's own peak is not the run's); records in `cpu` each one's CPU
    seconds so far (user + system)."""
    parents, rss, used = {}, {}, {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry.name}/statm", encoding="ascii") as fh:
                rss[int(entry.name)] = int(fh.read().split()[1]) * PAGE
            parents[int(entry.name)] = int(fields[1])
            used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
        except (OSError, IndexError, ValueError):
            continue
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += rss.get(pid, 0)
        if pid in used:
            cpu[pid] = max(cpu.get(pid, 0.0), used[pid])
        todo += children.get(pid, [])
    return total


def timed(command: list[str], env: dict) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the command and every process under it, peak RSS bytes of its process
    tree, stdout) of a command run under /usr/bin/time, the tree sampled every 0.2 s (the local
    engine is a child process that /usr/bin/time does not count)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report, \
            tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(["/usr/bin/time", "-f", TIME_FORMAT, "-o", report.name, *command], env=env,
                                   stdout=out, stderr=err, text=True)
        peak, cpu = 0, {}
        while process.poll() is None:
            peak = max(peak, tree_usage(process.pid, cpu))
            time.sleep(0.2)
        if process.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(command[:5])} failed ({process.returncode}):\n{err.read()[-3000:]}")
        wall, user, system, _ = report.read().split()[-4:]
        out.seek(0)
        err.seek(0)
        steps = [line.strip() for line in err.read().splitlines() if line.startswith("tracelake: ✓")]
        return float(wall), max(float(user) + float(system), sum(cpu.values())), peak, "\n".join([out.read(), *steps])


def ingest(src: Path, raw: Path, work: Path) -> tuple[float, float, int]:
    lake = work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(src), "RUST_LOG": "error", "TRACELAKE_PROFILE": "local"}
    wall, cpu, rss, output = timed([sys.executable, "-m", "tracelake", "ingest", "acme", "--raw", str(raw),
                                    "--lake", str(lake)], env)
    shutil.rmtree(lake, ignore_errors=True)
    for line in output.splitlines():  # the run's steps, as it printed them (where the time went)
        if line.startswith("tracelake: ✓"):
            print(f"      {line.removeprefix('tracelake: ✓ ')}")
    return wall, cpu, rss


def duckdb_unpivot(raw: Path, work: Path) -> tuple[float, float, int, int]:
    out = work / "duck"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    wall, cpu, rss, stdout = timed([sys.executable, "-c", DUCKDB, str(raw), str(out)], dict(os.environ))
    shutil.rmtree(out)
    return wall, cpu, rss, int(stdout.split()[-1])


def _line(label: str, rows: int, wall: float, cpu: float, rss: int) -> None:
    print(f"  {label}: {rows:,} rows in {wall:.1f} s -> {rows / wall:,.0f} rows/s (cpu {cpu:.1f} s, "
          f"peak RSS {_gb(rss)})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", help="a folder with utilization/ and its manifest.json (no generation)")
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--width", type=int, help="GPU columns of a Seren DCGM file (the release's: ~2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="generate into this folder and keep it (reused if present)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of A B (default 2)")
    parser.add_argument("--rev", help="also run this git revision's ingest each round (e.g. the design before)")
    parser.add_argument("--no-duckdb", action="store_true")
    args = parser.parse_args()
    scratch = Path(args.raw or args.keep or tempfile.gettempdir()).resolve().parent
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-acme-", dir=scratch) as tmp:
        work = Path(tmp)
        given = Path(args.raw or args.keep or work / "none")
        if (given / "utilization" / "manifest.json").is_file():
            raw, gen_s = given, 0.0
        else:
            raw, gen_s = generate_at_size(work, args.size_gb, args.seed, args.width)
            if args.keep:
                shutil.move(str(raw), args.keep)
                raw = Path(args.keep)
        manifest = json.loads((raw / "utilization" / "manifest.json").read_text())
        cells = manifest["bronze.acme_utilization"]["cells"] + manifest["bronze.acme_power"]["cells"]
        print(f"input: {_gb(_du(raw))} of CSV in {sum(1 for _ in raw.rglob('*.csv'))} files "
              f"({manifest['nodes']} Seren nodes, every {manifest['interval_s']} s, widest file "
              f"{_widest(raw):,} columns{f'; generated in {gen_s:.0f} s' if gen_s else ''}); cells "
              f"{manifest['bronze.acme_utilization']['cells']:,} utilization + "
              f"{manifest['bronze.acme_power']['cells']:,} power", flush=True)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
        trees = {"tracelake": REPO / "src"}
        if args.rev:
            (work / "rev").mkdir()
            trees[f"tracelake {args.rev}"] = export_rev(args.rev, work / "rev")
        figures: dict[str, list[tuple]] = {}
        for r in range(args.rounds):
            print(f"round {r + 1}:", flush=True)
            for label, src in trees.items():
                wall, cpu, rss = ingest(src, raw, work)
                figures.setdefault(label, []).append((cells, wall, cpu, rss))
                _line(f"{label} ingest acme (CLI, process start to exit)", cells, wall, cpu, rss)
            if not args.no_duckdb:
                wall, cpu, rss, rows = duckdb_unpivot(raw, work)
                figures.setdefault("duckdb", []).append((rows, wall, cpu, rss))
                _line("duckdb unpivot (CSV -> long Parquet, 2 threads)", rows, wall, cpu, rss)
        print("medians:")
        medians = {label: tuple(statistics.median(run[i] for run in runs) for i in range(4))
                   for label, runs in figures.items()}
        for label, (rows, wall, cpu, _) in medians.items():
            _line(label, int(rows), wall, cpu, max(run[3] for run in figures[label]))
        if "duckdb" in medians:
            _, d_wall, d_cpu, _ = medians["duckdb"]
            for label in trees:
                _, wall, cpu, _ = medians[label]
                print(f"DuckDB ÷ {label} (wall / CPU): {d_wall / wall:.2f} / {d_cpu / cpu:.2f}")
        print(f"load average at end {os.getloadavg()[0]:.1f} (other processes share these cores)")


if __name__ == "__main__":
    main()
