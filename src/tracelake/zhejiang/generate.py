"""Zhejiang generator entry (placeholder until implemented)."""

from __future__ import annotations

from pathlib import Path


def generate(out: Path, scale: float, seed: int, hours: int = 1, tasks: int = 3) -> list[Path]:
    return []
