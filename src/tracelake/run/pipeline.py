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
from dataclasses import replace
from pathlib import Path

from tracelake.api.contract import Derived, Partitions, TableInput
from tracelake.config import Config
from tracelake.delta import commit as lake
from tracelake.delta.lock import lake_write_lock
from tracelake.engine import Engine
from tracelake.errors import TracelakeError
from tracelake.run.bronze import Run, TableStats, commit_table, prepare_table, publish_derived
from tracelake.run.registry import all_derived, get_source
from tracelake.schema import load_schema

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
                result = item.rebuild(engine.spark, config, inputs, run.staging)
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


HOUR = "hour_cst"  # the constant a file of an hour folder carries (Zhejiang traffic)


def hour_batches(inputs: list[TableInput]) -> list[tuple[str | None, list[TableInput]]]:
    """A run's inputs in the order they are ingested: one batch per hour folder, in hour order,
    the files that belong to no hour (workbook, task logs) with the first. A backfill of a day
    then parses, gates and writes one hour at a time, so its memory is an hour's, not the
    range's (a write of many hour partitions sorts all their rows first, engine-notes.md)."""
    hours = sorted({f.constants[HOUR] for item in inputs for f in item.files if HOUR in f.constants})
    if len(hours) <= 1:
        return [(None, inputs)]
    batches = []
    for i, hour in enumerate(hours):
        wanted = {hour, None} if i == 0 else {hour}
        batches.append((hour, [replace(item, files=files) for item in inputs
                               if (files := [f for f in item.files if f.constants.get(HOUR) in wanted])]))
    return batches


def split_per_hour(derived: list[Derived]) -> tuple[list[Derived], list[Derived]]:
    """(the derived tables rebuilt after each hour: partitioned by hour and reading no table of
    the other kind; the rest, rebuilt once after the last hour from everything that changed)."""
    per_hour, once = [], []
    for item in derived:
        hourly = HOUR in load_schema(item.table).partition_by
        if hourly and not {d.table for d in once} & set(item.inputs):
            per_hour.append(item)
        else:
            once.append(item)
    return per_hour, once


def _joined(a: Partitions | None, b: Partitions | None) -> Partitions | None:
    """The partitions two changes touched together; None (the whole table) wins."""
    return None if a is None or b is None else tuple(sorted({*a, *b}))


def _add_changes(total: dict[str, Partitions | None], changed: dict[str, Partitions | None]) -> None:
    for table, partitions in changed.items():
        total[table] = _joined(total[table], partitions) if table in total else partitions


def merged_stats(stats: list[TableStats]) -> list[TableStats]:
    """One line per table for a run of several hours: counts added, partitions joined."""
    by_table: dict[str, TableStats] = {}
    for s in stats:
        if (seen := by_table.get(s.table)) is None:
            by_table[s.table] = s
            continue
        by_table[s.table] = TableStats(
            s.table, seen.rows_read + s.rows_read, seen.rows_kept + s.rows_kept,
            seen.rows_quarantined + s.rows_quarantined, tuple(dict.fromkeys([*seen.warnings, *s.warnings])),
            tuple(dict.fromkeys([*seen.critical_failures, *s.critical_failures])),
            _joined(seen.partitions, s.partitions))
    return list(by_table.values())


def _ingest_batch(
    engine: Engine, config: Config, run: Run, batch: list[TableInput], per_hour: list[Derived], hour: str,
    step: Step,
) -> list[TableStats]:
    """Prepare every input of the batch before its first write, commit them, rebuild the
    per-hour derived tables; the stats of every table written, with the partitions changed."""
    prepared = []
    for item in batch:
        with step(f"{item.table}: {len(item.files)} file(s){hour}"):
            prepared.append(prepare_table(engine.spark, config, run, item.table, item.files, item.parser))
    committed = []
    for table in prepared:
        with step(f"{table.table}: writing{hour}"):
            committed.append(commit_table(engine.spark, config, run, table))
    changed = _changed(committed)
    return committed + rebuild_derived(engine, config, run, per_hour, changed, step)


def _stopped_at(hour: str, done: list[str], exc: TracelakeError, rebuild_once: Callable[[], object]) -> TracelakeError:
    """The error of a range stopped at a bad `hour`. The hours before it stay, and so must what
    is derived from them (task iterations, correlation): rebuilt now, not at the end this run
    won't reach; a failure of that rebuild is named after the first one, not instead of it."""
    try:
        rebuild_once()
        derived = "with the tables derived from them"
    except TracelakeError as again:
        derived = f"the tables derived from them not rebuilt: {again}"
    span = f"{done[0]}..{done[-1]}" if len(done) > 1 else done[0]
    return type(exc)(f"hour {hour}: {exc} ({span} ingested before it, {derived}; "
                     "a re-run of the range redoes only what changed)")


def run_ingest(
    engine: Engine, config: Config, source: str, raw: str | None, step: Step | None = None,
    hours: str | None = None,
) -> list[TableStats]:
    """Ingest a source's raw folder; `hours` (`H` or `FROM..TO`) limits a source with hour
    folders to those hours. Several hours are ingested one after another (hour_batches), each
    hour's tables prepared before its first commit; a bad file stops the run at its hour, the
    hours before it stay ingested (their derived tables rebuilt before the error is raised), and
    a re-run of the same range redoes only what changed."""
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
            per_hour, once = split_per_hour(all_derived())
            batches = hour_batches(inputs)
            changed: dict[str, Partitions | None] = {}
            for number, (hour_folder, batch) in enumerate(batches):
                hour = f" [{hour_folder}]" if hour_folder else ""
                try:
                    committed = _ingest_batch(engine, config, run, batch, per_hour, hour, step)
                except TracelakeError as exc:
                    if number == 0:
                        raise
                    done = [h for h, _ in batches[:number]]
                    raise _stopped_at(hour_folder, done, exc, lambda: rebuild_derived(
                        engine, config, run, once, changed, step)) from exc
                _add_changes(changed, _changed(committed))
                stats += committed
            stats += rebuild_derived(engine, config, run, once, changed, step)
        finally:
            run.cleanup()
    lake.register_all(engine.spark, config)
    return merged_stats(stats)
