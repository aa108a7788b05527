"""An Apache Spark standalone cluster from pyspark's own jars: a master and its workers, each a
`spark-class` process in a process group of its own on 127.0.0.1, stopped by PID.

Only this user can use it: every process and every application share a secret
(`spark.authenticate`), read from a spark-defaults.conf that only we may read (0600, in a 0700
SPARK_CONF_DIR: a secret on a command line would show in any user's `ps`), and the web UIs can
kill nothing."""

from __future__ import annotations

import contextlib
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deploykit import free_port, stop_process_group
from helpers import child_environ

SPARK_CLASS = Path(sys.executable).parent / "spark-class"


@dataclass
class Cluster:
    master: str  # spark://127.0.0.1:PORT
    env: dict[str, str]  # what a spark-submit to it needs: SPARK_CONF_DIR (the secret), SPARK_LOCAL_IP
    logs: Path
    pids: list[int]


def _conf_dir(base: Path) -> Path:
    conf = base / "conf"
    conf.mkdir(mode=0o700, parents=True)
    defaults = conf / "spark-defaults.conf"
    defaults.touch(mode=0o600)
    defaults.write_text(
        "spark.authenticate true\n"
        f"spark.authenticate.secret {secrets.token_hex(16)}\n"
        "spark.ui.killEnabled false\n"
        "spark.ui.enabled false\n"
        "spark.ui.showConsoleProgress false\n")
    return conf


def _wait_for(log: Path, pattern: str, proc: subprocess.Popen, count: int = 1, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if len(re.findall(pattern, text)) >= count:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name}: exited with {proc.returncode}: {text[-2000:]}")
        time.sleep(0.3)
    raise RuntimeError(f"{log.name}: no '{pattern}' x{count} within {timeout} s: {log.read_text(errors='replace')[-2000:]}")


@contextlib.contextmanager
def standalone_cluster(base: Path, workers: int = 2, cores: int = 1, memory: str = "2g") -> Iterator[Cluster]:
    base.mkdir(parents=True, exist_ok=True)
    env = {**child_environ(), "SPARK_CONF_DIR": str(_conf_dir(base)), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(base / "logs"), "SPARK_WORKER_DIR": str(base / "work"),
           "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = base / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
        procs.append(proc)
        return proc, log

    try:
        proc, master_log = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", str(port), "--webui-port", str(free_port()))
        _wait_for(master_log, r"I have been elected leader", proc)
        for i in range(workers):
            start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                  "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                  "--work-dir", str(base / f"work-{i}"))
        _wait_for(master_log, r"Registering worker 127\.0\.0\.1", proc, count=workers)
        yield Cluster(master, {"SPARK_CONF_DIR": env["SPARK_CONF_DIR"], "SPARK_LOCAL_IP": "127.0.0.1"}, base,
                      [p.pid for p in procs])
    finally:
        for proc in reversed(procs):
            stop_process_group(proc)
