"""Zhejiang cluster_2000_A100: the non-public hourly CSVs, more task folders and per-port hours,
consistent with the real topology, plus a ground-truth manifest."""

from __future__ import annotations

from pathlib import Path

from tracelake.zhejiang.generate import generate as _generate


def generate(out: Path, scale: float, seed: int, hours: int = 1, tasks: int = 3) -> list[Path]:
    return _generate(out, scale, seed, hours=hours, tasks=tasks)
