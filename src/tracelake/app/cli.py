"""`tracelake` command line: ingest, query, sql, tables, describe, generate, report, explain, migrate, serve, demo.

Errors print as one line (`tracelake: error: …`) with a non-zero exit; TRACELAKE_DEBUG=1 shows
the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from tracelake.app import signals
from tracelake.app.results import TABLE_ROWS
from tracelake.config import PROFILES
from tracelake.errors import TracelakeError, printable


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=PROFILES, help="engine profile")
    parser.add_argument("--lake", help="lake root folder (default from conf: ./lake)")
    parser.add_argument("--connect-url", help="sc://host:port for the connect profile")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE",
        help="config override, e.g. spark_conf.spark.sql.shuffle.partitions=2",
    )


def _retain_hours(text: str) -> int:
    """--retain-hours checked while parsing: a bad value stops before any engine starts (exit 2)."""
    from tracelake.delta.maintenance import check_retention

    try:
        hours = int(text)
        check_retention(hours)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a whole number of hours, got {text!r}") from None
    except TracelakeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return hours


class OneLineParser(argparse.ArgumentParser):
    """argparse prints the whole usage before an error; ours is one line (exit 2), with the
    hint where to read more."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _row_count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expects a whole number of rows (0: all), got {text!r}")
    return int(text)


def _result_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("csv", "json", "table"),
                        help="table (aligned, capped, fitted to the terminal: the default on a terminal), csv (a "
                             "header, then a line per row: the default when piped) or json (an array of objects)")
    parser.add_argument("--limit", type=_row_count, metavar="N",
                        help=f"print at most N rows (0: all); default {TABLE_ROWS} for a table, all for csv and json")


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("tracelake")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tracelake", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tracelake {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    from tracelake.run.registry import generator_names, source_names

    p = sub.add_parser("ingest", help="ingest a source's raw files into bronze (and derived) tables")
    p.add_argument("source", help=" | ".join(source_names()))
    p.add_argument("--raw", help="folder with the source's raw files (default: conf raw_roots.SOURCE, named on stderr)")
    p.add_argument("--hours", metavar="H|FROM..TO|none",
                   help="zhejiang: only these trafficinfo hour folders (YYYYMMDDHH, China time), e.g. "
                        "2024052400..2024052423; none: only the workbook and taskinfo/. An hour with no folder exits 4")
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON object (each table's rows read, kept, quarantined and "
                        "its Delta version) for a scheduler to keep")
    _common(p)

    p = sub.add_parser("query", help="run one read-only SQL statement over the lake; prints a table, or CSV when piped")
    p.add_argument("sql")
    _result_flags(p)
    _common(p)

    p = sub.add_parser("sql", help="interactive read-only SQL prompt over the lake (.tables, .schema T, .quit)")
    p.add_argument("--format", choices=("csv", "json", "table"), default="table", help="how results print (default: table)")
    p.add_argument("--limit", type=_row_count, default=TABLE_ROWS, metavar="N",
                   help=f"rows a result shows at most (default {TABLE_ROWS}; 0: all; .maxrows N changes it)")
    p.add_argument("--history", default="~/.tracelake_history",
                   help="readline history file of the prompt (default ~/.tracelake_history; '' for none)")
    _common(p)

    p = sub.add_parser("tables", help="list lake tables: rows, Delta version, last operation")
    p.add_argument("--format", choices=("csv", "json", "table"), help="table on a terminal, csv when piped (default)")
    _common(p)

    p = sub.add_parser("maintain", help="Delta maintenance: history, --optimize (compact small files), --vacuum")
    p.add_argument("table", nargs="?", help="layer.table (default: every lake table)")
    p.add_argument("--optimize", action="store_true", help="compact small files into larger ones")
    p.add_argument("--vacuum", action="store_true", help="delete files no version newer than --retain-hours needs")
    p.add_argument("--retain-hours", type=_retain_hours, default=168, metavar="N",
                   help="vacuum keeps files of the last N hours (default 168; below that time travel ends sooner)")
    p.add_argument("--history", action="store_true", help="print the table's versions (newest first), not a summary")
    p.add_argument("--format", choices=("csv", "json", "table"), help="table on a terminal, csv when piped (default)")
    _common(p)

    p = sub.add_parser("explain", help="why one training iteration was slow: its baseline, the evidence on each "
                                       "port of its path, the suspect and why, the parties on shared ports, coverage")
    p.add_argument("task", help="task id (a Zhejiang taskinfo folder name), e.g. 20240523-1115-2")
    p.add_argument("iteration", type=int, help="the iteration: the last step a log record covers")
    _common(p)

    p = sub.add_parser("migrate", help="rename the columns of tables an earlier release wrote to this release's "
                                       "names (docs/naming.md); an ingest does it too")
    _common(p)

    p = sub.add_parser("describe", help="print a table's documentation from its schema file")
    p.add_argument("table", help="layer.table, e.g. bronze.itp_jobs")

    p = sub.add_parser("generate", help="write synthetic raw files in a source's real format")
    p.add_argument("source", help=" | ".join(generator_names()))
    p.add_argument("--out", required=True)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hours", type=int, help="hours of data to generate (zhejiang)")
    p.add_argument("--tasks", type=int, help="training tasks to generate (zhejiang)")
    p.add_argument("--start", help="first hour, YYYYMMDDHH China time (zhejiang; default 2024052400)")
    p.add_argument("--ports", choices=("monitored", "all"),
                   help="zhejiang per-port files: the monitored ports (default) or every port of all 24 switches")
    p.add_argument("--only-hour", metavar="H", help="zhejiang: write the traffic of this one hour of the world only")

    p = sub.add_parser("report", help="write figures (PNG) and an HTML page from the gold tables")
    p.add_argument("--out", required=True)
    _common(p)

    p = sub.add_parser("serve", help="keep an engine running for a lake: later commands on it start in a fraction")
    _common(p)

    p = sub.add_parser("demo", help="ingest everything available (real files or generated) and summarise")
    _common(p)
    return parser


def _config(args: argparse.Namespace):
    from tracelake.config import load_config

    return load_config(
        profile=args.profile,
        overrides={"lake_root": args.lake, "connect_url": args.connect_url},
        conf_pairs=args.conf,
    )


def _require_lake(config, stored: bool | None = None) -> None:
    """A command that reads the lake stops on a path with none, instead of printing an empty
    listing with exit 0 (a typo in --lake looked like an empty lake). `stored`: whether an
    object-store lake holds anything (objectstore.check_reachable)."""
    missing = stored is False if "://" in config.lake_root else not os.path.isdir(config.lake_root)
    if missing:
        raise TracelakeError(f"no lake at {config.lake_root} (run `tracelake ingest` first, or check --lake)")


def _start(config, leave: Any = None) -> Any:
    """The engine `tracelake serve` runs for this lake when there is one (a session of our own
    on it), else one of the command's own. `leave` is called with the serve's pid if it stops
    under us (a command's default: exit 2 at once, with one line)."""
    from tracelake.app.serve import served_pid, served_socket, stopped_line, watch
    from tracelake.engine import attach_served, start_engine

    socket_path = served_socket(config, _tell)
    pid = served_pid(config)
    if socket_path and pid is not None:
        try:
            engine = attach_served(config, socket_path)
        except TracelakeError:
            raise
        except Exception as exc:  # noqa: BLE001 - it went away since: our own engine instead
            _tell(f"the served engine did not answer ({type(exc).__name__}); starting one")
        else:
            watch(pid, socket_path, leave or (lambda p: _leave_now(stopped_line(p, "this command", "run the command again"))))
            return engine
    return start_engine(config)


def _leave_now(line: str) -> None:
    """Exit 2 from any thread with one line: the engine this command used is gone, and the
    client's own wait for it would not end."""
    sys.stderr.write(f"tracelake: error: {line}\n")
    sys.stderr.flush()
    os._exit(2)


@contextlib.contextmanager
def _engine(args: argparse.Namespace, need_lake: bool = False, raw: str | None = None) -> Iterator[Any]:
    """The engine and config; with `need_lake`, only over an existing lake (checked once the
    engine is up, so an engine that cannot start says so first). A lake (or `raw`) on object
    storage is checked before the engine starts: a missing bucket, refused credentials or an
    endpoint that does not answer stop in seconds, not after the engine's retries."""
    from tracelake.io import objectstore

    config = _config(args)
    stored = objectstore.check_reachable(config.lake_root) if objectstore.is_url(config.lake_root) else None
    if need_lake and stored is False:  # known already: no engine start to say so
        _require_lake(config, stored)
    if objectstore.is_url(raw):  # copied to local staging by this process: the engine never reads the URL
        from tracelake.config import check_store_url

        objectstore.check_reachable(check_store_url(str(raw), "raw folder"))
    engine = _start(config)
    try:
        if need_lake:
            _require_lake(config, stored)
        yield engine, config
    except KeyboardInterrupt as exc:
        # no session stop: the client's release-session retries can hang; committed versions
        # stay as they are, and the engine ends with the process
        signals.exit_now(signals.signal_of(exc))
    finally:
        engine.stop()


def _live() -> bool:
    """A spinner per step only when both streams are a terminal; plain lines otherwise (Airflow
    and CI logs, a redirect)."""
    return sys.stderr.isatty() and sys.stdout.isatty()


def _progress():
    """The steps' display: rich's live lines on a terminal, else nothing live (plain lines are
    printed as each step ends, by _step_fn)."""
    if not _live():
        return contextlib.nullcontext(None)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
        transient=False, console=_stderr_console(),
    )


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def step_summary(note: dict, took: float) -> str:
    """What a step did, for its progress line: rows and rows/s, raw files done of the run's, and
    the time left of a --hours range."""
    parts = []
    if "files" in note:
        parts.append(f"files {note['files'][0]}/{note['files'][1]}")
    if "rows" in note:
        rate = f" ({note['rows'] / took:,.0f} rows/s)" if "files" in note and took >= 0.05 and note["rows"] else ""
        parts.append(f"{note['rows']:,} rows{rate}")
    parts.append(f"{took:.1f} s")
    if "eta_s" in note:
        parts.append(f"ETA {_duration(note['eta_s'])}" if note["eta_s"] else "last")
    return ", ".join(parts)


LIVE_EVERY_S = 0.5  # how often a terminal's line shows a parse's progress
PLAIN_EVERY_S = (5.0, 60.0)  # a plain log's lines for a parse still running: the first after 5 s, then
# spaced by half the time so far, at most a minute apart (a 25-minute parse gets ~30 lines, not 300)


def live_summary(watch, elapsed: float) -> str | None:
    """A running parse's figures from its tasks' tallies (io.progress): files done of its files
    and the ETA first (a terminal's line may be cut at its width), then rows, rows/s and the
    time so far; None before the first file is done."""
    files, rows, _ = watch.done()
    if not files or not watch.sizes:
        return None
    eta = watch.eta_s(elapsed)
    parts = [f"files {files:,}/{len(watch.sizes):,}", *([f"ETA {_duration(eta)}"] if eta is not None else []),
             f"{rows:,} rows ({rows / max(elapsed, 0.05):,.0f} rows/s)", f"{elapsed:.1f} s"]
    return ", ".join(parts)


def _step_fn(progress):
    """The run's step callback: each step yields a dict the run fills with its figures; the
    step's line gets them when it ends (a live line on a terminal, else one plain line). While a
    step whose dict holds a `live` watch runs, its figures so far are shown: on the live line,
    or as plain lines spaced by PLAIN_EVERY_S."""
    import threading
    import time

    @contextlib.contextmanager
    def step(label: str):
        note: dict = {}
        started = time.monotonic()
        task = progress.add_task(label, total=1) if progress is not None else None
        stop = threading.Event()

        def pause() -> float:
            if task is not None:
                return LIVE_EVERY_S
            first, most = PLAIN_EVERY_S
            return min(most, max(first, (time.monotonic() - started) / 2))

        def tick() -> None:
            while not stop.wait(pause()):
                text = live_summary(note["live"], time.monotonic() - started) if "live" in note else None
                if text and task is not None:
                    progress.update(task, description=f"{label}: {text}")
                elif text:
                    print(f"tracelake: … {label}: {text}", file=sys.stderr, flush=True)

        ticker = threading.Thread(target=tick, name="tracelake-progress", daemon=True)
        ticker.start()
        try:
            yield note
        finally:
            stop.set()
            ticker.join()
        summary = step_summary(note, time.monotonic() - started)
        if task is not None:
            progress.update(task, completed=1, description=f"[green]✓[/] {label}: {summary}")
        else:
            print(f"tracelake: ✓ {label}: {summary}", file=sys.stderr, flush=True)

    return step


def _print_stats(stats) -> None:
    """The run's tables: rows read, kept and set aside, readable in 80 columns (names are never
    cut: a name too long folds), and each table's warnings below the table, wrapped."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 100)
    table = Table(title="ingest summary", box=box.SIMPLE_HEAD)
    table.add_column("table", overflow="fold")
    repeats = any(s.rows_repeated for s in stats)  # exact re-deliveries: read = kept + quarantined + repeated
    for col in ("read", "kept", "quarantined", *(["repeated"] if repeats else [])):
        table.add_column(col, justify="right", no_wrap=True)
    for s in stats:
        table.add_row(s.table, f"{s.rows_read:,}", f"{s.rows_kept:,}", f"{s.rows_quarantined:,}",
                      *([f"{s.rows_repeated:,}"] if repeats else []))
    console.print(table)
    warned = [(s.table, w) for s in stats for w in s.warnings]
    if warned:
        console.print("warnings:")
        for name, warning in warned:
            console.print(f"  {name}: {warning}", overflow="fold", highlight=False, markup=False)


def _default_raw(args: argparse.Namespace) -> str:
    """The folder an ingest without --raw reads: conf's raw_roots.<source>, said in one line on
    stderr; none configured, or not a folder, is refused (exit 2) before any engine starts."""
    from tracelake.run.registry import get_source, source_names

    if args.source not in source_names():
        get_source(args.source)  # says which sources there are
    configured = _config(args).raw_roots.get(args.source)
    if not configured:
        raise TracelakeError(f"no --raw given and no default raw folder for '{args.source}' "
                             f"(conf raw_roots.{args.source}): pass --raw DIR")
    if "://" in configured:  # an object-store folder: its reachability is checked before the engine starts
        _tell(f"no --raw given: reading {args.source} from {configured} (conf raw_roots.{args.source})")
        return configured
    path = os.path.abspath(os.path.expanduser(configured))
    if not os.path.isdir(path):
        raise TracelakeError(f"no --raw given, and the default raw folder for '{args.source}' (conf raw_roots."
                             f"{args.source} = {configured}) is not a folder here: {path}; pass --raw DIR")
    _tell(f"no --raw given: reading {args.source} from {path} (conf raw_roots.{args.source})")
    return path


def cmd_ingest(args: argparse.Namespace) -> int:
    from tracelake.run.pipeline import run_ingest

    raw = args.raw if args.raw is not None else _default_raw(args)
    with _engine(args, raw=raw) as (engine, config), _progress() as progress:
        # names in a catalog that ends with the command would be read by no one
        stats = run_ingest(engine, config, args.source, raw, _step_fn(progress), hours=args.hours,
                           register=not engine.catalog_ends_with_it)
        if args.json:
            print(json.dumps(_stats_record(engine, config, args, stats), sort_keys=True))
    if not args.json:
        _print_stats(stats)
    return 0


def _stats_record(engine, config, args: argparse.Namespace, stats) -> dict:
    """The run in a few numbers: what a scheduler keeps (Airflow's XCom) in place of the summary
    text. `version` is each table's Delta version after the run (unchanged on a no-op re-run)."""
    from tracelake.delta.maintenance import history

    def version(table: str) -> int:
        layer, name = table.split(".", 1)
        return history(engine, config.table_path(layer, name), 1)[0].version

    tables = [{"table": s.table, "read": s.rows_read, "kept": s.rows_kept, "quarantined": s.rows_quarantined,
               "repeated": s.rows_repeated, "version": version(s.table)} for s in stats]
    bronze = [t for t in tables if t["table"].startswith("bronze.")]  # the raw rows: read = kept + quarantined
    return {"source": args.source, "hours": args.hours, "tables": tables,
            **{key: sum(t[key] for t in bronze) for key in ("read", "kept", "quarantined")}}


def _printed(args: argparse.Namespace, result) -> None:
    """A command's rows in the format asked for, else a table on a terminal and CSV when piped."""
    from tracelake.app.results import default_format, write_result

    write_result(result, getattr(args, "format", None) or default_format())


def _limit(args: argparse.Namespace) -> int | None:
    """The rows to fetch: --limit (0: all), else TABLE_ROWS for a table and all for CSV/JSON."""
    from tracelake.app.results import default_format

    if args.limit is not None:
        return args.limit or None
    return TABLE_ROWS if (args.format or default_format()) == "table" else None


def cmd_query(args: argparse.Namespace) -> int:
    from tracelake.app.readonly import NotAStatement, check_read_only
    from tracelake.app.statements import history_answer, parser_message, run_sql, schema_answer
    from tracelake.delta.catalog import register_all

    try:
        check_read_only(args.sql)  # before any engine starts
    except NotAStatement as exc:  # a typo of SELECT and the like: the engine's parser says what is wrong
        with _engine(args) as (engine, _config_):
            raise parser_message(engine.spark, exc.word) from None
    if answer := schema_answer(_config(args), args.sql):
        _printed(args, answer)
        return 0
    with _engine(args) as (engine, config):
        register_all(engine.spark, config)
        result = history_answer(engine, config, args.sql) or run_sql(engine.spark, args.sql, _limit(args), config,
                                                                     stream=True)
        _printed(args, result)  # rows streamed as they come: printed while the engine runs
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from tracelake.app.shell import run_shell

    return run_shell(lambda: _engine(args), _config(args), args.format, args.history, args.limit or None)


def cmd_tables(args: argparse.Namespace) -> int:
    """Every table with its rows and last version; a table whose log is damaged, or whose data
    file is gone, is listed as such beside the others, and the command then exits 2 naming it."""
    from tracelake.delta.catalog import list_lake_tables, missing_data_files, register
    from tracelake.delta.maintenance import history
    from tracelake.delta.protocol import DamagedLog

    damaged: list[str] = []
    with _engine(args, need_lake=True) as (engine, config):
        rows = []
        for layer, table in list_lake_tables(config):
            name = config.table_name(layer, table)
            try:
                register(engine.spark, config, layer, table)
            except DamagedLog as exc:
                damaged.append(str(exc))
                rows.append((name, None, None, "damaged log"))
                continue
            if gone := missing_data_files(config, layer, table):
                more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
                damaged.append(f"{name}: its data file {gone[0]} is gone{more}, though its Delta log lists it: "
                               "restore the file, or remove the table and ingest again")
                rows.append((name, None, None, "missing data file"))
                continue
            count = engine.spark.table(name).count()
            last = history(engine, config.table_path(layer, table), 1)[0]
            rows.append((name, count, last.version, last.operation))
    _printed(args, (("table", "rows", "version", "last_operation"), rows))
    if damaged:
        more = f" (and {len(damaged) - 1} more damaged tables)" if len(damaged) > 1 else ""
        raise TracelakeError(damaged[0] + more)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from tracelake.schema import describe_markdown, table_schema

    sys.stdout.write(describe_markdown(table_schema(args.table)))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from tracelake.config import load_config
    from tracelake.run.registry import generate

    reference = load_config().raw_roots.get(args.source)
    written = generate(args.source, args.out, scale=args.scale, seed=args.seed, reference=reference, say=_tell,
                       hours=args.hours, tasks=args.tasks, start=args.start, ports=args.ports,
                       only_hour=args.only_hour)
    for path in written:
        print(path)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tracelake.app.report import build_report
    from tracelake.delta.catalog import register_all

    with _engine(args, need_lake=True) as (engine, config):
        register_all(engine.spark, config)
        for path in build_report(engine, config, args.out):
            print(path)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from tracelake.app.demo import run_demo

    with _engine(args) as (engine, config), _progress() as progress:
        summary = run_demo(engine, config, _step_fn(progress))
    _print_stats(summary.stats)
    for line in summary.lines:
        print(line)
    return 0


def _tell(message: str) -> None:
    print(f"tracelake: {message}", file=sys.stderr)


def cmd_maintain(args: argparse.Namespace) -> int:
    from tracelake.delta.catalog import list_lake_tables
    from tracelake.delta.lock import lake_write_lock
    from tracelake.delta.maintenance import active_files, history, optimize, vacuum

    with _engine(args, need_lake=True) as (engine, config):
        tables = list_lake_tables(config)
        if args.table:
            wanted = tuple(args.table.split(".", 1))
            if wanted not in tables:
                raise TracelakeError(f"no table {args.table} in the lake at {config.lake_root}")
            tables = [wanted]
        if args.history:
            if len(tables) != 1 or args.optimize or args.vacuum:
                raise TracelakeError("maintain --history prints one table's versions: name the table, without "
                                     "--optimize or --vacuum")
            [(layer, table)] = tables
            commits = history(engine, config.table_path(layer, table))
            _printed(args, (("version", "timestamp", "operation"),
                            [(c.version, _utc(c.timestamp_ms), c.operation) for c in commits]))
            return 0
        rows = []
        writes = args.optimize or args.vacuum  # then as an ingest does: one writer per lake
        with lake_write_lock(config, on_wait=_tell) if writes else contextlib.nullcontext():
            for layer, table in tables:
                path = config.table_path(layer, table)
                files_before = active_files(engine, path)
                if args.optimize:
                    optimize(engine, path)
                if args.vacuum:
                    vacuum(engine, path, args.retain_hours, enforce_retention=args.retain_hours >= 168)
                last = history(engine, path, 1)[0]
                rows.append((f"{layer}.{table}", last.version, last.operation, files_before, active_files(engine, path)))
    _printed(args, (("table", "version", "last_operation", "files_before", "files_after"), rows))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from tracelake.run.registry import explain_modules

    with _engine(args, need_lake=True) as (engine, config):
        for module in explain_modules():
            print("\n".join(module.explain(engine.spark, config, args.task, args.iteration)))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from tracelake.delta.catalog import check_writable
    from tracelake.delta.lock import lake_write_lock
    from tracelake.delta.migrate import rename_all

    with _engine(args, need_lake=True) as (engine, config), lake_write_lock(config, on_wait=_tell):
        found = check_writable(config)
        rename_all(engine.spark, config, found, say=print)
    if not found:
        print("nothing to migrate: every table has this release's column names")
    return 0


def _utc(timestamp_ms: int | None):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(timestamp_ms / 1000, UTC) if timestamp_ms else None


def cmd_serve(args: argparse.Namespace) -> int:
    from tracelake.app.serve import serve

    return serve(_config(args), _tell)


COMMANDS = {
    "ingest": cmd_ingest, "query": cmd_query, "tables": cmd_tables, "describe": cmd_describe,
    "generate": cmd_generate, "report": cmd_report, "demo": cmd_demo, "maintain": cmd_maintain,
    "serve": cmd_serve, "sql": cmd_sql, "migrate": cmd_migrate, "explain": cmd_explain,
}


# Sail's answer to the client's resume of a call it had already ended (docs/engine-notes.md)
ENDED_CALL_LOST = "task context not found for operation"


def _one_line(exc: BaseException) -> str:
    from tracelake.engine import explain_engine_error

    root = explain_engine_error(exc)  # a JVM failure: its root cause, not "o1199.save"
    if root:
        return printable(root)
    text = str(exc).strip() or type(exc).__name__
    if "Failed to commit transaction" in text:  # Delta's optimistic concurrency: another writer won
        return ("another writer committed to a table of this run first (Delta commit conflict); "
                "this run's write of it was not committed: retry")
    if isinstance(exc, TracelakeError):  # ours are one line: a line break in one is echoed input
        return printable(text)
    if ENDED_CALL_LOST in text:
        return ("the engine's answer to a call was cut off and could not be resumed: the call had already ended "
                f"on the engine's side (Sail: '{ENDED_CALL_LOST}'); tables keep their last committed "
                "versions: run the same command again")
    rpc = _rpc_end(text)
    if rpc:
        return printable(f"{type(exc).__name__}: {rpc}")
    return printable(f"{type(exc).__name__}: {text.splitlines()[0]}")


def _rpc_end(text: str) -> str | None:
    """A gRPC call's end as Spark Connect's client prints it when the server sent no error of its
    own: the first line only says `<_MultiThreadedRendezvous of RPC that terminated with:`, and the
    status and details that say what happened follow on the next lines. Details of several lines
    (a Python traceback from a task) give their first and last."""
    if not text.startswith("<_") or "RPC that terminated with" not in text.splitlines()[0]:
        return None
    status = re.search(r"^\s*status = (?:StatusCode\.)?(\S+)", text, re.MULTILINE)
    details = re.search(r'\n\s*details = "(.*?)"\n\s*(?:debug_error_string = |>)', text, re.DOTALL)
    lines = [line.strip() for line in details.group(1).splitlines() if line.strip()] if details else []
    said = " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else "no details"
    return f"the engine's call ended with {status.group(1) if status else 'no status'}: {said}"


def _machine_refused(exc: BaseException) -> str | None:
    """The operating system's reason when an error of the engine or of the deltalake package
    (Rust, so no OSError) comes from a system call: `… (os error 28)` is a full disk."""
    found = re.search(r"\(os error (\d+)\)", str(exc))
    return os.strerror(int(found.group(1))) if found else None


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("RUST_LOG", "error")  # Sail logs sessions at INFO and no-op persists at WARN
    signals.end_at_once()  # parsing imports every source: nothing to clean up yet
    args = build_parser().parse_args(argv)
    signals.unwind_first()
    try:
        return COMMANDS[args.command](args)
    except TracelakeError as exc:
        if os.environ.get("TRACELAKE_DEBUG"):
            raise
        print(f"tracelake: error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(signals.LINES[signals.signal_of(exc)], file=sys.stderr)
        return signals.CODES[signals.signal_of(exc)]
    except OSError as exc:  # the machine said no: a path that is not there, not writable, a full disk
        if os.environ.get("TRACELAKE_DEBUG"):
            raise
        if isinstance(exc, ConnectionRefusedError) and "py4j" in sys.modules and exc.filename is None:
            # classic Spark's driver JVM ended under us: its gateway refuses the next call
            print("tracelake: error: the Spark driver's JVM is gone (its gateway refused a call): it ran out of memory "
                  "or was killed, as its last log lines above say; give it more memory with "
                  "--conf spark_conf.spark.driver.memory=8g", file=sys.stderr)
            return 2
        where = f"use {exc.filename}" if exc.filename else "write or read a file"
        print(printable(f"tracelake: error: cannot {where}: {exc.strerror or exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one clear line, not a stack trace
        if os.environ.get("TRACELAKE_DEBUG"):
            raise
        from tracelake.engine import explain_worker_failure
        from tracelake.private_engine import lost_engine

        if lost := lost_engine():
            print(f"tracelake: error: {lost}; the tables this run had not committed are as they were", file=sys.stderr)
            return 2
        if worker := explain_worker_failure(str(exc)):
            print(f"tracelake: error: {worker}", file=sys.stderr)
            return 2
        refused = _machine_refused(exc)
        if refused:  # the same as an OSError in Python: the engine's writer met a full disk, say
            print(f"tracelake: error: cannot write or read a file: {refused} (the engine: {_one_line(exc)})",
                  file=sys.stderr)
            return 2
        print(f"tracelake: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except BaseException as exc:  # a Rust panic in deltalake or pysail surfaces as pyo3's PanicException
        if type(exc).__name__ != "PanicException" or os.environ.get("TRACELAKE_DEBUG"):
            raise
        print(f"tracelake: error: {_one_line(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
