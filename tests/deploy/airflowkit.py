"""Airflow as a user installs it, for the deployment tests: its own virtualenv (cached under
~/.cache/tracelake, keyed by deploy/airflow/requirements.txt, so only the first run installs it)
and the environment that points it at a fresh AIRFLOW_HOME and our DAG folder."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import child_environ

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "deploy" / "airflow" / "dags"
PINS = ROOT / "deploy" / "airflow" / "requirements.txt"
PROJECT_VENV = Path(sys.executable).parent.parent


def airflow_venv() -> Path:
    key = hashlib.sha256(PINS.read_bytes()).hexdigest()[:12]
    venv = Path(os.environ.get("TRACELAKE_AIRFLOW_VENV", Path.home() / ".cache" / "tracelake" / f"airflow-{key}"))
    if not (venv / ".complete").is_file():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "-r", str(PINS)],
                             capture_output=True, text=True, timeout=900)
        if pip.returncode != 0:
            if "No matching distribution" in pip.stderr or "Could not find" in pip.stderr or "connection" in pip.stderr.lower():
                pytest.skip(f"Airflow could not be installed from the package index: {pip.stderr.strip()[-300:]}")
            raise AssertionError(pip.stderr[-3000:])
        (venv / ".complete").write_text(PINS.read_text())
    return venv


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for every Airflow process of one test: its home, SQLite metadata DB and
    our DAGs; tracelake from the project's virtualenv."""
    env = {**child_environ(), "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW_VAR_TRACELAKE_VENV": str(PROJECT_VENV),
           "RUST_LOG": "error", **extra}
    return env
