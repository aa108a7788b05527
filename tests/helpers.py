"""Small builders for test inputs."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ITP_HEADER = "job_id,submission_time,duration,num_gpu"
ID = "{:08x}-0000-4000-8000-{:012x}"


def job_id(n: int) -> str:
    return ID.format(n, n)


def write_archive(path: Path, members: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def itp_csv(rows: list[str]) -> str:
    return "\n".join([ITP_HEADER, *rows])


def tracelake(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: its own process, its own engine."""
    full_env = {**child_environ(), "RUST_LOG": "error", **(env or {})}
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True,
                          env=full_env, timeout=300)


def rows(stdout: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(stdout)))


def child_environ() -> dict[str, str]:
    """This process's environment for a child, without pyspark's marks of this process's own
    Spark Connect session (set once the test run's local engine starts): a child inherits no session."""
    from tracelake.engine import CONNECT_MODE_MARKS

    return {k: v for k, v in os.environ.items() if k not in CONNECT_MODE_MARKS}


def tracelake_in_process(engine, *args: str, start=None) -> subprocess.CompletedProcess:
    """The CLI's own main() in this process, on the test run's one engine instead of a new one
    per command (a command for another profile starts its own): the same parsing, errors, exit codes and output as `tracelake(...)`, without
    a process and an engine start per call. The engine's runtime settings are the command's
    own (its configuration's spark_conf, as the CLI would set them) for the call, and put back
    after it; the SIGINT and SIGTERM handlers main() installs are put back too. `start`, when
    given, is the command's engine start instead (config -> Engine)."""
    import contextlib
    import signal
    from unittest import mock

    from tracelake.app import cli
    from tracelake.engine import Engine, start_engine

    spark = engine.spark
    saved: dict[str, str | None] = {}
    if engine.profile != "local" and "--profile" not in args and args and args[0] not in ("describe", "generate"):
        # the run's profile, as the run's engine is: a local engine started here would turn this
        # process's pyspark to Spark Connect for good (SPARK_CONNECT_MODE_ENABLED)
        args = (*args, "--profile", engine.profile)

    def shared_engine(config):
        if config.profile != engine.profile:  # another profile asked for: its own engine, as the CLI does
            return start_engine(config)
        for key, value in config.spark_conf.items():
            saved.setdefault(key, spark.conf.get(key, None))
            try:
                spark.conf.set(key, value)
            except Exception as exc:  # noqa: BLE001 - a static or core setting a live session refuses, as the CLI skips it
                if "CANNOT_MODIFY" not in str(exc):
                    raise
                saved.pop(key, None)
        return Engine(engine.profile, spark, _owns_session=False)

    out, err = io.StringIO(), io.StringIO()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with mock.patch("tracelake.engine.start_engine", start or shared_engine), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse's usage errors end the process
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for key, value in saved.items():
            if value is not None:
                spark.conf.set(key, value)
    return subprocess.CompletedProcess(["tracelake", *args], code, out.getvalue(), err.getvalue())


def run_measuring_peak(args: list[str], stdout, timeout_s: float = 600) -> tuple[int, str, int]:
    """(exit code, stderr, peak resident bytes of the whole process tree) of the CLI run as a
    process of its own, the tree sampled every 20 ms: the command and its engine together."""
    import time

    import psutil

    process = subprocess.Popen([sys.executable, "-m", "tracelake", *args], stdout=stdout, stderr=subprocess.PIPE,
                               env={**child_environ(), "RUST_LOG": "error"})
    watched, peak, deadline = psutil.Process(process.pid), 0, time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        total = 0
        for member in [watched, *watched.children(recursive=True)]:
            try:
                total += member.memory_info().rss
            except psutil.Error:  # a child that just ended
                continue
        peak = max(peak, total)
        time.sleep(0.02)
    if process.poll() is None:
        process.kill()
    err = process.communicate()[1].decode()
    return process.returncode, err, peak


def ingest_then_next_hour(engine, config, tmp_path: Path, **world) -> tuple[list[str], dict]:
    """A generated two-hour Zhejiang world ingested as a scheduler would: workbook, task logs and
    the first hour by a full run, then the second hour by `--hours`. Returns (the hour folders,
    the second run's stats by table)."""
    import shutil

    from tracelake.run.pipeline import run_ingest
    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate("zhejiang", raw, hours=2, **world)
    hours = sorted(p.name for p in (raw / "trafficinfo").iterdir())
    aside = tmp_path / "aside"
    shutil.move(raw / "trafficinfo" / hours[1], aside)
    run_ingest(engine, config, "zhejiang", str(raw))
    shutil.move(aside, raw / "trafficinfo" / hours[1])
    return hours, {s.table: s for s in run_ingest(engine, config, "zhejiang", str(raw), hours=hours[1])}
