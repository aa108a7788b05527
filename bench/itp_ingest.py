"""Ingest throughput for the ITP/ElasticFlow archives: tracelake on the embedded engine versus
DuckDB reading the same CSVs, in one run so the ratio is visible. Prints figures; asserts nothing.

    python bench/itp_ingest.py [--raw DIR] [--repeat 3]

--raw defaults to ../shared/data/elasticflow; without it, archives are generated at release size.
tracelake's figure is the whole ingest (unpack, parse, quality gate, quarantine, Delta MERGE);
DuckDB's are a typed CSV read into a table, and a CSV → Parquet conversion.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RUST_LOG", "error")

from tracelake.config import load_config  # noqa: E402
from tracelake.engine import start_engine  # noqa: E402
from tracelake.io.archives import extract_members  # noqa: E402
from tracelake.run.pipeline import run_ingest  # noqa: E402
from tracelake.run.registry import generate  # noqa: E402
from tracelake.sources.itp import ELASTICFLOW_ARCHIVE, RAW_ARCHIVE  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RAW_TYPES = {"job_id": "VARCHAR", "submission_time": "BIGINT", "duration": "BIGINT", "num_gpu": "INTEGER"}
EF_TYPES = {"job_id": "VARCHAR", "submission_time": "BIGINT", "num_iteration": "BIGINT", "model_name": "VARCHAR",
            "deadline": "BIGINT", "batch_size": "INTEGER", "num_gpu": "INTEGER", "duration": "BIGINT"}


def _raw_dir(arg: str | None, work: Path) -> tuple[Path, str]:
    default = REPO.parent / "shared" / "data" / "elasticflow"
    chosen = Path(arg) if arg else default
    if (chosen / RAW_ARCHIVE).is_file():
        return chosen, f"real archives in {chosen}"
    generate("itp", work / "generated", scale=1.0, seed=0)
    return work / "generated", "generated archives at release size (real ones not found)"


def _tracelake(raw: Path, work: Path, repeat: int) -> tuple[list[float], int]:
    times, rows = [], 0
    config0 = load_config(profile="local", overrides={"lake_root": str(work / "lake-warm")})
    with start_engine(config0) as engine:
        run_ingest(engine, config0, "itp", str(raw))  # warm-up: imports, GX context, first plans
        for i in range(repeat):
            config = load_config(profile="local", overrides={"lake_root": str(work / f"lake-{i}")})
            start = time.perf_counter()
            stats = run_ingest(engine, config, "itp", str(raw))
            times.append(time.perf_counter() - start)
            rows = sum(s.rows_read for s in stats)
    return times, rows


def _duckdb(raw: Path, work: Path, repeat: int) -> tuple[list[float], list[float], int]:
    import duckdb

    csv_raw = extract_members(raw / RAW_ARCHIVE, work / "csv-raw", lambda n: n.endswith(".csv"))
    csv_ef = extract_members(raw / ELASTICFLOW_ARCHIVE, work / "csv-ef", lambda n: n.endswith(".csv"))
    groups = [(sorted(map(str, csv_raw.values())), RAW_TYPES), (sorted(map(str, csv_ef.values())), EF_TYPES)]
    read_times, parquet_times, rows = [], [], 0
    for i in range(repeat):
        con = duckdb.connect()
        start = time.perf_counter()
        rows = 0
        for j, (files, types) in enumerate(groups):
            con.execute(f"CREATE TABLE t{j} AS SELECT * FROM read_csv(?, header=true, columns=?, filename=true)",
                        [files, types])
            rows += con.execute(f"SELECT count(*) FROM t{j}").fetchone()[0]
        read_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        for j, (files, types) in enumerate(groups):
            out = work / f"duck-{i}-{j}.parquet"
            con.execute(f"COPY (SELECT * FROM read_csv({files!r}, header=true, columns={types!r}, filename=true)) "
                        f"TO '{out}' (FORMAT parquet)")
        parquet_times.append(time.perf_counter() - start)
        con.close()
    return read_times, parquet_times, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-") as tmp:
        work = Path(tmp)
        raw, origin = _raw_dir(args.raw, work)
        print(f"input: {origin}")
        ours, rows = _tracelake(raw, work, args.repeat)
        ours_med = statistics.median(ours)
        print(f"tracelake ingest itp (local/Sail, gate + Delta MERGE): {rows:,} rows, "
              f"median {ours_med:.2f} s of {args.repeat} -> {rows / ours_med:,.0f} rows/s")
        try:
            duck_read, duck_pq, duck_rows = _duckdb(raw, work, args.repeat)
        except ImportError:
            print("duckdb not installed: pip install -e '.[bench]' for the comparison")
            return
        read_med, pq_med = statistics.median(duck_read), statistics.median(duck_pq)
        print(f"duckdb typed CSV read into a table: {duck_rows:,} rows, median {read_med:.2f} s "
              f"-> {duck_rows / read_med:,.0f} rows/s")
        print(f"duckdb CSV -> Parquet: median {pq_med:.2f} s -> {duck_rows / pq_med:,.0f} rows/s")
        print(f"ratio tracelake / duckdb read: {(rows / ours_med) / (duck_rows / read_med):.3f}x; "
              f"/ duckdb parquet: {(rows / ours_med) / (duck_rows / pq_med):.3f}x")


if __name__ == "__main__":
    main()
