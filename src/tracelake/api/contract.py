"""What a source hands the kernel: its bronze inputs (TableInput) and its derived tables (Derived).

A source package (`tracelake.sources.<name>`) exposes `plan(raw_dir, staging) -> list[TableInput]`
and `DERIVED: list[Derived]`; `ingest` turns each TableInput into one bronze table, `pipeline`
rebuilds every Derived whose inputs changed in the run, whichever package declared it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tracelake.config import Config
from tracelake.delta.catalog import read_tables
from tracelake.errors import TracelakeError
from tracelake.io.staging import Checked, Scratch
from tracelake.io.text import RawFile
from tracelake.schema import TableSchema, load_schema

# (spark, files, schema) -> frame with the parser contract (io.parse.finish): the schema's data
# columns, source_file, raw_line, raw_values_json, ROW_ID and PARSE_ERRORS (io.parse; array<string>,
# empty = good; raw_line and raw_values_json are stored only for rows set aside, so a parser may
# leave them null in good rows), plus any columns of its own computed in the same pass (staged
# with the rows, api.tables.staged_parse); a Checked when it is a fast parse to be trusted only
# after a check. A parser that stages scratch of its own takes the place as the keyword `staging`,
# bound by its plan to the run's staging folder (scratch_bound moves it where the engine reads)
Parser = Callable[[SparkSession, list[RawFile], TableSchema], DataFrame | Checked]
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
    parser: Parser | None = None  # None: delimited text with the schema's fixed raw header
    # the parser opens the files in this process (a workbook): they stay on its disk, never
    # moved to a store for the engine (io/storestage.py)
    driver_reads: bool = False


def scratch_bound(item: TableInput, scratch: Scratch) -> TableInput:
    """`item` with its parser's scratch (the `staging` keyword its plan bound) at `scratch`: the
    run's prefix in the lake's store when the engine's tasks share no disk with this process."""
    parser = item.parser
    if isinstance(parser, partial) and "staging" in parser.keywords:
        return replace(item, parser=partial(parser, staging=scratch))
    return item


def lake_bound(parser: Parser | None, config: Config) -> Parser | None:
    """`parser` given the lake it ingests into, when its plan left the keyword `config` as None
    for that: a parser that continues from what the lake holds (the port pass, from the stored
    hour before its files' hour)."""
    if isinstance(parser, partial) and "config" in parser.keywords and parser.keywords["config"] is None:
        return partial(parser, config=config)
    return parser


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
