"""What a source hands the kernel: its bronze inputs (TableInput, each with its parser) and its
derived tables (Derived).

A source package (`tracelake.sources.<name>`) exposes `plan(raw_dir, staging) -> list[TableInput]`
and `DERIVED: list[Derived]`; `ingest` turns each TableInput into one bronze table, `pipeline`
rebuilds every Derived whose inputs changed in the run, whichever package declared it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.delta.catalog import read_tables
from tracelake.errors import TracelakeError
from tracelake.io.parse import EXACT, VERDICT
from tracelake.io.staging import FastParse, Scratch, Sink
from tracelake.io.text import RawFile
from tracelake.quality.gate import limits_proven_by as suite_limits
from tracelake.quality.gate import load_suite
from tracelake.schema import TableSchema, load_schema

log = logging.getLogger(__name__)

# (spark, files, schema) -> frame with the parser contract (io.parse.finish): the schema's data
# columns, source_file, raw_line, raw_values_json, ROW_ID and PARSE_ERRORS (io.parse; array<string>,
# empty = good; raw_line and raw_values_json are stored only for rows set aside, so a parser may
# leave them null in good rows), plus any columns of its own computed in the same pass (staged
# with the rows, api.tables.staged_parse). A parser that needs more than its files is a Parser
PlainParser = Callable[[SparkSession, list[RawFile], TableSchema], DataFrame]


class Parser:
    """A parser that says what it needs beyond its files, and may read them in a fast pass that
    proves some of its table's rules itself. The kernel calls `parse` with the lake ingested into
    when `needs_lake` (e.g. to continue from the hour before) and the run's scratch, where the
    engine reads, when `needs_scratch`. `parse` returns the parser contract, or an
    io.staging.FastParse: its rows are then trusted once staged and checked, and a pass that did
    not hold is finished by `remainder` (or, where that gives None, by `exact` over every file).
    The rules a parser proves are its table's suite's to say: meta.proven_by names the parser by
    `name` (and the column that proves a rule with a query), meta.limits the thresholds its
    checks use (limits_proven_by)."""

    name: ClassVar[str] = ""  # how a suite's meta.proven_by names this parser
    needs_lake: ClassVar[bool] = False  # parse() is given the Config of the lake ingested into
    needs_scratch: ClassVar[bool] = False  # parse(), exact() and remainder() are given the run's scratch
    # parse() is given an io.staging.Sink where its fast pass may write kept rows itself (returned
    # as FastParse.written): only for a table whose suite has no quarantine rule the pass does not prove
    needs_sink: ClassVar[bool] = False

    def parse(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              lake: Config | None = None, scratch: Scratch | None = None,
              sink: Sink | None = None) -> DataFrame | FastParse:
        raise NotImplementedError

    def exact(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              scratch: Scratch | None = None) -> DataFrame:
        """The line-by-line parse of `files`: every row its value or its reasons."""
        raise NotImplementedError

    def remainder(self, spark: SparkSession, staged: DataFrame, files: list[RawFile], schema: TableSchema, *,
                  scratch: Scratch | None = None) -> tuple[DataFrame | None, DataFrame | None] | None:
        """A fast parse that did not hold, finished: (its staged rows to keep as they are, the rows
        to parse again, None: none), or None to parse every file again exactly. The rows to keep
        may be None where the parse set its other rows apart (FastParse.apart) and every row not
        set apart is kept: their files may then be the table's as they lie. By default every
        staged row but the EXACT ones, and the exact parse of the files those name."""
        marked = sorted(r[0] for r in staged.filter(F.col(VERDICT) == EXACT).select("source_file").collect())
        log.info("%s: %d file(s) parsed line by line", schema.full_name, len(marked))
        by_name = {f.name: f for f in files}
        return (staged.filter(F.col(VERDICT) != EXACT),
                self.exact(spark, [by_name[name] for name in marked], schema, scratch=scratch))


def limits_proven_by(table: str, parser: str) -> dict[str, float]:
    """The thresholds (meta.limits) of the rules of `table` that `parser` proves: what a fast pass
    holds its rows to, stated once, in the suite."""
    return suite_limits(load_suite(table), parser)


Build = Callable[[SparkSession, Config], DataFrame | None]
Partitions = tuple[tuple, ...]
# (spark, config, changed partitions of the inputs that changed, the run's scratch place for an
# intermediate worth storing once) -> (the new rows of the output partitions to replace, those
# partitions; None: the whole table), or None while the inputs are not there yet
PartialBuild = Callable[[SparkSession, Config, dict[str, Partitions], Scratch],
                        tuple[DataFrame, Partitions | None] | None]


@dataclass(frozen=True)
class TableInput:
    table: str
    files: list[RawFile]
    parser: Parser | PlainParser | None = None  # None: delimited text with the schema's fixed raw header
    # the parser opens the files in this process (a workbook): they stay on its disk, never
    # moved to a store for the engine (io/storestage.py)
    driver_reads: bool = False


@dataclass(frozen=True)
class Derived:
    """A silver/gold table rebuilt when any of `inputs` changed; `build` returns None while
    the inputs it needs are not in the lake yet. A time-partitioned table also has `rebuild`,
    which recomputes only the partitions that the changed input partitions affect; the
    pipeline uses it whenever every changed input says which partitions changed."""

    table: str
    inputs: tuple[str, ...]
    build: Build
    rebuild: PartialBuild | None = None


def derived(
    table: str, transform: Callable[..., DataFrame | None], required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> Derived:
    """The common Derived: read `required` tables (no rebuild while one is absent) and
    `optional` ones (an empty frame of their schema while absent), then
    `transform(*required, *optional)`."""

    def build(spark: SparkSession, config: Config) -> DataFrame | None:
        frames = read_tables(spark, config, *required, *optional)
        if any(f is None for f in frames[: len(required)]):
            return None
        rest = [
            f if f is not None else spark.createDataFrame([], load_schema(name).spark_schema())
            for f, name in zip(frames[len(required):], optional)
        ]
        return transform(*frames[: len(required)], *rest)

    build.__name__ = f"build_{table.replace('.', '_')}"
    return Derived(table, (*required, *optional), build)


def combined_plan(plans: Iterable[Callable[[Path, Path], list[TableInput]]], raw_dir: Path, staging: Path,
                  expected: str) -> list[TableInput]:
    """A source made of parts, each with its own plan: all their inputs in order, or an error
    naming what the release folder should have held."""
    inputs = [item for plan in plans for item in plan(raw_dir, staging)]
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no {expected}")
    return inputs
