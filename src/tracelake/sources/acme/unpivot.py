"""Wide time-series CSVs (`Time` + one column per node/GPU/component) to long rows, in Spark.

The AcmeTrace utilization release is ~80 GB of such files, so nothing here goes through pandas:
lines (read as text by the parser, utilization.read_wide_lines: nothing here reads files) are
split and exploded by position; what a position means (column name, node, GPU, file-level
constants) comes from a small header frame, one row per file and position, joined back after
the explode. The exploded frame carries only small per-cell columns: a line
of 2,000 columns fans out 2,000 times, so anything line-sized carried through the explode would
multiply (a first version carried the line and ran out of memory on 60 MB).

Each cell carries its reasons to be set aside (io.parse.PARSE_ERRORS), so the caller's ingest keeps
rows read = kept + quarantined with one row per cell. Duplicate `Time` rows are found in two
steps so the expensive part stays small: lines are grouped by (series, time), and only cells
of repeated lines go through the ranking that keeps one cell per key (a window's row_number,
computed in Arrow: firstinrun.py).

The steps are separate functions because one plan over every file does not keep memory flat on
Sail: its unnest emits one batch per input batch (up to 8,192 lines x 2,000 cells) and every
partition of the plan runs at once, so the exploded cells of all files were held together
(peak RSS 1.65 GB on 0.2 GB of CSV, 5.17 GB on 1 GB, 16.3 GB ingesting 5 GB), and the ranking
holds every repeated cell it is given, a number that grows with the input (as a window, 4.79 GB
for the 8.4 M of a 5 GB input). wide_to_long is the one-plan parse; utilization.unpivot_files runs the same
steps as jobs over groups of files for large inputs (explode_cells per group, ranked_cells in
parts, then single_cells and contract_rows over the stored cells), with the same result.

This is the exact parse. An ingest unpivots most files in one pass per file in Arrow
(widepass.py) and comes here only for a series whose files fail the pass's checks, and for
the lines of repeated Time keys (utilization.repeated_line_cells), so that every quarantine
row and reason stays this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tracelake.io.parse import PARSE_ERRORS, ROW_ID
from tracelake.io.text import HEADER_AGAIN
from tracelake.sources.acme import firstinrun

DUPLICATE_REASON = "duplicate Time row"
MAX_INLINE_KEYS = 20_000
FILE_INTS = ("file_id", "series_id", "n_cols", "time_pos", "id_pos")


def epoch_or_timestamp(raw: Column, naive_zone: str) -> Column:
    """UTC timestamp from epoch seconds (int or float), an ISO time with an offset, or a naive
    `yyyy-MM-dd HH:mm:ss` read in `naive_zone`; null when it is none of these."""
    seconds = raw.try_cast("double")
    finite = seconds.isNotNull() & ~F.isnan(seconds) & (F.abs(seconds) < F.lit(1e11))
    from_epoch = F.timestamp_micros(F.round(seconds * F.lit(1_000_000)).try_cast("long"))
    with_offset = F.try_to_timestamp(raw, F.lit("yyyy-MM-dd HH:mm:ssXXX"))
    naive = F.to_utc_timestamp(F.try_to_timestamp(raw, F.lit("yyyy-MM-dd HH:mm:ss")), naive_zone)
    return F.coalesce(F.when(finite, from_epoch), with_offset, naive)


def split_lines(lines: DataFrame, naive_zone: str) -> DataFrame:
    """One row per line: fields padded/cut to the header's width, time_raw, ts, id_raw,
    line_error (null when well formed) and bad_line (the line itself, only when malformed)."""
    fields = F.split(F.col("line"), ",", -1)
    count_ok = F.size(fields) == F.col("n_cols")
    padding = F.array_repeat(F.lit(None).cast("string"),
                             F.greatest(F.col("n_cols") - F.size(fields), F.lit(0)))
    values = F.when(count_ok, fields).otherwise(
        F.slice(F.concat(fields, padding), 1, F.col("n_cols")))
    # the first field without splitting: the repeated-line filter is pushed down to the scan,
    # where a split of a 2,000-column line per test would double the line stage
    time_raw = F.when(F.col("time_pos") == 0, F.substring_index(F.col("line"), ",", 1)).otherwise(
        F.get(fields, F.col("time_pos"))).cast("string")
    id_raw = F.when(F.col("id_pos") >= 0, F.get(fields, F.col("id_pos")))
    again = [F.col(HEADER_AGAIN)] if HEADER_AGAIN in lines.columns else []  # a header line mid-file
    if again:  # its cells, values of none: the line's reason alone
        values = F.when(again[0].isNull(), values).otherwise(F.array_repeat(F.lit(None).cast("string"), F.col("n_cols")))
    split = lines.select(
        *FILE_INTS, *again, values.alias("values"), time_raw.alias("time_raw"), id_raw.alias("id_raw"),
        F.when(~count_ok | (again[0].isNotNull() if again else F.lit(False)), F.col("line")).alias("bad_line"),
        F.when(~count_ok, F.concat(F.lit("expected "), F.col("n_cols").cast("string"),
                                   F.lit(" fields, found "), F.size(fields).cast("string")))
        .alias("count_error"),
    ).withColumn("ts", epoch_or_timestamp(F.col("time_raw"), naive_zone))
    error = F.coalesce(
        *again, F.col("count_error"),
        F.when(F.col("ts").isNull(), F.concat(
            F.lit("Time: '"), F.coalesce(F.col("time_raw"), F.lit("")),
            F.lit("' is not epoch seconds or a yyyy-MM-dd HH:mm:ss[XXX] time"))),
        F.when((F.col("id_pos") >= 0) & (F.coalesce(F.length("id_raw"), F.lit(0)) == 0),
               F.lit("node: missing value")),
    )
    return split.withColumn("line_error", error).drop("count_error", *([HEADER_AGAIN] if again else []))


def line_key(line_keys: list[str]) -> Column:
    """One string per line key (timestamps as epoch micros), for grouping and IN-lists."""
    parts = [F.unix_micros(F.col(k)) if k == "ts" else F.col(k) for k in line_keys]
    return F.concat_ws("|", *[p.cast("string") for p in parts])


@dataclass(frozen=True)
class Repeats:
    """The line keys (line_key) that more than one line has: `keys` when they are few enough for
    an IN-list, else None and `frame` (column _line_key) is joined."""

    keys: list[str] | None
    frame: DataFrame


def find_repeats(lines: DataFrame, line_keys: list[str]) -> Repeats:
    """The repeated keys of `lines` (split_lines' output), collected when at most MAX_INLINE_KEYS.

    Duplicate rows are rare, so the keys are few: the lines are then tested with an IN-list (a
    join of the lines with them cost 5x the whole line stage). Past MAX_INLINE_KEYS (e.g. a
    metric present both unsplit and split) the frame is joined instead."""
    complete = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in line_keys])
    repeats = (lines.filter(complete).select(line_key(line_keys).alias("_line_key")).groupBy("_line_key")
               .count().filter(F.col("count") > 1).select("_line_key"))
    found = [r[0] for r in repeats.limit(MAX_INLINE_KEYS + 1).collect()]
    return Repeats(found if len(found) <= MAX_INLINE_KEYS else None, repeats)


def mark_repeated_lines(lines: DataFrame, line_keys: list[str], repeats: Repeats | None = None) -> DataFrame:
    """Adds `repeated`: another line of the same series has the same key (e.g. Time).

    `repeats` are the keys found over every file of the parse (find_repeats), so that a subset
    of the files can be marked alone; without it they are found over `lines`."""
    repeats = repeats or find_repeats(lines, line_keys)
    complete = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in line_keys])
    keyed = lines.withColumn("_line_key", F.when(complete, line_key(line_keys)))
    if repeats.keys is not None:
        flag = F.col("_line_key").isin(repeats.keys) if repeats.keys else F.lit(False)
        return keyed.withColumn("repeated", F.coalesce(flag, F.lit(False))).drop("_line_key")
    joined = keyed.join(repeats.frame.withColumn("repeated", F.lit(True)), "_line_key", "left")
    return joined.withColumn("repeated", F.coalesce(F.col("repeated"), F.lit(False))).drop("_line_key")


def explode_cells(lines: DataFrame) -> DataFrame:
    """One row per value position of each line, carrying only small columns. Empty values of
    well-formed lines are no sample and yield no row; a malformed line yields every header
    position (to be set aside with the whole line)."""
    slim = lines.select("file_id", "time_pos", "id_pos", "time_raw", "id_raw", "ts", "repeated",
                        "line_error", "bad_line", F.posexplode("values").alias("pos", "raw_value"))
    keep = (F.col("pos") != F.col("time_pos")) & (F.col("pos") != F.col("id_pos")) & (
        F.col("bad_line").isNotNull() | (F.length("raw_value") > 0))
    return slim.filter(keep).drop("time_pos")


def attach_header(cells: DataFrame, header: DataFrame) -> DataFrame:
    """Join the per-position facts (file constants, column name, parsed key, header_error) on
    (file_id, pos). Every position 0..n_cols-1 of every file is in `header`: nothing is lost.

    The header is the left (build) side of a right join: the hash table holds the header, and
    the cells stream through. As `cells.join(header, "left")` Sail built the table from the
    cells, i.e. held every cell in memory (17 GB and an OOM kill on 1 GB of CSV). Sail plans it
    as a partitioned hash join (the broadcast hint is ignored), so the cells are hash-shuffled
    first; that shuffle is not what grew with the input: exploded cells written without this
    join peaked at 1.27 GB on 0.2 GB of CSV and 4.14 GB on 1 GB, as the parse did, and this
    join over the 832 M stored cells of a 5 GB input peaked at 1.06 GB. The growth was the
    explode and the ranking running over every file in one plan (see the module docstring)."""
    return F.broadcast(header).join(cells, ["file_id", "pos"], "right")


def value_errors(raw: Column, value: Column) -> list[Column]:
    return [
        F.when((F.length(raw) > 0) & value.isNull(),
               F.concat(F.lit("value: '"), raw, F.lit("' is not a number"))),
        F.when(F.isnan(value) | (F.abs(value) == F.lit(float("inf"))),
               F.concat(F.lit("value: '"), raw, F.lit("' is not a finite number"))),
    ]


def rank_repeated_cells(cells: DataFrame, cell_keys: list[str]) -> DataFrame:
    """Adds `dup_rank` (1 = kept) and `dup_error` to cells of repeated lines (all of them).

    Among cells with the same key the kept one is: a cell without other errors, then the file of
    lowest file_rank, then the smallest raw value and Time spelling (deterministic). The others
    get 'duplicate Time row', naming the kept value when theirs differs. Cells whose column is
    unusable (header_error) are not ranked: they are set aside anyway. The numbering is a
    window's row_number, computed in Arrow (firstinrun: Sail's window cost 20x the sort)."""
    usable, n_errors = "_tl_usable", "_tl_n_errors"
    order = [n_errors, "file_rank", "raw_value", "time_raw", "source_file"]
    marked = (cells.withColumn(usable, F.col("header_error").isNull())
              .withColumn(n_errors, F.size("own_errors")))
    tasks = int(cells.sparkSession.conf.get("spark.sql.shuffle.partitions") or 2)
    numbered = firstinrun.with_run_numbers(marked, [*cell_keys, usable], order, "raw_value", tasks)
    ranked = numbered.withColumn("dup_rank", F.when(F.col(usable), F.col(firstinrun.ROW_NUMBER)).otherwise(1))
    kept_raw = F.col(firstinrun.FIRST)
    reason = F.when(
        F.col("dup_rank") > 1,
        F.when(F.col("raw_value").eqNullSafe(kept_raw), F.lit(DUPLICATE_REASON)).otherwise(
            F.concat(F.lit(DUPLICATE_REASON + " with a different value (kept '"),
                     F.coalesce(kept_raw, F.lit("")), F.lit("')"))
        ),
    )
    return ranked.withColumn("dup_error", reason).drop(firstinrun.FIRST, firstinrun.ROW_NUMBER, usable, n_errors)


def finish_cells(cells: DataFrame, header: DataFrame) -> DataFrame:
    """Header facts, typed value and the cell's own errors (line, column, value)."""
    cells = attach_header(cells, header).withColumn("value", F.col("raw_value").try_cast("double"))
    own = [F.col("line_error"), F.col("header_error"), *value_errors(F.col("raw_value"), F.col("value"))]
    return cells.withColumn("own_errors", F.array_compact(F.array(*own)))


def cell_lineage(column_name: Column, errors: Column) -> list[Column]:
    """raw_line, raw_values_json and ROW_ID of a cell.

    raw_line is the whole line for a malformed line (its cells cannot be told apart) and null for
    a cell of a well-formed line: repeating the line per column would multiply it, and the
    cell's own raw fields are in raw_values_json, which maps header names to raw strings
    (`{"Time": ..., [<id column>: ...,] <column>: ...}`). For a good cell (a number under a
    parsed Time, nothing to escape) that JSON is concatenated: to_json per cell cost a fifth of
    the parse. ROW_ID is unique within the parse: file, Time spelling, position, duplicate rank."""
    name = F.coalesce(column_name, F.lit("?"))
    by_name = F.when(
        F.col("id_pos") >= 0,
        F.create_map(F.lit("Time"), F.col("time_raw"), F.coalesce(F.col("id_name"), F.lit("?")),
                     F.col("id_raw"), name, F.col("raw_value")),
    ).otherwise(F.create_map(F.lit("Time"), F.col("time_raw"), name, F.col("raw_value")))
    plain_id = F.col("id_raw").isNull() | ~F.col("id_raw").rlike(r'["\\\x00-\x1f]')
    id_part = F.when(F.col("id_raw").isNotNull(),
                     F.concat(F.col("id_json_key"), F.lit('"'), F.col("id_raw"), F.lit('",')))
    fast = F.concat_ws("", F.lit('{"Time":"'), F.col("time_raw"), F.lit('",'), id_part,
                       F.col("json_key"), F.lit('"'), F.col("raw_value"), F.lit('"}'))
    raw_json = F.when((F.size(errors) == 0) & plain_id, fast).otherwise(F.to_json(by_name))
    row_id = F.concat_ws("|", F.col("file_id").cast("string"), F.coalesce(F.col("time_raw"), F.lit("")),
                         F.col("pos").cast("string"), F.col("dup_rank").cast("string"))
    return [F.col("bad_line").alias("raw_line"), raw_json.alias("raw_values_json"),
            row_id.alias(ROW_ID)]


def wide_to_long(
    lines: DataFrame,
    header: DataFrame,
    line_keys: list[str],
    cell_keys: list[str],
    data_columns: list[Column],
    naive_zone: str,
) -> DataFrame:
    """The whole parse in one plan: lines -> cells with the parse_lines contract.

    `lines` are the files' data lines with the FILE_INTS columns (utilization.read_wide_lines);
    `header` has file_id, pos, source_file, file_rank, column, id_name, header_error, json_key
    and id_json_key (the JSON-quoted column and id names followed by ':'), plus the file
    constants and parsed key columns that `cell_keys` and `data_columns` use (over a cell frame
    that also has ts, id_raw and value). Lines are split by `repeated` before the explode, so
    only the few repeated lines' cells go through the ranking; the (cheap) line stage
    runs once per branch, the explode and join once in all. One plan runs every file at once:
    for inputs larger than a few hundred MB, see utilization.unpivot_files."""
    marked = mark_repeated_lines(split_lines(lines, naive_zone), line_keys)
    return long_rows(explode_cells(marked.filter(F.col("repeated"))), explode_cells(marked.filter(~F.col("repeated"))),
                     header, cell_keys, data_columns)


def ranked_cells(repeated: DataFrame, header: DataFrame, cell_keys: list[str]) -> DataFrame:
    """Cells of repeated lines (explode_cells' output), finished and ranked (rank_repeated_cells).
    Ranking sorts every row it is given, wide as finished cells are: see
    utilization.unpivot_files for how a large parse bounds that."""
    return rank_repeated_cells(finish_cells(repeated, header), cell_keys)


def single_cells(single: DataFrame, header: DataFrame) -> DataFrame:
    """Cells of lines no other line repeats, finished: each is kept unless it has errors."""
    return (finish_cells(single, header).withColumn("dup_rank", F.lit(1))
            .withColumn("dup_error", F.lit(None).cast("string")))


def contract_rows(cells: DataFrame, data_columns: list[Column]) -> DataFrame:
    """Finished, ranked cells -> the parse_lines contract (data, lineage, PARSE_ERRORS)."""
    errors = F.array_compact(F.concat(F.col("own_errors"), F.array(F.col("dup_error"))))
    return cells.select(
        *data_columns, F.col("source_file"), *cell_lineage(F.col("column"), errors),
        errors.alias(PARSE_ERRORS),
    )


def long_rows(
    repeated: DataFrame, single: DataFrame, header: DataFrame, cell_keys: list[str], data_columns: list[Column],
) -> DataFrame:
    """Cells (explode_cells' output) of repeated and of single lines -> the parse_lines contract:
    header facts, typed value, errors, duplicate ranking (repeated cells only) and lineage."""
    cells = ranked_cells(repeated, header, cell_keys).unionByName(single_cells(single, header))
    return contract_rows(cells, data_columns)
