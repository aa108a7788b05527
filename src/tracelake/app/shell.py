"""`tracelake sql`: an interactive read-only SQL prompt over the lake.

A statement may span lines and ends with `;` (or with the input); a line may hold several, run in
order. Results print as an aligned table (or `--format csv|json`), capped at `--limit` rows. Dot
commands: `.tables`, `.schema layer.table`, `.mode`, `.maxrows`, `.timer`, `.help`, `.quit`; on a
terminal, Tab completes table and column names.
Every statement passes the guard `query` uses (app/readonly.py): a write is refused with the same
line, and the prompt goes on. On a terminal, lines are edited with readline and kept in a history
file (`~/.tracelake_history`); with stdin piped, the statements are read without prompts and the
exit code is 2 when any of them failed. The engine starts with the first statement that needs it
(the one `tracelake serve` runs for the lake when there is one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tracelake.errors import TracelakeError, printable

PROMPT, MORE = "tracelake> ", "      ...> "
HISTORY_LINES = 1000
HELP = """\
statements end with ; and may span lines; only reads (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, …)
.tables            the lake's tables (layer.table)
.schema TABLE      a table's columns: type, nullability, unit, description
.mode table|csv|json   how results print
.maxrows N         rows a result shows at most (0: all)
.timer on|off      print each statement's time
.help              this text
.quit              leave (also Ctrl-D)"""


def _lines(interactive: bool, history: str, prompt: list[str]) -> Iterator[str | None]:
    """Input lines; None for a Ctrl-C at the prompt (the statement being typed is dropped). On a
    terminal, `prompt[0]` is shown before each line, and lines are kept in the history file."""
    if not interactive:
        for line in sys.stdin:
            yield line.rstrip("\n")
        return
    history_file = Path(os.path.expanduser(history)) if history else None
    with contextlib.suppress(ImportError):
        import readline

        readline.set_history_length(HISTORY_LINES)
        if history_file and history_file.exists():
            with contextlib.suppress(OSError):
                readline.read_history_file(history_file)
    try:
        while True:
            try:
                yield input(prompt[0])
            except EOFError:
                print(file=sys.stderr)
                return
            except KeyboardInterrupt:
                print("^C", file=sys.stderr)
                yield None
    finally:
        if history_file and "readline" in sys.modules:
            with contextlib.suppress(OSError):
                history_file.touch(mode=0o600, exist_ok=True)
                sys.modules["readline"].write_history_file(history_file)


SQL_WORDS = ("SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "HAVING", "LIMIT", "JOIN", "LEFT JOIN", "ON",
             "USING", "WITH", "AS", "AND", "OR", "NOT", "DISTINCT", "COUNT", "SUM", "AVG", "MIN", "MAX",
             "DESCRIBE", "DESCRIBE HISTORY", "SHOW", "EXPLAIN", "VERSION AS OF", "UNION ALL", "CASE", "WHEN",
             "THEN", "ELSE", "END")


def completions(config) -> list[str]:
    """What Tab offers: the lake's tables, their columns (from the schema files), SQL's words,
    the dot commands."""
    from tracelake.app.sql_errors import _columns
    from tracelake.delta.catalog import list_lake_tables

    names: list[str] = []
    for layer, table in list_lake_tables(config):
        names.append(config.table_name(layer, table))
        names.extend(_columns(layer, table))
    dots = [".tables", ".schema", ".mode", ".maxrows", ".timer", ".help", ".quit"]
    return sorted(set(names)) + list(SQL_WORDS) + dots


def _complete_with(words: list[str]):
    """A readline completer over `words` (case-insensitive on the word typed so far)."""
    def complete(text: str, state: int) -> str | None:
        matches = [w for w in words if w.lower().startswith(text.lower())]
        return matches[state] if state < len(matches) else None

    return complete


class Shell:
    def __init__(self, open_engine: Callable[[], Any], config, fmt: str, limit: int | None = None) -> None:
        self.open_engine, self.config, self.fmt, self.limit = open_engine, config, fmt, limit
        self.timer = False
        self.stack = contextlib.ExitStack()
        self.engine = None

    def _engine(self):
        if self.engine is None:
            from tracelake.delta.catalog import register_all

            self.engine, _ = self.stack.enter_context(self.open_engine())
            register_all(self.engine.spark, self.config)
        return self.engine

    def statement(self, sql: str) -> None:
        import time

        from tracelake.app.results import write_result
        from tracelake.app.statements import answer

        started = time.monotonic()
        write_result(answer(self._engine(), self.config, sql, self.limit if self.fmt == "table" else None), self.fmt)
        if self.timer:
            print(f"Run Time: {time.monotonic() - started:.3f} s", file=sys.stderr)

    def dot(self, line: str) -> bool:
        """A dot command; False for `.quit`."""
        from tracelake.app.results import FORMATS, write_result

        word, _, rest = line.strip().partition(" ")
        rest = rest.strip().rstrip(";").strip()
        if word in (".quit", ".exit", ".q"):
            return False
        if word == ".help":
            print(HELP)
        elif word == ".tables":
            from tracelake.delta.catalog import list_lake_tables

            for layer, table in list_lake_tables(self.config):
                print(self.config.table_name(layer, table))
        elif word == ".mode" and rest in FORMATS:
            self.fmt = rest
        elif word == ".maxrows" and rest.isdigit():
            self.limit = int(rest) or None
        elif word == ".timer" and rest in ("on", "off"):
            self.timer = rest == "on"
        elif word == ".schema" and rest:
            from tracelake.schema import table_schema

            schema = table_schema(rest)
            write_result((("column", "type", "nullable", "unit", "description"),
                          [(c.name, c.type, "yes" if c.nullable else "no", c.unit or "", c.description)
                           for c in schema.columns]), self.fmt)
        else:
            raise TracelakeError(f"unknown command {printable(line.strip())} (.tables, .schema TABLE, .mode table|csv|json, "
                                 ".maxrows N, .timer on|off, .help, .quit)")
        return True


def run_shell(open_engine: Callable[[], Any], config, fmt: str = "table", history: str = "~/.tracelake_history",
              limit: int | None = None) -> int:
    interactive = sys.stdin.isatty()
    shell = Shell(open_engine, config, fmt, limit)
    failed = False
    if interactive:
        # Ctrl-C interrupts what runs (or the line typed) and the prompt goes on; SIGTERM still ends it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print(f"tracelake sql over {config.lake_root}: statements end with ;  .help for commands", file=sys.stderr)
        with contextlib.suppress(ImportError, TracelakeError, OSError):
            import readline

            readline.set_completer(_complete_with(completions(config)))
            readline.set_completer_delims(" \t\n,;()=<>+-*/")
            readline.parse_and_bind("tab: complete")
    buffer: list[str] = []
    prompt = [PROMPT]

    def run(text: str) -> bool:
        """Each statement of `text` in order; False when one failed (the rest still run)."""
        from tracelake.app.readonly import split_statements

        return all([one(sql) for sql in split_statements(text)])

    def one(sql: str) -> bool:
        try:
            shell.statement(sql)
            return True
        except TracelakeError as exc:
            print(f"tracelake: error: {printable(str(exc).strip())}", file=sys.stderr)
            return False
        except KeyboardInterrupt:
            if not interactive:
                raise
            print("tracelake: interrupted; the prompt goes on", file=sys.stderr)
            return True

    with shell.stack:
        for line in _lines(interactive, history, prompt):
            if line is None or (not buffer and not line.strip()):  # Ctrl-C, or nothing typed
                buffer, prompt[0] = [], PROMPT
                continue
            if not buffer and line.lstrip().startswith("."):
                try:
                    if not shell.dot(line):
                        break
                except TracelakeError as exc:
                    failed = True
                    print(f"tracelake: error: {printable(str(exc).strip())}", file=sys.stderr)
                continue
            buffer.append(line)
            if not line.rstrip().endswith(";"):
                prompt[0] = MORE
                continue
            sql, buffer, prompt[0] = "\n".join(buffer), [], PROMPT
            failed = not run(sql) or failed
        else:
            if "".join(buffer).strip():  # the input ended inside a statement: run it as it is
                failed = not run("\n".join(buffer)) or failed
    return 2 if failed and not interactive else 0
