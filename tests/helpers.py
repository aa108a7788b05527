"""Small builders for test inputs."""

from __future__ import annotations

import io
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
