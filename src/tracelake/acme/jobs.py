"""AcmeTrace jobs (placeholder until implemented)."""

from __future__ import annotations

from pathlib import Path

DERIVED: list = []


def plan(raw_dir: Path, staging: Path) -> list:
    """TableInputs for the jobs files found in raw_dir; [] when there are none."""
    return []
