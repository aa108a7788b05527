"""A git revision's code for the benches' old-against-new runs."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def export_rev(rev: str, into: Path) -> Path:
    """`src/` of a git revision (with the conf/, schemas/ and expectations/ it reads), as git stores it."""
    archive = into / "rev.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), rev,
                    "src", "conf", "schemas", "expectations"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"
