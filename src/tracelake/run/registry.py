"""Finds each source's plan, derived tables, generator and report page, and the cross-trace
package's; the CLI, pipeline and report ask here instead of importing sources by name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

from tracelake import crosstrace, sources
from tracelake.api.contract import Derived
from tracelake.errors import TracelakeError


def source_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(sources.__path__) if not m.name.startswith("_"))


def get_source(name: str) -> ModuleType:
    if name not in source_names():
        raise TracelakeError(f"unknown source '{name}' (known: {', '.join(source_names())})")
    return importlib.import_module(f"tracelake.sources.{name}")


def _optional(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:  # the module exists but one of its imports is missing
            raise
        return None


def generator_names() -> list[str]:
    return [n for n in source_names() if _optional(f"tracelake.sources.{n}.synth") is not None]


def generate(
    source: str, out: str | Path, scale: float = 1.0, seed: int = 0, reference: str | None = None, **options
) -> list[Path]:
    """Synthetic raw files in the source's format; options are generator-specific (hours,
    tasks, …), None values left out. `reference` is the real release's folder (conf raw_roots),
    passed to generators that copy or follow real parts of it (zhejiang: the topology)."""
    if source not in generator_names():
        raise TracelakeError(f"no generator for '{source}' (known: {', '.join(generator_names())})")
    if scale <= 0:
        raise TracelakeError("--scale must be positive")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    synth = importlib.import_module(f"tracelake.sources.{source}.synth")
    if reference and "reference" in inspect.signature(synth.generate).parameters:
        options["reference"] = reference
    return synth.generate(out_dir, scale, seed, **{k: v for k, v in options.items() if v is not None})


def all_derived() -> list[Derived]:
    """Every derived table, each after the derived tables it reads (declaration order otherwise).
    Read at call time, so a test may narrow a source's DERIVED."""
    declared = [d for name in source_names() for d in get_source(name).DERIVED] + list(crosstrace.DERIVED)
    produced = {d.table for d in declared}
    ordered: list[Derived] = []
    done: set[str] = set()
    pending = declared
    while pending:
        ready = [d for d in pending if not (produced & set(d.inputs)) - done - {d.table}]
        if not ready:
            raise TracelakeError(f"derived tables depend on each other in a cycle: {[d.table for d in pending]}")
        first = ready[0]
        ordered.append(first)
        done.add(first.table)
        pending = [d for d in pending if d is not first]
    return ordered


def report_modules() -> list[ModuleType]:
    """Report pages: the cross-trace page, then each source's `report` module that exists."""
    found = [_optional(f"tracelake.sources.{n}.report") for n in source_names()]
    return [importlib.import_module("tracelake.crosstrace.report")] + [m for m in found if m is not None]
