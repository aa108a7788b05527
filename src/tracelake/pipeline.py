"""What `tracelake ingest SOURCE` does: plan the source's files, ingest each bronze table,
rebuild its derived tables. Shared by the CLI, jobs/ scripts, Airflow and notebooks."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Callable

from tracelake import lake
from tracelake.config import Config
from tracelake.engine import Engine
from tracelake.errors import TracelakeError
from tracelake.ingest import Run, TableStats, ingest_table, publish_derived
from tracelake.contract import Derived
from tracelake.registry import all_derived, get_source

Step = Callable[[str], object]  # progress callback: called with a label, returns a context


def raw_dir_for(config: Config, source: str, raw: str | None) -> Path:
    chosen = raw or config.raw_roots.get(source)
    if not chosen:
        raise TracelakeError(f"no raw folder for '{source}': pass --raw DIR")
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise TracelakeError(f"raw folder {path} does not exist")
    return path


def rebuild_derived(
    engine: Engine, config: Config, run: Run, derived: list[Derived], changed: set[str], step: Step
) -> list[TableStats]:
    """Rebuild each derived table one of whose inputs changed in this run, in list order
    (registry.all_derived puts every table after the tables it reads)."""
    stats: list[TableStats] = []
    for item in derived:
        if not changed.intersection(item.inputs):
            continue
        with step(f"{item.table}: rebuilding"):
            frame = item.build(engine.spark, config)
            if frame is None:
                continue
            stats.append(publish_derived(engine.spark, config, run, item.table, frame))
            changed.add(item.table)
    return stats


def run_ingest(
    engine: Engine, config: Config, source: str, raw: str | None, step: Step | None = None
) -> list[TableStats]:
    module = get_source(source)
    raw_dir = raw_dir_for(config, source, raw)
    run = Run.new(config)
    step = step or (lambda label: nullcontext())
    stats: list[TableStats] = []
    try:
        with step(f"unpacking {source} inputs"):
            inputs = module.plan(raw_dir, run.staging)
        for item in inputs:
            with step(f"{item.table}: {len(item.files)} file(s)"):
                stats.append(
                    ingest_table(engine.spark, config, run, item.table, item.files, item.parser)
                )
        stats += rebuild_derived(engine, config, run, all_derived(), {s.table for s in stats}, step)
    finally:
        run.cleanup()
    lake.register_all(engine.spark, config)
    return stats
