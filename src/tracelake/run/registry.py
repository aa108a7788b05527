"""Finds every source's declaration (`declare()` or `SOURCE` in each package under tracelake.sources) and the
cross-trace one, and answers from them: plans, derived tables, generators and report pages.
Sources are imported by name at run time, so nothing in the kernel imports a source."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from tracelake.errors import TracelakeError

if TYPE_CHECKING:
    from tracelake.api.contract import Derived
    from tracelake.api.source import Source

SOURCES = "tracelake.sources"
CROSS_TRACE = "tracelake.crosstrace"
GENERATOR = "synth"  # a source's generator module: tracelake.sources.<name>.synth
GENERATED = ".tracelake-generated.json"  # in a generator's out folder: the files it wrote (synthetic)


def source_names() -> list[str]:
    """From the folders alone: nothing is imported but the `tracelake.sources` package."""
    package = importlib.import_module(SOURCES)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))


def _declared(module: str) -> Source:
    """A package's `SOURCE`: what its `declare()` returns, built on first use (so that importing
    the package, as `generate` does, loads no engine library) and kept there as `SOURCE`."""
    from tracelake.api.source import Source

    package = importlib.import_module(module)
    source = getattr(package, "SOURCE", None)
    if source is None and callable(getattr(package, "declare", None)):
        source = package.SOURCE = package.declare()
    if not isinstance(source, Source):
        raise TracelakeError(f"{module} declares no SOURCE or declare() (tracelake.api.source.Source)")
    return source


def get_source(name: str) -> Source:
    if name not in source_names():
        raise TracelakeError(f"unknown source '{name}' (known: {', '.join(source_names())})")
    source = _declared(f"{SOURCES}.{name}")
    if source.name != name:
        raise TracelakeError(f"{SOURCES}.{name} declares itself as '{source.name}'")
    return source


def declarations() -> list[Source]:
    """The cross-trace declaration, then every source's, in name order. Read at call time, so a
    test may narrow a source's derived tables."""
    return [_declared(CROSS_TRACE)] + [get_source(name) for name in source_names()]


def generator_names() -> list[str]:
    """The sources with a `synth` module, found in their folders without importing them (the
    command line lists them before it loads anything heavy)."""
    package = importlib.import_module(SOURCES)
    return [name for name in source_names()
            if any(m.name == GENERATOR for m in pkgutil.iter_modules([str(Path(package.__path__[0]) / name)]))]


def generate(
    source: str, out: str | Path, scale: float = 1.0, seed: int = 0, reference: str | None = None,
    say: Callable[[str], object] = lambda _: None, **options,
) -> list[Path]:
    """Synthetic raw files in the source's format; options are generator-specific (hours,
    tasks, …), None values left out. `reference` is the real release's folder (conf raw_roots),
    passed to generators that copy or follow real parts of it (a synth module's
    `follows_reference(folder)` says what it takes, or None; zhejiang: the topology), and `say`
    is told so in one line. Imports the generator module only, not the source's
    parsers or the engine."""
    if source not in generator_names():
        raise TracelakeError(f"no generator for '{source}' (known: {', '.join(generator_names())})")
    if scale <= 0:
        raise TracelakeError("--scale must be positive")
    synth = importlib.import_module(f"{SOURCES}.{source}.{GENERATOR}")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    follows = getattr(synth, "follows_reference", None)  # what a generator takes of the real release
    taken = follows(Path(reference)) if reference and follows is not None else None
    if taken:
        options["reference"] = reference
        say(f"generate {source}: {taken} (conf raw_roots.{source})")
    replaces = getattr(synth, "replaces", None)  # the paths a generator writes over, whatever is there
    if replaces is not None:
        _refuse_foreign(source, out_dir, replaces(out_dir))
    written = synth.generate(out_dir, scale, seed, **{k: v for k, v in options.items() if v is not None})
    _mark_generated(out_dir, written)
    return written


def truth_lines(spark, source: str, raw_dir: str | Path) -> list[str]:
    """What a generated world's answers say of the lake built from it: a synth module's
    `held_against_truth(spark, raw_dir)` line, for the demo; [] for a source without one or a
    folder the generator did not write."""
    if source not in generator_names():
        return []
    check = getattr(importlib.import_module(f"{SOURCES}.{source}.{GENERATOR}"), "held_against_truth", None)
    line = check(spark, Path(raw_dir)) if check is not None else None
    return [line] if line else []


def _refuse_foreign(source: str, out_dir: Path, paths: list[Path]) -> None:
    """Stop before a generator writes over a file it did not write (a real release's archive, say):
    the next ingest would load the synthetic rows as the real trace. Files an earlier generate
    wrote (GENERATED) are replaced as before; a folder counts by the files in it."""
    ours = set(generated_names(out_dir))
    present: list[str] = []
    for path in paths:
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.exists() else []
        present += [p.relative_to(out_dir).as_posix() for p in found]
    foreign = [name for name in present if name not in ours]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise TracelakeError(
            f"{out_dir} holds {', '.join(foreign[:3])}{more}, which no generator wrote: generate {source} would "
            f"write over {'them' if len(foreign) > 1 else 'it'}; choose an empty --out (real files are never replaced)")


def _mark_generated(out_dir: Path, written: list[Path]) -> None:
    """Name the files a generator wrote in its folder (GENERATED), so an ingest of the folder
    knows which inputs are synthetic (generated_names) and the report can say so."""
    import json

    marker = out_dir / GENERATED
    names = set(generated_names(out_dir))
    for path in written:
        try:
            names.add(str(Path(path).resolve().relative_to(out_dir.resolve())))
        except ValueError:
            continue
    marker.write_text(json.dumps(sorted(names), indent=0) + "\n", encoding="utf-8")


def generated_names(raw_dir: Path) -> list[str]:
    """The files of `raw_dir` a generator wrote (relative paths; [] when none or unreadable)."""
    import json

    try:
        names = json.loads((Path(raw_dir) / GENERATED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def all_derived() -> list[Derived]:
    """Every derived table, each after the derived tables it reads (declaration order otherwise:
    every source's, then the cross-trace ones)."""
    found = declarations()
    declared = [d for s in found[1:] + found[:1] for d in s.derived]
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


def explain_modules() -> list[ModuleType]:
    """The modules behind `tracelake explain`, of the sources that have one."""
    return [importlib.import_module(s.explain) for s in declarations() if s.explain]


def report_modules() -> list[ModuleType]:
    """Report pages: the cross-trace page, then each source's that has one."""
    return [importlib.import_module(s.report) for s in declarations() if s.report]
