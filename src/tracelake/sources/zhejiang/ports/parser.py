"""The parser of the port files: one pass over the hour's files, or the exact line-by-line parse.

One file per leaf port, a 10-column CSV polled about every 0.5 s. `SaveTimeUTC` (epoch ms) is the
time key; `SaveTime` (China time with a Chinese weekday) is kept as delivered text.

Reading: one pass per file (filepass, grouppass). A DataFrame of the hour's file paths goes through
mapInArrow; each file is read once, whole, by pyarrow's CSV reader where the task runs, checked
(field counts, UTF-8, types, the port and switch on every line), typed, and rated with numpy in
the same pass (one file is one port's series: no shuffle, no sort of the hour), on from the
carried state of the hour before (carried_into_pass). The rows are staged once with their rates;
bronze.zj_port_counters is committed from them, and so is silver.zj_port_rates, which computes
again only the rows of the files the pass set apart (rebuild.from_pass). A file that fails a check is parsed line by line
instead (one text read of that file, each line split once), so every quarantine row and reason
is the exact parse's. Rejected earlier, measured: Spark's CSV reader per switch folder with
checks after the fact (a second read of every file, and window rates over the hour: a sort of
every row), binaryFile + pyarrow in mapInArrow (the bytes through the engine, ~15 s an hour).
"""

from __future__ import annotations

import logging
import os
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from tracelake.api.contract import FastParse, Parser, limits_proven_by
from tracelake.api.tables import commits_staged, read_tables
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io import objectstore, progress
from tracelake.io.frames import takes_dictionary_strings
from tracelake.io.parse import KEPT, PARSE_ERRORS, REPEATED, ROW_ID, VERDICT, split_fields, type_fields, verdict
from tracelake.io.sinkfiles import sink_spec
from tracelake.io.staging import Scratch, Sink, stage
from tracelake.io.text import RawFile, check_header, file_size, read_lines
from tracelake.schema import TableSchema, load_schema
from tracelake.sources.zhejiang.clock import shift_hour
from tracelake.sources.zhejiang.ports import RATES_TABLE, TABLE, carry, filepass, grouppass
from tracelake.sources.zhejiang.ports.window import carried_state

log = logging.getLogger(__name__)


def _read_lines(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """Data lines of every file with its lineage name and the constants its path implies; a BOM
    or CR is stripped only in files that have them (io.text.read_lines)."""
    return read_lines(spark, files, schema.delimiter.join(schema.raw_header), detect_endings=True)


def parse_fields(lines: DataFrame, schema: TableSchema) -> DataFrame:
    """io.parse.parse_lines' contract and error texts for text lines, each split once, with
    io.parse.finish's measured shortcuts: problem messages and raw_values_json only for rows that
    failed to parse (a parsed row's raw_line splits exactly into the header's fields; to_json on
    every row costs more than the rest of the parse). `format: epoch_ms` columns hold whole
    Unix milliseconds."""
    return type_fields(split_fields(lines, schema.delimiter, len(schema.raw_header)), schema, lean=True)


POLL_VALUES = ("save_time", "in_pkts", "in_octets", "out_pkts", "out_octets", "in_ratio", "out_ratio")


def repeated_polls(parsed: DataFrame) -> DataFrame:
    """Two parsed rows of one file with one (switch, port, instant) key: the same poll delivered
    twice. When they agree on every value, every copy but one is marked
    REPEATED (io.parse.VERDICT: counted as repeated, not kept); when any value differs, every row of that key
    is quarantined with the reason and the file, since which one is true cannot be told (the
    port pass sends such a file here)."""
    ok = F.size(PARSE_ERRORS) == 0
    key = Window.partitionBy("source_file", "device_name", "port_name", "save_time_utc", ok)
    digest = F.xxhash64(*POLL_VALUES)
    marked = parsed.select("*", F.count(F.lit(1)).over(key).alias("_copies"),
                           F.row_number().over(key.orderBy("raw_line")).alias("_nth"),
                           (F.min(digest).over(key) != F.max(digest).over(key)).alias("_conflict"))
    twice = ok & (F.col("_copies") > 1)
    reason = F.concat(F.lit("the same poll (switch, port, SaveTimeUTC) delivered "), F.col("_copies").cast("string"),
                      F.lit(" times with different values in "), F.col("source_file"))
    conflict = twice & F.col("_conflict")
    return marked.select(
        *[F.when(conflict, F.array(reason)).otherwise(F.col(c)).alias(c) if c == PARSE_ERRORS else F.col(c)
          for c in parsed.columns],
        F.when(twice & ~F.col("_conflict") & (F.col("_nth") > 1), verdict(REPEATED)).otherwise(verdict(KEPT))
        .alias(VERDICT))


# ---------------------------------------------------------------- the one pass: each file read, checked, typed and rated

def _file_rows(spark: SparkSession, files: list[RawFile], tasks_here: bool) -> DataFrame:
    """One row per port file (filepass.FILE_COLUMNS), spread over the engine's partitions; with
    `tasks_here` (the tasks write their own files on this machine), over no more than its cores:
    tasks beyond them only contend for one interpreter's lock and add a file each. Measured on a
    full generated hour (2,160 files), whole CLI processes, 5 + 5 runs alternated: 2 tasks against
    the 8 partitions, CPU 0.92x, peak RSS 664 MiB against 852 MiB."""
    rows = [(f.path, f.name, f.constants["hour_cst"], f.constants["folder_device_name"],
             f.constants["file_port_name"]) for f in files]
    frame = spark.createDataFrame(rows, ", ".join(f"{c} string" for c in filepass.FILE_COLUMNS))
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 2)
    if tasks_here:
        partitions = min(partitions, os.cpu_count() or 2)
    return frame.repartition(min(partitions, len(files)))


def one_pass(spark: SparkSession, files: list[RawFile], schema: TableSchema, state: dict | None,
             max_util: float, carry_folder: Path | None = None, sink: Sink | None = None) -> DataFrame:
    """The parse contract of `files` from filepass, one pass each, with the rate columns it adds
    (filepass.RATE_COLUMNS, continuing from `state`: filepass.state_of the hour before; a rate above
    `max_util` of line rate marked where silver's rule would find it) and its
    marker rows (the verdict EXACT: files to parse line by line, which carry a parse problem so
    that nothing counts them as rows). With `carry_folder` (a folder on this machine, where the engine's
    tasks run too), the state the files leave for the hour after is written there (carry). With
    `sink`, the kept rows not set apart are written there by the pass instead (grouppass)."""
    tally = progress.expect([f.path for f in files], [file_size(f) for f in files])  # the step's ETA (io.progress)
    if carry_folder is not None:
        carry.expect(carry_folder, len(files), sorted({f.constants["hour_cst"] for f in files}))
    # with a sink the engine takes only the rows set apart and the markers: a few thousand, for
    # which the probe's round trip (0.35-0.45 s before the pass's tasks start) would cost more
    # than dictionaries save
    dictionary = sink is None and takes_dictionary_strings(spark)
    parse = partial(grouppass.parse_files, state=state, max_util=max_util, dictionary=dictionary,
                    carry_folder=None if carry_folder is None else str(carry_folder),
                    sink_json=None if sink is None else sink_spec(str(sink.folder), sink.constants))
    out = _file_rows(spark, files, sink is not None).mapInArrow(progress.tallying(parse, tally), filepass.OUTPUT_DDL)
    return out.select(
        *[F.col(c.name) for c in schema.data_columns], "source_file",
        F.lit(None).cast("string").alias("raw_line"), F.lit(None).cast("string").alias("raw_values_json"),
        F.concat(F.col("source_file"), F.lit(":"), F.col("line_number").cast("string")).alias(ROW_ID),
        PARSE_ERRORS, *[name for name, _ in filepass.RATE_COLUMNS], filepass.REPEATED_INSTANT,
        filepass.SAVE_TIME_UNPROVEN, filepass.RATE_OUT_OF_BOUNDS, filepass.OUTSIDE_HOUR, VERDICT,
        filepass.RERATE,
    )


def state_path(scratch: Scratch, hour_before: str) -> Scratch:
    """Where a run stages carried_state of the stored hour `hour_before` (no later_firsts): the
    pass's state and the rates of the rows it set apart read the one scan of that hour."""
    return scratch / f"zj_port_state_{hour_before}"


def carry_path(scratch: Scratch) -> Scratch:
    """Where the one pass of a run writes the state its hour leaves for the next (carry)."""
    return scratch / "zj_port_carry"


def carried_into_pass(spark: SparkSession, config: Config | None, hours: list[str],
                      scratch: Scratch | None = None) -> dict | None:
    """filepass.state_of the stored hour before the files' hour (one hour's files, a lake that
    holds that hour): carried_state's few rows per port, collected so that the pass rates each
    file on from them. Measured on a full stored hour: 0.5-1.0 s (one scan of its counters).
    With `scratch`, the state is staged there (state_path) on the way, so that the rates of the
    rows the pass sets apart (from_pass) read it instead of scanning the hour again: 0.6 s of a
    full hour's rebuild of silver.zj_port_rates, measured."""
    if config is None or len(hours) != 1:
        return None
    (counters,) = read_tables(spark, config, TABLE)
    if counters is None:
        return None
    before = shift_hour(hours[0], -1)
    left = carry.left_for(config, before)  # the state that hour's own pass left, when it still holds
    if left is not None:
        if scratch is not None:  # where the rates of the rows the pass sets apart read it (from_pass)
            state_path(scratch, before).remove()
            state_path(scratch, before).local().mkdir(parents=True)
            pq.write_table(left, state_path(scratch, before).local() / "left.parquet")
        return filepass.state_of(zip(left.column("device_name").to_pylist(), left.column("port_name").to_pylist(),
                                     (t // 1000 for t in left.column("save_time_utc").cast(pa.int64()).to_pylist()),
                                     left.column("in_pkts").to_pylist()))
    state = carried_state(counters.filter(F.col("hour_cst") == before))
    if scratch is not None:
        state = stage(state, state_path(scratch, before))
    rows = state.select("device_name", "port_name", F.unix_millis("save_time_utc"), "in_pkts")
    return filepass.state_of([tuple(r) for r in rows.collect()])


class PortParser(Parser):
    """The port files' parser. `parse` is the one pass: every file read once, checked, typed and
    rated in Arrow (filepass, grouppass), continuing from the hour before stored in the lake; the
    suites say which rules it proves (meta.proven_by "zhejiang.ports": the key's uniqueness, the
    files' switch and port names, SaveTime against SaveTimeUTC, the hour folder, and silver's
    rates within line rate, whose limit the pass reads from there). A file that fails a check
    is a marker row, and is parsed line by line instead (`exact`: io.text.read_lines, io.parse:
    each line keeps its value or its reasons, and a file whose header is not the documented one,
    or that is not UTF-8, is refused, naming it)."""

    name = "zhejiang.ports"
    needs_lake = True  # the pass continues from the stored hour before
    needs_scratch = True  # the state of that hour and the carried state are staged there
    needs_sink = True  # the pass writes the kept rows not set apart itself, where they are set apart

    def exact(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              scratch: Scratch | None = None) -> DataFrame:
        if not files:
            raise TracelakeError(f"no input files for {schema.full_name}")
        for raw in files:
            check_header(raw, schema)
        return repeated_polls(parse_fields(_read_lines(spark, files, schema), schema))

    def parse(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              lake: Config | None = None, scratch: Scratch | None = None,
              sink: Sink | None = None) -> DataFrame | FastParse:
        """The one pass where the run gives a scratch place; the exact parse without one. Where the
        rows to rate again are set apart (below), the pass writes the others into the `sink`
        itself: the engine then takes in only the rows set apart and the markers. Measured on a
        full generated hour: the engine taking in and writing the kept rows cost more than the
        pass's own Parquet write (bench/RESULTS.md)."""
        if not files or scratch is None:
            return self.exact(spark, files, schema)
        hours = sorted({f.constants["hour_cst"] for f in files})
        carry_to = carry_path(scratch) if lake is not None and len(hours) == 1 and commits_staged(
            lake, load_schema(TABLE), [tuple(hours)]) else None
        if not objectstore.is_url(str(scratch)):
            carry_path(scratch).remove()  # an earlier pass's of this run
        # the rows to rate again staged apart only where silver can then take the others' files (a
        # write by folders sorts each task's rows on a Spark cluster)
        apart = lake is not None and commits_staged(lake, load_schema(RATES_TABLE), [tuple(hours)])
        written = sink if apart and sink is not None and not objectstore.is_url(str(sink.folder)) else None
        frame = one_pass(spark, files, schema, carried_into_pass(spark, lake, hours, scratch),
                         limits_proven_by(RATES_TABLE, self.name)["max_util"],
                         None if carry_to is None else carry_to.local(), written)
        return FastParse(frame, apart=filepass.RERATE if apart else None, clean=True,
                         written=None if written is None else written.folder)
