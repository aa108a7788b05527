"""What `tracelake ingest SOURCE` does: plan the source's files, ingest each bronze table,
rebuild its derived tables. Shared by the CLI, jobs/ scripts, Airflow and notebooks."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import replace
from pathlib import Path

from tracelake.api.contract import Derived, Partitions, TableInput
from tracelake.api.source import Source
from tracelake.api.tables import INPUTS_RECORD, read_inputs
from tracelake.config import Config, check_store_url
from tracelake.delta.catalog import check_writable, register_all
from tracelake.delta.lock import lake_write_lock
from tracelake.delta.migrate import rename_all
from tracelake.engine import Engine
from tracelake.errors import TracelakeError
from tracelake.io import objectstore, progress, storestage
from tracelake.io.staging import LEFT_BEHIND, Scratch
from tracelake.io.storetree import Listing, StorePath
from tracelake.run.alongside import COMMIT_THREADS, commit_batch, prepare_batch
from tracelake.run.batches import add_changes, batches, changes_of, merged_stats, split_per_batch
from tracelake.run.bronze import PreparedTable, commit_table, file_partitions, prepare_table
from tracelake.run.context import Run, Step, TableStats, flush_results
from tracelake.run.derived import rebuild_derived
from tracelake.run.registry import all_derived, generated_names, get_source
from tracelake.run.settled import Settled, present
from tracelake.run.settled import load as load_settled


def raw_dir_for(config: Config, source: str, raw: str | None) -> Path | str:
    """The raw folder: a local Path, or an object-store URL as given (never through pathlib,
    which would make `s3://b/p` into `s3:/b/p`)."""
    chosen = raw or config.raw_roots.get(source)
    if not chosen:
        raise TracelakeError(f"no raw folder for '{source}': pass --raw DIR")
    if objectstore.is_url(chosen):
        url = check_store_url(str(chosen).rstrip("/"), "raw folder")
        if not objectstore.check_reachable(url):
            raise TracelakeError(f"raw folder {url} does not exist (nothing is stored under it)")
        return url
    path = Path(chosen).expanduser()
    if path.exists() and not path.is_dir():
        raise TracelakeError(f"raw folder {path} is a file, not a folder: pass the folder that holds the source's files")
    if not path.is_dir():
        raise TracelakeError(f"raw folder {path} does not exist")
    return path


SHARED_STAGING_STALE_S = 6 * 3600  # a staging folder shared by several lakes: older runs only


def remove_stale_staging(config: Config, keep: Path) -> list[Path]:
    """Staging folders of earlier runs, and heal folders (io.staging.LEFT_BEHIND), left by runs
    killed before their cleanup. Called while the lake's write lock is held, so in the lake's own
    staging folder no other run can be using them; in a staging folder set apart (staging_dir),
    only those older than a few hours go."""
    root = Path(config.staging_dir)
    if not root.is_dir():
        return []
    own = root.resolve() == (Path(config.lake_root) / "_staging").resolve()
    now = time.time()
    stale = [
        p for p in root.iterdir()
        if p != keep and LEFT_BEHIND.fullmatch(p.name) and p.is_dir() and not p.is_symlink()
        and (own or now - p.stat().st_mtime > SHARED_STAGING_STALE_S)
    ]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def record_inputs(config: Config, raw_dir: Path | str, inputs: list[TableInput]) -> None:
    """Note in the lake where each bronze table of the run came from and whether its files are
    synthetic (written by `tracelake generate`: registry.generated_names), for the report's
    labels (read_inputs)."""
    if "://" in config.lake_root:
        return
    generated = [] if isinstance(raw_dir, str) else generated_names(raw_dir)  # a URL: its copy was read

    def synthetic(name: str) -> bool:
        base = name.split("!", 1)[0]
        return any(base == g or base.startswith(g.rstrip("/") + "/") for g in generated)

    record = read_inputs(config)
    for item in inputs:
        record[item.table] = {"raw": raw_dir if isinstance(raw_dir, str) else str(Path(raw_dir).resolve()),
                              "synthetic": any(synthetic(f.name) for f in item.files)}
    path = Path(config.lake_root) / INPUTS_RECORD
    temp = path.with_name(f".{INPUTS_RECORD}.tmp")
    temp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temp.replace(path)


def _plan(source: Source, raw_dir: Path | str, staging: Path, batch: str | None,
          in_place: bool = False) -> list[TableInput]:
    """The source's inputs; with `batch` (`--hours`) only those batches', where it has any. A raw
    folder on object storage is listed once; the files the source reads in place (Source.in_place,
    when `in_place`: the engine reaches the store) stay there and are planned at their URLs, the
    others the batches need are copied to the run's staging folder and planned there (the whole
    folder as a local one when the source reads nothing in place); errors name the URL, not the copy."""
    if batch is not None and source.plan_batches is None:
        raise TracelakeError(f"--hours applies to sources with hour folders, not '{source.name}'")
    if isinstance(raw_dir, str):
        local = staging / "raw"
        wanted = (lambda rel: source.batch_files(rel, batch)) if batch is not None and source.batch_files else None
        stored = source.in_place if in_place and source.in_place else (lambda rel: False)
        listing = objectstore.list_files(raw_dir)
        objectstore.download(raw_dir, local, lambda rel: not stored(rel) and (wanted is None or wanted(rel)), listing)
        tree = Listing.of(raw_dir, local, listing, stored)
        try:
            return _plan(source, StorePath.root(tree) if tree.in_place else local, staging, batch)
        except TracelakeError as exc:
            raise type(exc)(str(exc).replace(str(local), raw_dir)) from exc
    if batch is None:
        return source.plan(raw_dir, staging)
    return source.plan_batches(raw_dir, staging, batch)


def store_staging(engine: Engine, config: Config, run: Run) -> str | None:
    """The run's prefix in the lake's store (`<lake>/_staging/<run id>`) that the input files
    this process made go to, or None when the engine reads them on this disk. Only for a lake at
    a URL (a store every engine of that lake reaches) and no staging_dir set (a folder given for
    it, such as a volume the workers share, wins), with an engine whose tasks open URLs
    (Engine.reaches_stores) and may run elsewhere (not Engine.tasks_here: a Spark Connect
    server, a cluster master)."""
    if "://" not in config.lake_root or config.raw.get("staging_dir"):
        return None
    if engine.tasks_here() or not engine.reaches_stores(config.lake_root):
        return None
    return storestage.prefix_for(config.lake_root, run.run_id)


def _placed(inputs: list[TableInput], prefix: str, staging: Path, raw_dir: Path | str) -> list[TableInput]:
    """The plan with its files on this disk at URLs the engine reads (io/storestage.py): a copy
    of a raw object at that object's URL, anything else made or found here uploaded under
    `prefix`; the files a parser opens in this process (TableInput.driver_reads) stay here. A
    parser's own scratch is the run's, there too (Run.scratch, given it by prepare_table)."""
    roots = {staging.absolute(): prefix}
    if isinstance(raw_dir, str):
        roots[(staging / "raw").absolute()] = raw_dir
    else:
        roots[Path(raw_dir).absolute()] = f"{prefix}/raw"
    return [item if item.driver_reads else replace(item, files=storestage.place(item.files, prefix, roots))
            for item in inputs]


def _note(note: object, **figures: object) -> None:
    """Figures for the progress line of a step whose context yields a dict."""
    if isinstance(note, dict):
        note.update(figures)


def _ingest_batch(
    engine: Engine, config: Config, run: Run, batch: list[TableInput], per_hour: list[Derived], hour: str,
    step: Step, files: list[int], settled: Settled,
) -> tuple[list[TableStats], dict[str, Partitions | None]]:
    """Prepare every input of the batch before its first write (the small ones alongside the
    big one: run.alongside), commit them, rebuild the derived tables given (the per-hour ones;
    every one when the run is one batch); (the stats of every table written, with the partitions
    changed; the partitions the derived tables must follow, none when the commits changed nothing
    and `settled` holds every partition: then nothing is rebuilt).
    `files` is [raw files done, in the run] and is counted on."""
    counted = threading.Lock()

    def prepare(item: TableInput) -> PreparedTable:
        with step(f"{item.table}: {len(item.files)} file(s){hour}") as note, \
                progress.watching(run.staging / "progress" / item.table) as watch:
            _note(note, live=watch)
            table = prepare_table(engine.spark, config, run, item.table, item.files, item.parser)
            with counted:
                files[0] += len(item.files)
                _note(note, rows=table.rows_read, files=tuple(files))
        return table
    prepared = prepare_batch(batch, prepare)
    inputs = {table.table: file_partitions(table.files, table.schema) for table in prepared}
    owed = not settled.holds(inputs, present(engine.spark, config, all_derived()))
    settled.owe(inputs)  # before the first commit: a run stopped after it rebuilds them next time

    def write(table: PreparedTable) -> TableStats:
        with step(f"{table.table}: writing{hour}") as note:
            stats = commit_table(engine.spark, config, run, table)
            _note(note, rows=stats.rows_kept + stats.rows_quarantined)
        return stats
    # at once only while the run holds its rule results for one commit (ops.quality_results
    # takes one writer at a time) and each input writes a table of its own
    at_once = run.pending is not None and len({table.table for table in prepared}) == len(prepared)
    committed = commit_batch(prepared, write, COMMIT_THREADS if at_once else 1)
    changed = changes_of(committed)
    if not owed and all(s.unchanged for s in committed):
        with step(f"derived tables{hour}: not rebuilt, their inputs' rows are those they were rebuilt from"):
            return committed, {}
    return committed + rebuild_derived(engine, config, run, per_hour, changed, step), changed


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
    hours: str | None = None, register: bool = True,
) -> list[TableStats]:
    """Ingest a source's raw folder; `hours` (`H` or `FROM..TO`) limits a source with hour
    folders to those hours. Several hours are ingested one after another (batches.batches), each
    hour's tables prepared before its first commit; a bad file stops the run at its hour, the
    hours before it stay ingested (their derived tables rebuilt before the error is raised), and
    a re-run of the same range redoes only what changed. With `register`, the lake's tables are
    then named in the session's catalog, for a caller that queries them next by name, or for
    whoever reads a shared catalog (a metastore, Unity Catalog) later. The CLI passes False when
    that catalog is its own engine's and ends with the command (Engine.catalog_ends_with_it):
    0.14 s and a statement per table saved."""
    declared = get_source(source)
    raw_dir = raw_dir_for(config, source, raw)
    run = replace(Run.new(config), pending=[])  # the rule results go to ops.quality_results in one commit
    step = step or (lambda label: nullcontext({}))
    stats: list[TableStats] = []
    prefix = store_staging(engine, config, run)
    if prefix is not None:  # the engine's scratch Parquet beside the input files, in the store
        run = replace(run, scratch=Scratch(f"{prefix}/scratch"))
    with lake_write_lock(config, on_wait=lambda message: print(f"tracelake: {message}", file=sys.stderr)):
        rename_all(engine.spark, config, check_writable(config), say=lambda line: print(f"tracelake: {line}", file=sys.stderr))
        remove_stale_staging(config, keep=run.staging)
        if "://" in config.lake_root:
            storestage.remove_stale(config.lake_root, keep=run.run_id)
        try:
            with step(f"unpacking {source} inputs"):
                inputs = _plan(declared, raw_dir, run.staging, hours, engine.reaches_stores(config.lake_root))
                if prefix is not None:
                    inputs = _placed(inputs, prefix, run.staging, raw_dir)
            per_hour, once = split_per_batch(all_derived(), declared.batch_by)
            cut = batches(inputs, declared.batch_by)
            if len(cut) == 1:  # one batch: every derived table in one schedule, each started once what it reads is settled
                per_hour, once = per_hour + once, []
            changed: dict[str, Partitions | None] = {}
            settled = load_settled(config)
            files = [0, sum(len(item.files) for item in inputs)]
            started = time.monotonic()
            for number, (hour_folder, batch) in enumerate(cut):
                hour = f" [{hour_folder}]" if hour_folder else ""
                try:
                    with step(f"hour {hour_folder} ({number + 1}/{len(cut)})") if len(cut) > 1 else nullcontext() as note:
                        committed, changes = _ingest_batch(engine, config, run, batch, per_hour, hour, step, files,
                                                           settled)
                        spent = time.monotonic() - started
                        _note(note, rows=sum(s.rows_read for s in committed if s.table.startswith("bronze.")),
                              files=tuple(files), eta_s=spent / (number + 1) * (len(cut) - number - 1))
                except TracelakeError as exc:
                    if number == 0:
                        raise
                    done = [h for h, _ in cut[:number]]
                    raise _stopped_at(hour_folder, done, exc, lambda: rebuild_derived(
                        engine, config, run, once, changed, step)) from exc
                add_changes(changed, changes)
                stats += committed
            if once:
                stats += rebuild_derived(engine, config, run, once, changed, step)
            settled.settle(present(engine.spark, config, all_derived()))  # every rebuild that reads them ended
            record_inputs(config, raw_dir, inputs)
            flush_results(engine.spark, config, run)
        except TracelakeError:
            with suppress(Exception):  # a failed run's results too (a critical rule's); its error comes first
                flush_results(engine.spark, config, run)
            raise
        finally:
            run.cleanup()
            if prefix is not None:
                with suppress(TracelakeError):  # left behind, the next run on the lake removes it
                    storestage.remove(prefix)
    if register:
        register_all(engine.spark, config)
    return merged_stats(stats)
