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
    full_env = {**os.environ, "RUST_LOG": "error", **(env or {})}
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True,
                          env=full_env, timeout=300)


def rows(stdout: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(stdout)))
