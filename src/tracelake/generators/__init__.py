"""Synthetic raw files in each source's real format, for files that are not public and for
machines without the real releases. Deterministic for a given seed."""

from __future__ import annotations

from pathlib import Path

from tracelake.errors import TracelakeError


def generate(source: str, out: str | Path, scale: float = 1.0, seed: int = 0) -> list[Path]:
    from tracelake.generators import itp, zeus

    makers = {"itp": itp.generate, "zeus": zeus.generate}
    if source not in makers:
        raise TracelakeError(f"no generator for '{source}' (known: {', '.join(sorted(makers))})")
    if scale <= 0:
        raise TracelakeError("--scale must be positive")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    return makers[source](out_dir, scale, seed)
