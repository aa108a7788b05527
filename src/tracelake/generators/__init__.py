"""Synthetic raw files in each source's real format, for files that are not public and for
machines without the real releases. Deterministic for a given seed. Every module in this package
is one generator, named after its source, with generate(out_dir, scale, seed, **options) -> written
paths."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from tracelake.errors import TracelakeError


def generator_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def generate(source: str, out: str | Path, scale: float = 1.0, seed: int = 0, **options) -> list[Path]:
    """options: generator-specific settings (e.g. hours, tasks); None values are left out."""
    if source not in generator_names():
        raise TracelakeError(f"no generator for '{source}' (known: {', '.join(generator_names())})")
    if scale <= 0:
        raise TracelakeError("--scale must be positive")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    module = importlib.import_module(f"tracelake.generators.{source}")
    return module.generate(out_dir, scale, seed, **{k: v for k, v in options.items() if v is not None})
