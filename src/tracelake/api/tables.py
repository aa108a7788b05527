"""The reads of the lake, and of the run's own staged parse, that a source's builds and report
pages make. A source imports them from here, never from `tracelake.delta` or `tracelake.run`,
so the kernel may change how it stores and compares tables without touching a source."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tracelake.config import Config
from tracelake.delta.catalog import lake_holds, partition_predicate, read_tables
from tracelake.delta.commit import StagedBeside
from tracelake.delta.fingerprint import changed_groups
from tracelake.delta.staged_files import commits_staged
from tracelake.io import objectstore
from tracelake.io.parse import kept
from tracelake.io.staging import Scratch, all_kept_mark, apart_folder, exact_path, parse_path
from tracelake.quality.gate import load_suite
from tracelake.quality.split import row_flags

__all__ = ["StagedBeside", "changed_groups", "commits_staged", "lake_holds", "partition_predicate", "read_tables",
           "staged_clean", "staged_parse"]


def staged_parse(spark: SparkSession, scratch: Scratch, table: str) -> DataFrame | None:
    """The rows of `table` that this run's bronze step parsed, staged and kept (io.parse.kept),
    with every column the parser added (e.g. values it computed in the same pass); None when the
    run staged no parse of `table`, or when a rule only GX evaluates may have set rows aside (then
    only the table itself says what was kept)."""
    path = parse_path(scratch, table)
    _, by_gx = row_flags(load_suite(table))
    if by_gx or not path.exists():
        return None
    parts = [spark.read.parquet(str(p)) for p in (path, exact_path(path)) if p.exists()]
    parts = [p for p in parts if p.columns]  # Sail writes no file for zero rows
    if not parts:
        return None
    rows = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1], allowMissingColumns=True)
    return rows.filter(kept())


def staged_clean(spark: SparkSession, scratch: Scratch, table: str) -> Scratch | None:
    """The folder of this run's staged parse of `table` that holds the rows a parser did not set
    apart (io.staging.FastParse.apart), when every row there was kept (io.parse.kept) and nothing
    was parsed line by line beside it: files a derived table can take as they lie. None
    otherwise, or for a scratch behind a URL."""
    path = parse_path(scratch, table)
    folder = apart_folder(path, False)
    _, by_gx = row_flags(load_suite(table))
    if by_gx or objectstore.is_url(str(path)) or exact_path(path).exists() or not folder.exists():
        return None
    if all_kept_mark(path).exists():  # the bronze step's counts found no row to leave out
        return folder
    rows = spark.read.parquet(str(folder))
    return None if rows.filter(~kept()).limit(1).collect() else folder


INPUTS_RECORD = "_inputs.json"  # in the lake: each bronze table's last raw folder, and whether it was generated


def read_inputs(config: Config) -> dict[str, dict]:
    """The lake's record of its bronze tables' inputs, written by each ingest
    (run.pipeline.record_inputs): {table: {"raw": folder, "synthetic": bool}}; {} when none."""
    import json

    try:
        record = json.loads((Path(config.lake_root) / INPUTS_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def synthetic_tables(config: Config) -> set[str]:
    """The bronze tables whose last ingest read files `tracelake generate` wrote: what a report
    must label as synthetic."""
    return {table for table, seen in read_inputs(config).items() if isinstance(seen, dict) and seen.get("synthetic")}
