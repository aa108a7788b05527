"""What `tracelake ingest SOURCE` does: plan the source's files, ingest each bronze table,
rebuild its derived tables. Shared by the CLI, jobs/ scripts, Airflow and notebooks."""

from __future__ import annotations

import inspect
import re
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from tracelake import lake
from tracelake.config import Config
from tracelake.contract import Derived, Partitions
from tracelake.engine import Engine
from tracelake.errors import TracelakeError
from tracelake.ingest import Run, TableStats, commit_table, prepare_table, publish_derived
from tracelake.lock import lake_write_lock
from tracelake.registry import all_derived, get_source

Step = Callable[[str], object]  # progress callback: called with a label, returns a context


def raw_dir_for(config: Config, source: str, raw: str | None) -> Path:
    chosen = raw or config.raw_roots.get(source)
    if not chosen:
        raise TracelakeError(f"no raw folder for '{source}': pass --raw DIR")
    path = Path(chosen).expanduser()
    if path.exists() and not path.is_dir():
        raise TracelakeError(f"raw folder {path} is a file, not a folder: pass the folder that holds the source's files")
    if not path.is_dir():
        raise TracelakeError(f"raw folder {path} does not exist")
    return path


RUN_FOLDER = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")  # Run.new's run ids
SHARED_STAGING_STALE_S = 6 * 3600  # a staging folder shared by several lakes: older runs only


def remove_stale_staging(config: Config, keep: Path) -> list[Path]:
    """Staging folders of earlier runs that were killed before their cleanup. Called while the
    lake's write lock is held, so in the lake's own staging folder no other run can be using
    them; in a staging folder set apart (staging_dir), only runs older than a few hours go."""
    root = Path(config.staging_dir)
    if not root.is_dir():
        return []
    own = root.resolve() == (Path(config.lake_root) / "_staging").resolve()
    now = time.time()
    stale = [
        p for p in root.iterdir()
        if p != keep and RUN_FOLDER.match(p.name) and p.is_dir() and not p.is_symlink()
        and (own or now - p.stat().st_mtime > SHARED_STAGING_STALE_S)
    ]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def _changed(stats: list[TableStats]) -> dict[str, Partitions | None]:
    return {s.table: s.partitions for s in stats}


def rebuild_derived(
    engine: Engine, config: Config, run: Run, derived: list[Derived],
    changed: dict[str, Partitions | None], step: Step,
) -> list[TableStats]:
    """Rebuild each derived table one of whose inputs changed in this run, in list order
    (registry.all_derived puts every table after the tables it reads). `changed` maps a table
    to the partitions that changed (None: the whole table); a table with a partial rebuild
    recomputes only what those partitions affect."""
    stats: list[TableStats] = []
    for item in derived:
        inputs = {t: changed[t] for t in item.inputs if t in changed}
        if not inputs:
            continue
        with step(f"{item.table}: rebuilding"):
            if item.rebuild is not None and all(p is not None for p in inputs.values()):
                result = item.rebuild(engine.spark, config, inputs)
                if result is None:
                    continue
                frame, partitions = result
            else:
                frame, partitions = item.build(engine.spark, config), None
                if frame is None:
                    continue
            stat = publish_derived(engine.spark, config, run, item.table, frame, partitions)
            stats.append(stat)
            changed[item.table] = stat.partitions
    return stats


def _plan(module, source: str, raw_dir: Path, staging: Path, hours: str | None):
    if hours is None:
        return module.plan(raw_dir, staging)
    if "hours" not in inspect.signature(module.plan).parameters:
        raise TracelakeError(f"--hours applies to sources with hour folders (zhejiang), not '{source}'")
    return module.plan(raw_dir, staging, hours=hours)


def run_ingest(
    engine: Engine, config: Config, source: str, raw: str | None, step: Step | None = None,
    hours: str | None = None,
) -> list[TableStats]:
    """Ingest a source's raw folder; `hours` (`H` or `FROM..TO`) limits a source with hour
    folders to those hours."""
    module = get_source(source)
    raw_dir = raw_dir_for(config, source, raw)
    run = Run.new(config)
    step = step or (lambda label: nullcontext())
    stats: list[TableStats] = []
    with lake_write_lock(config, on_wait=lambda message: print(f"tracelake: {message}", file=sys.stderr)):
        remove_stale_staging(config, keep=run.staging)
        try:
            with step(f"unpacking {source} inputs"):
                inputs = _plan(module, source, raw_dir, run.staging, hours)
            prepared = []  # every input parsed and gated before the first write
            for item in inputs:
                with step(f"{item.table}: {len(item.files)} file(s)"):
                    prepared.append(prepare_table(engine.spark, config, run, item.table, item.files, item.parser))
            for table in prepared:
                with step(f"{table.table}: writing"):
                    stats.append(commit_table(engine.spark, config, run, table))
            stats += rebuild_derived(engine, config, run, all_derived(), _changed(stats), step)
        finally:
            run.cleanup()
    lake.register_all(engine.spark, config)
    return stats
