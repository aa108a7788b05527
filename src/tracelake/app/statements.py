"""Read-only statements over the lake, for `tracelake query`, the `tracelake sql` prompt and the
Python API: the guard (app/readonly.py), the answers of the schema files and the Delta log
(app/schema_sql.py), the engine, and a mistake explained (app/sql_errors.py). Printing is
app/results.py's.
"""

from __future__ import annotations

from tracelake.app.results import Result
from tracelake.errors import TracelakeError


def schema_answer(config, sql: str) -> Result | None:
    """(header, rows) of DESCRIBE TABLE / SHOW COLUMNS / SHOW CREATE TABLE of a lake table, from
    its schema file; None for any other statement or table (the engine answers, or says what is
    wrong)."""
    from tracelake.app.schema_sql import schema_question
    from tracelake.delta.catalog import list_lake_tables
    from tracelake.schema import table_schema

    question = schema_question(sql)
    if question is None:
        return None
    for layer, table in list_lake_tables(config):
        if config.table_name(layer, table) == question.table:
            return question.answer(table_schema(f"{layer}.{table}"), config.table_path(layer, table))
    return None


def statement_errors() -> tuple[type[Exception], ...]:
    """What the engine raises for a mistake in the statement (an unknown table, bad syntax, a
    division by zero, a failed cast, a version whose files a vacuum removed): the user's to fix,
    so exit 2, not an internal error."""
    from pyspark import errors as E

    return (E.AnalysisException, E.IllegalArgumentException, E.ArithmeticException, E.DateTimeException,
            E.ArrayIndexOutOfBoundsException, E.UnsupportedOperationException, E.SparkRuntimeException,
            E.SparkNoSuchElementException, E.SparkUpgradeException, E.QueryExecutionException,
            E.ParseException)


def _failed(exc: Exception, sql: str | None = None, config=None) -> TracelakeError:
    """One line: what is wrong in a SQL user's words when it is a known mistake, the engine's
    first line kept beside it."""
    from tracelake.app.sql_errors import explain

    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    sentence = explain(text, sql, config) if sql is not None else None
    return TracelakeError(f"query failed: {sentence} [the engine: {text}]" if sentence else f"query failed: {text}")


def _rows(table) -> list[tuple]:
    """Rows of an Arrow table by position: two columns of one name both stay."""
    if table.num_columns == 0:
        return [()] * table.num_rows
    return list(zip(*(column.to_pylist() for column in table.columns)))


def _arrow_parts(frame):
    """The result as Arrow tables, as a Spark Connect server streams them (a batch at a time),
    or a classic session gives them a partition at a time (_classic_parts)."""
    import pyarrow as pa

    if not type(frame).__module__.startswith("pyspark.sql.connect"):  # a classic session has no client
        yield from _classic_parts(frame)
        return
    client = frame.sparkSession.client
    for part in client.to_table_as_iterator(frame._plan.to_proto(client), frame._plan.observations):
        if isinstance(part, pa.Table):
            yield part


CLASSIC_PART_ROWS = 65_536


def _classic_parts(frame):
    """A classic session's result a partition at a time (toLocalIterator: 2.9 GB for a 5 M-row
    export held whole, measured), as Arrow tables of the types toArrow gives, so a streamed
    export prints as a whole one does. A row's timestamp is this process's local time, made UTC
    again here. Nested columns, which rows and Arrow spell apart, come whole."""
    import itertools
    from datetime import UTC

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import ArrayType, MapType, StructType, TimestampType

    fields = frame.schema.fields
    if not fields or any(isinstance(f.dataType, ArrayType | MapType | StructType) for f in fields):
        yield frame.toArrow()
        return
    schema = to_arrow_schema(frame.schema)
    zoned = [i for i, f in enumerate(fields) if isinstance(f.dataType, TimestampType)]
    rows = frame.toLocalIterator(prefetchPartitions=False)
    while chunk := list(itertools.islice(rows, CLASSIC_PART_ROWS)):
        columns = [list(values) for values in zip(*chunk)]
        for i in zoned:
            columns[i] = [v if v is None else v.astimezone(UTC) for v in columns[i]]
        yield pa.Table.from_arrays([pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)],
                                   schema=schema)


def _streamed(frame, sql: str, config):
    """Every row of `frame`, a batch held at a time; a failure while they come is one line."""
    try:
        for part in _arrow_parts(frame):
            yield from _rows(part)
    except statement_errors() as exc:
        raise _failed(exc, sql, config) from exc


def run_sql(spark, sql: str, limit: int | None = None, config=None, stream: bool = False) -> Result:
    """The statement's result; with `limit`, at most that many rows are fetched and `total`
    says how many there were; with `stream` and no limit, its rows are an iterator that holds a
    batch at a time (an export larger than memory). Its mistakes become one line
    (app/sql_errors.py)."""
    try:
        frame = spark.sql(sql)
        if stream and not limit:
            return Result(frame.columns, _streamed(frame, sql, config))  # columns: the statement checked first
        table = (frame.limit(limit + 1) if limit else frame).toArrow()
        total = None
        if limit and table.num_rows > limit:
            total, table = frame.count(), table.slice(0, limit)
    except statement_errors() as exc:
        raise _failed(exc, sql, config) from exc
    return Result(table.column_names, _rows(table), total)


def history_answer(engine, config, sql: str) -> Result | None:
    """DESCRIBE HISTORY layer.table [LIMIT n] of a lake table, from its Delta log on every
    profile (Sail's parser has no such statement); None for any other statement."""
    from datetime import UTC, datetime

    from tracelake.app.schema_sql import history_question
    from tracelake.delta.catalog import list_lake_tables
    from tracelake.delta.maintenance import history

    question = history_question(sql)
    if question is None:
        return None
    name, limit = question
    for layer, table in list_lake_tables(config):
        if config.table_name(layer, table) == name:
            commits = history(engine, config.table_path(layer, table), limit)
            return Result(("version", "timestamp", "operation"),
                          [(c.version, datetime.fromtimestamp(c.timestamp_ms / 1000, UTC) if c.timestamp_ms else None,
                            c.operation) for c in commits])
    from tracelake.app.sql_errors import explain

    raise TracelakeError(f"query failed: {explain('TABLE_OR_VIEW_NOT_FOUND', f'SELECT * FROM {name}', config)}")


def parser_message(spark, word: str) -> TracelakeError:
    """The engine parser's words for a statement led by `word`, a misspelt read keyword
    (readonly.NotAStatement): only the word is sent, which no parser takes for a statement."""
    try:
        spark.sql(word).toArrow()
    except statement_errors() as exc:
        return _failed(exc)
    return TracelakeError(f"query failed: {word} begins no statement")  # pragma: no cover - no parser takes it


def answer(engine, config, sql: str, limit: int | None = None, stream: bool = False) -> Result:
    """A checked statement's result: from the schema files or the Delta log when they answer
    it, else the engine (at most `limit` rows fetched; with `stream`, run_sql's)."""
    from tracelake.app.readonly import NotAStatement, check_read_only

    try:
        check_read_only(sql)
    except NotAStatement as exc:
        raise parser_message(engine.spark, exc.word) from None
    return (schema_answer(config, sql) or history_answer(engine, config, sql)
            or run_sql(engine.spark, sql, limit, config, stream))
