"""The run's scratch Parquet: the only writer of it. A parse or a derived table is staged once, so
counts, the gate and the commit read stored rows instead of recomputing them."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tracelake.io import objectstore
from tracelake.schema import RESERVED_PREFIX


@dataclass(frozen=True)
class Scratch:
    """Where the engine writes and reads a run's scratch Parquet: a local folder, or a prefix in
    the lake's store (`<lake>/_staging/<run id>/scratch`) when the engine's tasks run on other
    machines that share no disk with this one. Joined as text: pathlib.Path would turn
    `s3://bucket/key` into `s3:/bucket/key`."""

    root: str

    def __truediv__(self, name: str) -> Scratch:
        return Scratch(f"{self.root.rstrip('/')}/{name}")

    def __str__(self) -> str:
        return self.root

    def beside(self, suffix: str) -> Scratch:
        """The sibling whose name is this one's plus `suffix` (`…/t.parquet-exact`)."""
        return Scratch(self.root.rstrip("/") + suffix)

    def exists(self) -> bool:
        """Whether anything is stored there (a folder, or any object under the prefix)."""
        if objectstore.is_url(self.root):
            return bool(objectstore.list_files(self.root))
        return Path(self.root).is_dir()

    def remove(self) -> None:
        """Everything stored there; nothing there is fine."""
        if objectstore.is_url(self.root):
            objectstore.delete_under(self.root)
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def local(self) -> Path:
        """The folder on this disk; an error for a URL (only local writes move files by path)."""
        if objectstore.is_url(self.root):
            raise ValueError(f"{self.root} is not a folder on this machine")
        return Path(self.root)


@dataclass(frozen=True)
class Sink:
    """Where a pass writes its kept rows itself (io.sinkfiles), and the constant columns the run
    gives every row it writes to bronze (its lineage), which those files must hold too."""

    folder: Scratch
    constants: Mapping[str, Any]


@dataclass(frozen=True)
class FastParse:
    """A fast pass's parse, trusted only once its stored rows are checked (run.parsing.settle_parse).
    Its fields are data: `frame` is the parser contract with io.parse.VERDICT, EXACT on a row that
    stands for input to parse line by line instead (the parser's `remainder` says how); the parse
    holds whole when no staged row is EXACT. Which rules it proves, and with which columns, its
    table's suite says (meta.proven_by), never the parse."""

    frame: DataFrame
    # a boolean column of `frame` whose true rows are staged in files of their own (apart_folder):
    # the others' files can then be a derived table's too (e.g. the port pass's rates)
    apart: str | None = None
    # `frame` is in its staged form already: a row that failed to parse holds no value, and no row
    # holds its raw line or values, so staging evaluates nothing per row but the flags of rules
    # not proven (quality.split.staged_form's `clean`)
    clean: bool = False
    # `frame`'s rows carry no raw line or values, which a quarantine row needs: the parse holds only
    # where no staged row is flagged by a quarantine rule it does not prove, and no key of a
    # uniqueness rule repeats (those rules are then proven too)
    needs_raw: bool = False
    # False: the parse never holds by itself, its remainder always runs (the AcmeTrace pass: a
    # repeated Time spans files the pass reads apart)
    alone: bool = True
    # the sink's folder where the pass wrote rows itself, beside `frame`'s: kept rows with the
    # table's columns, VERDICT and the sink's constants (io.sinkfiles); staged as they are. With
    # `apart`, they are not set apart, and hold every column of the staged form: they are moved
    # in among the staged files not set apart (run.parsing), and read with them
    written: Scratch | None = None


# what a killed run can leave in a staging folder: a run's own folder (context.Run's run ids) or
# the scratch of a duplicate-key heal (delta.commit, heal_folder_name)
LEFT_BEHIND = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}|heal-[0-9a-f]{8}")


def heal_folder_name() -> str:
    """A new heal's scratch folder name. Heals run under the lake's write lock, so one that a
    killed run left is found by the next run's sweep of stale staging (LEFT_BEHIND)."""
    return f"heal-{uuid.uuid4().hex[:8]}"


def parse_path(scratch: Scratch, table: str) -> Scratch:
    """Where a run stages the parse of `table` (a second folder, `-exact`, may hold the rows
    parsed line by line beside it): the bronze step writes it, a derived rebuild may read it."""
    return scratch / f"{table}.parquet"


def exact_path(path: str | Path | Scratch) -> Scratch:
    return Scratch(str(path)).beside("-exact")


def all_kept_mark(path: str | Path | Scratch) -> Scratch:
    """An empty folder beside a staged parse saying that its counts found every row kept (no
    parse problem, no rule's flag, no repeated copy): a derived table that takes the staged files
    as they lie (api.tables.staged_clean) then need not scan them again. Measured on a full
    Zhejiang hour: that scan took 1.5 s. Only on a local scratch."""
    return Scratch(str(path)).beside("-all-kept")


def mark_all_kept(path: str | Path | Scratch) -> None:
    mark = all_kept_mark(path)
    if not objectstore.is_url(str(mark)):
        mark.local().mkdir(parents=True, exist_ok=True)


# what the engine raises when a query fails (Spark Connect, classic Spark, a function's own error
# reported by either; a store or disk the driver reads): a fast parse that fails so is parsed again
# exactly. An error of this process's own code (a TypeError, a wrong call) is not caught
ENGINE_ERRORS: tuple[type[BaseException], ...] = (PySparkException, Py4JError, OSError)


@dataclass(frozen=True)
class Footers:
    """What the footers of a staged parse's Parquet files say of its rows (staged_footers)."""

    rows: int
    true_in: Mapping[str, tuple[str, ...]]  # each boolean column asked about that is true on some row: the files
    worst: int  # the highest value of the integer column asked about (0 with no rows, or none asked)
    files: int = 0  # how many of the files the parse is staged in hold a row

    @property
    def true(self) -> frozenset[str]:
        """The boolean columns asked about that are true on some row."""
        return frozenset(self.true_in)


def staged_footers(path: str | Path | Scratch, booleans: Collection[str], highest: str | None = None) -> Footers | None:
    """The rows of the Parquet files staged at `path`, which of the `booleans` columns is true on
    some row and in which files, and the highest value of the integer column `highest` (e.g.
    io.parse.VERDICT): from the files' footers (their row groups' statistics), without a scan.
    None where the footers cannot tell: a URL, a column missing, a row group without statistics.
    Measured on a full Zhejiang hour: the scan that counted the same took 0.75 s."""
    if objectstore.is_url(str(path)):
        return None
    import pyarrow.parquet as pq

    rows, true, worst, filled = 0, {}, 0, 0
    for staged in sorted(Path(str(path)).rglob("*.parquet")):
        meta = pq.ParquetFile(staged).metadata
        rows += meta.num_rows
        filled += meta.num_rows > 0
        columns = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
        if any(name not in columns for name in (*booleans, *([highest] if highest else []))):
            return None
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if highest is not None and group.num_rows:
                stats = group.column(columns[highest]).statistics
                if stats is None or not stats.has_min_max:
                    return None
                worst = max(worst, int(stats.max))
            for name in booleans:
                stats = group.column(columns[name]).statistics
                if stats is None:
                    return None
                if stats.has_min_max:
                    if stats.max and str(staged) not in true.setdefault(name, []):
                        true[name].append(str(staged))
                elif stats.num_values:  # values but no min/max: cannot tell
                    return None
    return Footers(rows, {name: tuple(found) for name, found in true.items()}, worst, filled)


def move_files(files: Scratch, folder: Scratch, columns: Collection[str]) -> bool:
    """The Parquet files under `files` renamed into `folder`, both on this disk (a pass writes
    them only where the scratch is: FastParse.written), each first checked to hold exactly
    `columns`: a file that does not would read back as nulls beside the others. Returns whether
    any file moved."""
    import pyarrow.parquet as pq

    found = sorted(files.local().rglob("*.parquet"))
    for path in found:
        held = set(pq.read_schema(path).names)
        if held != set(columns):
            raise ValueError(f"{path}: a written file's columns are not the staged ones: "
                             f"{sorted(held ^ set(columns))} differ")
    if found:
        folder.local().mkdir(parents=True, exist_ok=True)
    for path in found:
        os.replace(path, folder.local() / path.name)
    return bool(found)


STAGING_CODEC = "zstd"


def write_staged(df: DataFrame, path: str | Path | Scratch, mode: str = "overwrite", apart: str | None = None) -> None:
    """Write Parquet that the run reads back, and that a commit may take as a table's data files
    as they lie (delta.staged_files): zstd, the engine's own default for tables. Measured on a
    full hour's parse (11.3 M rows, 3 + 3 runs alternated): 10.0-11.6 s against snappy's
    10.1-11.5 s, and 410 MB against 602 MB; the whole CLI ingest of that hour took 1.04x
    snappy's wall (4 + 4 runs alternated), for a lake about a third smaller. With `apart` (a
    boolean column), the rows where it is true and the others go to two sub-folders
    (apart_folder); the column stays in the files too. Measured on that hour's pass (2 + 2 runs
    alternated, in process): 10.7-10.9 s against 11.0 s written as one folder."""
    writer = (df if apart is None else df.select("*", F.col(apart).alias(APART))).write.mode(mode)
    if apart is not None:  # an earlier batch's folders go first: a write by folders need not remove those it skips
        if mode == "overwrite":
            Scratch(str(path)).remove()
        writer = writer.partitionBy(APART)
    writer.option("compression", STAGING_CODEC).parquet(str(path))


APART = f"{RESERVED_PREFIX}apart"  # the folder column of a write with `apart`; its values read back as text


def apart_folder(path: str | Path | Scratch, value: bool) -> Scratch:
    """The sub-folder of a staged write with `apart` that holds the rows where it was `value`."""
    return Scratch(str(path)) / f"{APART}={str(value).lower()}"


def stage(df: DataFrame, path: str | Path | Scratch, apart: str | None = None) -> DataFrame:
    """Write `df` to Parquet at `path` and read it back, so later queries read stored rows. With
    zero rows Sail writes no file and the read-back has no columns: the schema is kept then.
    `apart`: see write_staged."""
    write_staged(df, path, apart=apart)
    stored = df.sparkSession.read.parquet(str(path))
    if apart is not None and stored.columns:
        stored = stored.select(*df.columns)
    if stored.columns != df.columns:
        return df.sparkSession.createDataFrame([], df.schema)
    return stored
