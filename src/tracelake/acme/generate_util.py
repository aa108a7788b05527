"""AcmeTrace generator part (placeholder until implemented)."""

from __future__ import annotations

from pathlib import Path


def generate(out: Path, scale: float, seed: int) -> list[Path]:
    return []
