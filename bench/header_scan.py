"""What io.text.read_lines' look for a repeated header line costs beside the engine's read of the
same lines: a generated CSV of port-counter-like lines, the Python scan and the engine's count of
read_lines' rows timed alternately, A B A B.

    .venv/bin/python bench/header_scan.py [--mb 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

HEADER = "st_time,save_time,DeviceName,PortName,ifHCInOctets,ifHCOutOctets,ifHCInPkts,ifHCOutPkts,speed,status"
LINE = "2024-05-24 12:00:00.9,1716523200900,Leaf-1.GPU.S9825,FourHundredGigE1/0/40,{0},{0},31239,31239,400000,up\n"


def write_csv(path: Path, size_mb: int) -> int:
    """A file of about `size_mb` MB; its line count."""
    block = "".join(LINE.format(10**12 + i) for i in range(10_000)).encode()
    n = 0
    with open(path, "wb") as fh:
        fh.write(f"{HEADER}\n".encode())
        while fh.tell() < size_mb << 20:
            fh.write(block)
            n += 10_000
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("RUST_LOG", "error")
    from tracelake.config import load_config
    from tracelake.engine import start_engine
    from tracelake.io.text import RawFile, header_lines_again, read_lines

    with tempfile.TemporaryDirectory() as tmp, \
            start_engine(load_config(profile="local", overrides={"lake_root": f"{tmp}/lake"})) as engine:
        spark = engine.spark
        path = Path(tmp) / "ports.csv"
        lines = write_csv(path, args.mb)
        raw = RawFile(str(path), "ports.csv")
        scan, engine = [], []
        for _ in range(args.rounds):
            t = time.perf_counter()
            assert header_lines_again(path, HEADER, loose=True) == []
            scan.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert read_lines(spark, [raw], HEADER).count() == lines
            engine.append(time.perf_counter() - t)
        print(f"{args.mb} MB, {lines:,} lines, {args.rounds} rounds alternated")
        print(f"  header scan (Python, one pass)  median {statistics.median(scan):.3f} s  min {min(scan):.3f} s")
        print(f"  engine read_lines + count       median {statistics.median(engine):.3f} s  min {min(engine):.3f} s")
        print(f"  scan / engine read              {statistics.median(scan) / statistics.median(engine):.3f}")


if __name__ == "__main__":
    main()
