"""Where the project's data files (conf/, schemas/, expectations/) live.

They sit at the top of the checkout, beside src/, because they are the single source of truth
that people edit; TRACELAKE_HOME points elsewhere (e.g. a copy shipped to a cluster).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tracelake.errors import TracelakeError


def project_home() -> Path:
    env = os.environ.get("TRACELAKE_HOME")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2])  # a checkout (pip install -e .)
    candidates.append(Path(sys.prefix) / "share" / "tracelake")  # a wheel: its data files land here
    for home in candidates:
        if (home / "schemas").is_dir() and (home / "conf").is_dir():
            return home
    raise TracelakeError(
        "cannot find tracelake's conf/ and schemas/ folders; set TRACELAKE_HOME to the checkout"
    )


def resource_dir(name: str) -> Path:
    return project_home() / name
