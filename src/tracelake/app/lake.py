"""`tracelake.open(lake)`: the lake from Python (a notebook, a script), read-only.

It gives what `tracelake query` gives, through the same guard: a write (DELETE, MERGE, DROP …)
or a read of files outside the lake is refused before the engine sees it, and the session is
never handed out, so nothing here can change a table past the lock, the lineage and the rules
of `tracelake ingest`. It uses the engine `tracelake serve` keeps for the lake when one runs,
else starts its own (stopped by `close()`, the `with` block's end, or the process's exit). The
engine logs only errors, and nothing is written to the working folder.

    import tracelake
    with tracelake.open("lake") as lake:
        lake.sql("SELECT cluster, count(*) AS jobs FROM bronze.itp_jobs GROUP BY cluster").to_pandas()
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from tracelake.errors import TracelakeError


class Frame:
    """A statement's answer, fetched when asked: `to_arrow()`, `to_pandas()`, `rows()`,
    `count()`, `limit(n)`. It reads only; there is no way from it to a writer."""

    def __init__(self, lake: Lake, statement: str, answer: Any = None, limit: int | None = None) -> None:
        self._lake, self._statement, self._answer, self._limit = lake, statement, answer, limit

    def _frame(self):
        frame = self._lake._engine.spark.sql(self._statement)
        return frame.limit(self._limit) if self._limit is not None else frame

    def limit(self, n: int) -> Frame:
        if self._answer is not None:
            return Frame(self._lake, self._statement, type(self._answer)(self._answer.columns, self._answer.rows[:n]))
        return Frame(self._lake, self._statement, limit=n if self._limit is None else min(n, self._limit))

    @property
    def columns(self) -> list[str]:
        return list(self._answer.columns) if self._answer is not None else list(self._run(lambda f: f.columns))

    def _run(self, fetch):
        from tracelake.app.statements import _failed, statement_errors

        with self._lake._served():
            try:
                return fetch(self._frame())
            except statement_errors() as exc:
                raise _failed(exc, self._statement, self._lake.config) from exc

    def to_arrow(self):
        """A pyarrow Table (columns of one name all kept)."""
        import pyarrow as pa

        if self._answer is not None:
            columns = list(zip(*self._answer.rows)) if self._answer.rows else [()] * len(self._answer.columns)
            return pa.Table.from_arrays([pa.array(list(c)) for c in columns], names=list(self._answer.columns))
        return self._run(lambda f: f.toArrow())

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def rows(self) -> list[tuple]:
        table = self.to_arrow()
        return list(zip(*(c.to_pylist() for c in table.columns))) if table.num_columns else []

    def count(self) -> int:
        return len(self._answer.rows) if self._answer is not None else self._run(lambda f: f.count())

    def __repr__(self) -> str:
        from tracelake.app.results import TABLE_ROWS, aligned
        from tracelake.app.statements import run_sql

        if self._answer is not None:
            return "\n".join(aligned(self._answer.columns, self._answer.rows))
        with self._lake._served():
            shown = run_sql(self._lake._engine.spark, self._statement, self._limit or TABLE_ROWS, self._lake.config)
        return "\n".join(aligned(shown.columns, shown.rows, shown.total))


class Lake:
    """An open lake: `sql(statement)`, `table(name)`, `tables()`, `close()`."""

    def __init__(self, config, engine, gone: list[str] | None = None) -> None:
        self.config, self._engine, self._gone = config, engine, gone if gone is not None else []
        from tracelake.delta.catalog import register_all

        register_all(engine.spark, config)

    @contextlib.contextmanager
    def _served(self) -> Iterator[None]:
        """A call on the engine; when the serve it was attached to stopped (watch_serve), its
        one line instead of whatever the closed channel raised."""
        if self._gone:
            raise TracelakeError(self._gone[0])
        try:
            yield
        except Exception:
            if self._gone:
                raise TracelakeError(self._gone[0]) from None
            raise

    def tables(self) -> list[str]:
        """The lake's tables, as `layer.table`."""
        from tracelake.delta.catalog import list_lake_tables

        return [self.config.table_name(layer, table) for layer, table in list_lake_tables(self.config)]

    def sql(self, statement: str) -> Frame:
        """One read-only statement, checked as `tracelake query` checks it."""
        from tracelake.app.readonly import NotAStatement, check_read_only
        from tracelake.app.statements import history_answer, parser_message, schema_answer

        try:
            check_read_only(statement)
        except NotAStatement as exc:
            raise parser_message(self._engine.spark, exc.word) from None
        answer = schema_answer(self.config, statement) or history_answer(self._engine, self.config, statement)
        return Frame(self, statement, answer)

    def table(self, name: str) -> Frame:
        """A whole table by its name (`bronze.itp_jobs`); an unknown one names the nearest."""
        from tracelake.app.sql_errors import explain

        if name not in self.tables():
            raise TracelakeError(explain("TABLE_OR_VIEW_NOT_FOUND", f"SELECT * FROM {name}", self.config) or
                                 f"no table {name} in the lake")
        return self.sql(f"SELECT * FROM {name}")

    def close(self) -> None:
        if self._engine is not None and not self._gone:  # a stopped serve's session has nothing to end
            self._engine.stop()
        self._engine = None

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tracelake lake at {self.config.lake_root} ({self.config.profile}), {len(self.tables())} tables>"


def open_lake(lake: str | os.PathLike | None = None, *, profile: str | None = None, connect_url: str | None = None,
              conf: Sequence[str] = ()) -> Lake:
    """The lake at `lake` (a folder or an object-store URL; default: conf's lake_root), read-only.
    `conf` takes KEY=VALUE overrides as `--conf` does."""
    from tracelake.app.cli import _require_lake, _start
    from tracelake.app.serve import stopped_line
    from tracelake.config import load_config
    from tracelake.io import objectstore

    os.environ.setdefault("RUST_LOG", "error")  # the engine's INFO lines are not the notebook's output
    overrides = {"lake_root": None if lake is None else str(lake), "connect_url": connect_url}
    config = load_config(profile=profile, overrides=overrides, conf_pairs=list(conf))
    if config.profile == "spark" and not any(c.startswith("spark_conf.spark.log.level=") for c in conf):
        # classic Spark logs a failed statement's JVM stack at ERROR: the exception says it, once
        config = load_config(profile=profile, overrides=overrides, conf_pairs=[*conf, "spark_conf.spark.log.level=OFF"])
    stored = objectstore.check_reachable(config.lake_root) if objectstore.is_url(config.lake_root) else None
    _require_lake(config, stored)
    gone: list[str] = []

    def lost(pid: int) -> None:
        """The serve this lake used stopped: a notebook stays up; calls in flight end now, as
        the closed channel cancels them, and every later call says so (Lake._served)."""
        gone.append(stopped_line(pid, "this lake", "open the lake again"))
        with contextlib.suppress(Exception):
            engine.spark.client.close()

    engine = _start(config, lost)
    opened = Lake(config, engine, gone)
    atexit.register(opened.close)
    return opened
