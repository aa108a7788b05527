"""Shared pieces of the deployment tests: a Sail Spark Connect server in its own process group
on 127.0.0.1 (stopped by PID with bounded waits), lake readers that do not need a session."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from helpers import child_environ

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
TRACELAKE = [sys.executable, "-m", "tracelake"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process_group(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM the process group, then SIGKILL after `timeout`; never waits unbounded."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def sail_server(log: Path, workers: int = 0) -> Iterator[str]:
    """`sail spark server` on a free 127.0.0.1 port; with workers > 0 in local-cluster mode
    (a driver and that many workers in one process). Yields the sc:// URL."""
    port = free_port()
    env = {**child_environ(), "RUST_LOG": os.environ.get("SAIL_TEST_LOG", "info")}
    if workers:
        env |= {"SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": str(workers)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(VENV_BIN / "sail"), "spark", "server", "--ip", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    try:
        wait_listening(proc, port, log, "sail server", 30)
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop_process_group(proc)


def wait_listening(proc: subprocess.Popen, port: int, log: Path, name: str, timeout: float) -> None:
    """Until a server we started listens on its 127.0.0.1 port; its log's end if it exits or is too slow."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not listen on {port} within {timeout:.0f} s: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)


def run(cmd: list[str], env: dict | None = None, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = {**child_environ(), "RUST_LOG": "error", **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=timeout, cwd=cwd or REPO)


def tracelake(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return run([*TRACELAKE, *args], env=env, timeout=timeout)


def delta_versions(lake: Path) -> dict[str, int]:
    """layer.table -> current Delta version, read with `deltalake` (no engine needed)."""
    from deltalake import DeltaTable

    out = {}
    for log in sorted(lake.glob("*/*/_delta_log")):
        table = log.parent
        out[f"{table.parent.name}.{table.name}"] = DeltaTable(str(table)).version()
    return out


def table_rows(lake: Path, name: str, drop: tuple[str, ...] = ("ingest_ts", "ingest_run_id")) -> list[tuple]:
    """Every row of a table, sorted, without the per-run lineage columns; its values in the order
    of the column names, since writers store columns in different orders (a table the local
    profile creates keeps the schema file's; one made by a frame write has its partition
    columns last)."""
    from deltalake import DeltaTable

    layer, table = name.split(".", 1)
    data = DeltaTable(str(lake / layer / table)).to_pyarrow_table()
    keep = sorted(c for c in data.column_names if c not in drop)
    rows = data.select(keep).to_pylist()
    return sorted((tuple(r.values()) for r in rows), key=repr)


def fingerprint(lake: Path, names: list[str] | None = None) -> dict[str, tuple[int, float]]:
    """Per table: row count and the sum of every numeric column (NaN-free, rounded)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    out = {}
    tables = names or [k for k in delta_versions(lake)]
    for name in tables:
        layer, table = name.split(".", 1)
        data = DeltaTable(str(lake / layer / table)).to_pyarrow_table()
        total = 0.0
        for col in data.column_names:
            column = data[col]
            if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
                value = pc.sum(pc.if_else(pc.is_nan(column.cast(pa.float64())), 0.0, column.cast(pa.float64()))).as_py()
                total += value or 0.0
        out[name] = (data.num_rows, round(total, 3))
    return out


def _significant(value, digits: int = 10):
    """A double at `digits` significant digits: two engines' sums of the same doubles in another
    order (and their quantiles' interpolation) differ in the last bits."""
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")) and value != 0.0:
        return float(f"{value:.{digits}g}")
    return value


def engine_rows(lake: Path, name: str, drop: tuple[str, ...] = ("ingest_ts", "ingest_run_id")) -> list[tuple]:
    """Every row of a table as two engines' tables share it: columns by name (Sail stores a
    table's partition columns last, delta-spark where the schema file puts them), every double
    at 10 significant digits, sorted; without the per-run lineage columns."""
    from deltalake import DeltaTable

    layer, table = name.split(".", 1)
    data = DeltaTable(str(lake / layer / table)).to_pyarrow_table()
    keep = sorted(c for c in data.column_names if c not in drop)
    rows = data.select(keep).to_pylist()
    return sorted((tuple(_significant(v) for v in r.values()) for r in rows), key=repr)
