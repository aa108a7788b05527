"""AcmeTrace utilization CSVs (DCGM, Prometheus, IPMI) -> bronze.acme_utilization, bronze.acme_power.

Folder convention, the release's own layout under its data/ folder (`--raw` points there):

    <raw>/utilization/<cluster>/<METRIC>.csv              cluster: seren | kalos
    <raw>/utilization/<cluster>/<METRIC>-<YYYY>-<MM>.csv  monthly split of the same metric
    <raw>/utilization/ipmi/<KIND>_Power.csv               IPMI power of Seren's servers
    <raw>/utilization/<cluster>/ipmi/<KIND>_Power.csv     IPMI power of a named cluster

(`.csv.gz` too). Folders without CSVs (the release's util_pkl) are ignored; a CSV anywhere else
under utilization/ is an error, so a misplaced file is never skipped quietly.

Metric files are wide: `Time` (epoch seconds) and one column per node IP (`<IP>`, IB counters
`<IP>-mlx5_0`) or per GPU (`<IP>-<gpu index>`). Their headers differ per file, so the default
reader (fixed header) does not apply: the header is read here, at the edge, and parsed once.
An ingest reads each file once (widepass.py, through mapInArrow where the engine's tasks run: a
block of whole lines at a time, unpivoted in numpy), and the pass writes its cells itself into
the run's sink (io.sinkfiles), whose files the table may take as they are. What the pass hands
over is parsed line by line (the exact parse: unpivot.py in Spark, over a small header frame; an
input larger than GROUP_BYTES as staged jobs over groups of files, unpivot_files): every file of
a series one file of which fails a check of the pass or has a column the header rules reject,
and the lines of a Time another line may have (a run of equal Times in a file, or a stretch of
Times another file of the series spans too, found from the files' first and last lines), whose
cells are ranked as below (WideParser). One bronze row per cell:

  * an empty cell is no sample (the wide layout pads nodes that did not report): no row;
  * a cell that is not a finite number, sits under a column name that is not
    `<node>[-<gpu>][-<ib device>]`, or is on a line with the wrong field count or an unreadable
    Time goes to quarantine with its reason;
  * duplicate Time rows (within a file, or across the monthly files of one metric): one cell per
    (cluster, metric, ts, node_ip, gpu_index, ib_device) is kept, the others go to quarantine as
    'duplicate Time row' (naming the kept value when theirs differs). The kept one is a cell
    without another problem, then from the unsplit file if there is one, else the earliest
    month, then the smallest raw text (so '100' before '89', and '50' apart from '50.0').
So non-empty cells read = rows kept + rows quarantined, and rows kept = distinct cell keys.
Known release quirks are kept and counted by the gate (expectations/bronze.acme_utilization.json),
never dropped: the NODE_MEMORY window of 2023-07-19 11:35-14:01 +08:00 with `<IP>.1` column names,
Kalos CPU utilization above 1.0.

IPMI files are long: one line per (Time, server) with a server column (`IP`, `Node`, `Host`,
`Hostname`, `Server` or `Instance`, any case) and one column per power reading in W
(`Sys_Total_Power`, `MEM_Power`, ...). They become one row per (ts, node, component); type-B
servers leave MEM_Power empty, which is no sample, so they simply have no MEM_Power rows.
Times may be epoch seconds, ISO with an offset, or naive `yyyy-MM-dd HH:mm:ss`, read as
Asia/Shanghai (the clusters' local time, as the release's notebook displays them); the same
pass reads whole epoch seconds and naive times (widepass.LongFile), the rest goes line by line.
The IPMI layout is inferred from the release notebook (it reads Time and Sys_Total_Power and
splits type A/B rows by missing values); no IPMI file was available to check it.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.contract import FastParse, Parser, TableInput
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io import objectstore, progress
from tracelake.io.frames import takes_dictionary_strings, union_all
from tracelake.io.parse import PARSE_ERRORS, ROW_ID
from tracelake.io.sinkfiles import sink_spec
from tracelake.io.staging import Scratch, Sink, stage, write_staged
from tracelake.io.storetree import as_folder, listed_size
from tracelake.io.text import (
    HEADER_AGAIN,
    RawFile,
    file_size,
    header_again_reason,
    header_lines_again,
    open_text,
    quoted_content,
    regular_file,
)
from tracelake.io.unpack import check_lines
from tracelake.schema import TableSchema
from tracelake.sources.acme import widepass
from tracelake.sources.acme.unpivot import (
    FILE_INTS,
    Repeats,
    contract_rows,
    explode_cells,
    find_repeats,
    mark_repeated_lines,
    ranked_cells,
    single_cells,
    split_lines,
    wide_to_long,
)

log = logging.getLogger(__name__)

UTILIZATION_TABLE = "bronze.acme_utilization"
POWER_TABLE = "bronze.acme_power"
CLUSTERS = ("seren", "kalos")
IPMI_DIR = "ipmi"
IPMI_DEFAULT_CLUSTER = "seren"  # the release's utilization/ipmi holds Seren's servers
LOCAL_ZONE = "Asia/Shanghai"
METRIC_FILE = re.compile(r"(?P<metric>[A-Za-z0-9_]+?)(?:-(?P<month>\d{4}-\d{2}))?\.csv(?:\.gz)?")
POWER_FILE = re.compile(r"(?P<kind>[A-Za-z0-9_]+?)_Power\.csv(?:\.gz)?")
COLUMN_NAME = re.compile(r"(?P<node>[^-\s]+)(?:-(?P<gpu>\d+))?(?:-(?P<ib>[A-Za-z][A-Za-z0-9]*_\d+))?")
NODE_COLUMNS = ("ip", "node", "host", "hostname", "server", "instance")

# unit of each metric's raw values (ratio = 0..1; percent = 0..100)
UNITS = {
    "NODE_CPU_UTILIZATION": "ratio", "NODE_MEMORY_UTILIZATION": "ratio",
    "NODE_IB_SEND": "B/s", "NODE_IB_RECEIVE": "B/s",
    "XID_ERRORS": "xid", "GPU_TEMP": "degC", "MEMORY_TEMP": "degC", "MEM_CLOCK": "MHz",
    "SM_CLOCK": "MHz", "MEM_COPY_UTIL": "percent", "GPU_UTIL": "percent", "FB_FREE": "MiB",
    "FB_USED": "MiB", "POWER_USAGE": "W", "DRAM_ACTIVE": "ratio", "PIPE_TENSOR_ACTIVE": "ratio",
    "SM_ACTIVE": "ratio", "SM_OCCUPANCY": "ratio",
}


@dataclass(frozen=True)
class Header:
    names: tuple[str, ...]

    @property
    def line(self) -> str:
        return ",".join(self.names)


def read_header(path: str, name: str) -> Header:
    """The first line of a (possibly gzipped) CSV, BOM and line end removed; of a file read in
    place, from ranged reads of its start (io.text.open_text), not the whole object."""
    with open_text(path) as fh:
        first = fh.readline().rstrip("\r\n").lstrip("\ufeff")
    if not first:
        raise TracelakeError(f"{name}: empty file, expected a header starting with Time")
    names = tuple(first.split(","))
    if "Time" not in names:
        raise TracelakeError(f"{name}: header has no Time column: {quoted_content(path, first, 120)}")
    return Header(names)


def parse_column_name(name: str) -> tuple[str | None, int | None, str | None, str | None]:
    """(node, gpu index, IB device, error) of a metric column such as 10.140.0.1-3 or -mlx5_0."""
    match = COLUMN_NAME.fullmatch(name)
    if not match:
        return None, None, None, f"column '{name}' is not <node>[-<gpu>][-<ib device>]"
    gpu = match.group("gpu")
    return match.group("node"), int(gpu) if gpu is not None else None, match.group("ib"), None


# ---------------------------------------------------------------- planning (file discovery)

def _csvs(folder: Path) -> list[Path]:
    """The CSVs of a folder; one that is not a regular file (a FIFO, a device) is refused."""
    return sorted((regular_file(p, p.name) for p in folder.iterdir()
                   if not p.is_dir() and re.search(r"\.csv(\.gz)?$", p.name)), key=lambda p: p.name)


def _rel(path: Path, raw_dir: Path) -> str:
    return path.relative_to(raw_dir).as_posix()


def _other_form(name: str) -> tuple[str]:
    """The lineage name of the same series file gzipped or not (X.csv <-> X.csv.gz)."""
    return (name.removesuffix(".gz"),) if name.endswith(".gz") else (f"{name}.gz",)


def _one_per_series(files: list[RawFile], keys: tuple[str, ...]) -> None:
    """`X.csv` and `X.csv.gz` (or two spellings of one month) would be the same series twice."""
    seen: dict[tuple, str] = {}
    for f in files:
        key = tuple(f.constants.get(k) for k in keys)
        if key in seen:
            raise TracelakeError(f"{seen[key]} and {f.name} hold the same series; keep one")
        seen[key] = f.name


def _metric_files(folder: Path, cluster: str, raw_dir: Path) -> list[RawFile]:
    files = []
    for path in _csvs(folder):
        match = METRIC_FILE.fullmatch(path.name)
        if not match:
            raise TracelakeError(
                f"{_rel(path, raw_dir)}: utilization files are <METRIC>.csv or <METRIC>-<YYYY>-<MM>.csv"
            )
        metric = match.group("metric")
        files.append(RawFile(str(path), _rel(path, raw_dir), {
            "cluster": cluster, "metric": metric, "month": match.group("month"),
            "unit": UNITS.get(metric)}, aliases=_other_form(_rel(path, raw_dir)), size=listed_size(path)))
    _one_per_series(files, ("cluster", "metric", "month"))
    return files


def _power_files(folder: Path, cluster: str, raw_dir: Path) -> list[RawFile]:
    files = []
    for path in _csvs(folder):
        match = POWER_FILE.fullmatch(path.name)
        if not match:
            raise TracelakeError(f"{_rel(path, raw_dir)}: IPMI files are <KIND>_Power.csv, e.g. GPU_AB_Power.csv")
        files.append(RawFile(str(path), _rel(path, raw_dir),
                             {"cluster": cluster, "kind": match.group("kind"), "unit": "W"},
                             aliases=_other_form(_rel(path, raw_dir)), size=listed_size(path)))
    _one_per_series(files, ("cluster", "kind"))
    return files


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    """TableInputs for the utilization files found in raw_dir; [] when there are none."""
    root = as_folder(raw_dir) / "utilization"
    if not root.is_dir():
        return []
    metrics: list[RawFile] = []
    power: list[RawFile] = []
    if _csvs(root):
        raise TracelakeError(f"{_rel(root, raw_dir)}: CSVs belong in utilization/<cluster>/ or utilization/ipmi/")
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if folder.name in CLUSTERS:
            metrics += _metric_files(folder, folder.name, raw_dir)
            for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
                if sub.name == IPMI_DIR:
                    power += _power_files(sub, folder.name, raw_dir)
                elif _csvs(sub):
                    raise TracelakeError(f"{_rel(sub, raw_dir)}: unknown folder (only ipmi/ may sit in a cluster folder)")
        elif folder.name == IPMI_DIR:
            power += _power_files(folder, IPMI_DEFAULT_CLUSTER, raw_dir)
        elif _csvs(folder):
            raise TracelakeError(
                f"{_rel(folder, raw_dir)}: unknown utilization folder (clusters: {', '.join(CLUSTERS)}; or ipmi)"
            )
    _one_per_series(power, ("cluster", "kind"))
    inputs = []
    if metrics:
        inputs.append(TableInput(UTILIZATION_TABLE, metrics, UtilizationParser()))
    if power:
        inputs.append(TableInput(POWER_TABLE, power, PowerParser()))
    return inputs


# ---------------------------------------------------------------- parsers

def read_wide_lines(spark: SparkSession, files: list[dict]) -> DataFrame:
    """Data lines of every file, one text read per file (no input_file_name() on Sail).

    Each entry of `files` gives path, header_line and the ints file_id, series_id (files of one
    series share it, e.g. the monthly files of a metric), n_cols, time_pos and id_pos (position
    of a per-row id column such as the server, -1 when none). The header line is not data; the
    header once more further down is a line of its own with HEADER_AGAIN saying so (io.text)."""
    again = {f["file_id"]: header_lines_again(f["path"], f["header_line"], loose=True) for f in files}
    marked = [F.lit(None).cast("string").alias(HEADER_AGAIN)] if any(again.values()) else []
    frames = []
    for f in files:
        line = F.regexp_replace(F.col("value"), "\r$", "")
        ints = [F.lit(int(f[name])).alias(name) for name in FILE_INTS]
        frame = spark.read.text(f["path"]).select(*ints, line.alias("line"), *marked)
        header = f["header_line"]
        frames.append(frame.filter(~F.col("line").isin(header, "\ufeff" + header)))
        if again[f["file_id"]]:
            rows = [(*[int(f[name]) for name in FILE_INTS], header, header_again_reason(n)) for n in again[f["file_id"]]]
            frames.append(spark.createDataFrame(rows, frame.schema))
    return union_all(frames)


# A large parse is staged in jobs (unpivot_files): CSV bytes per job exploding a group of files
# (a larger file is a job of its own: its batches are capped at 8,192 lines), and repeated-line
# cells per job ranking them (each task holds the finished cells it ranks). Measured at
# 2,000 columns: the group jobs peaked at 1.01 GB RSS on 1 GB of CSV and 1.76 GB on 5 GB.
GROUP_BYTES = 128 * 2**20
RANK_ROWS = 1_000_000
GZIP_RATIO = 4  # CSV bytes per gzipped byte, about (the generated files compress 2.2-3.5x)


def file_groups(files: list[dict], budget: int) -> list[list[dict]]:
    """The files in order, cut into groups of at most `budget` bytes of CSV (a larger file is a
    group of its own). A .gz file counts GZIP_RATIO times its size on disk."""
    groups: list[list[dict]] = []
    size = 0
    for f in files:
        n = f["size"] * (GZIP_RATIO if f["path"].endswith(".gz") else 1)
        if groups and size + n <= budget:
            groups[-1].append(f)
            size += n
        else:
            groups.append([f])
            size = n
    return groups


def stage_parts(parts: list[DataFrame], path: Scratch) -> DataFrame:
    """io.staging.stage for a frame given in parts: each part is written into one Parquet folder by
    a job of its own, one after another, and the folder is read back. With zero rows the
    schema is kept (Sail writes no file for an empty frame)."""
    for i, part in enumerate(parts):
        write_staged(part, path, "append" if i else "overwrite")
    stored = parts[0].sparkSession.read.parquet(str(path))
    if stored.columns != parts[0].columns:
        return parts[0].sparkSession.createDataFrame([], parts[0].schema)
    return stored


def rank_in_parts(repeated: DataFrame, header: DataFrame, cell_keys: list[str], path: Scratch) -> DataFrame:
    """unpivot.ranked_cells, staged in jobs of about RANK_ROWS cells: its tasks hold every cell
    they rank at once, so the cells are split by a hash of their Time (all cells of one key
    share it) into parts ranked one after another. Measured on the held-out pair's 16 M repeated
    cells: parts of 1 M took 21 s at 1.14 GB peak, of 3 M 17 s at 2.19 GB, all at once 8.9 GB."""
    parts = max(1, -(-repeated.count() // RANK_ROWS))
    bucket = F.pmod(F.xxhash64(F.col("ts")), F.lit(parts))
    return stage_parts([ranked_cells(repeated.filter(bucket == b), header, cell_keys) for b in range(parts)], path)


def unpivot_files(
    spark: SparkSession, files: list[dict], header: DataFrame, line_keys: list[str], cell_keys: list[str],
    data: list, staging: Path | None,
) -> DataFrame:
    """unpivot.wide_to_long over the files: in one plan when they fit in one group (file_groups)
    or no staging folder is given; else in jobs staged under `staging`, so that memory stays
    flat as the input grows:

    * the lines of one group of files are exploded per job (cells, with `repeated`);
    * the cells of repeated lines are ranked in parts of about RANK_ROWS cells (rank_in_parts);
    * the returned plan finishes the single lines' cells from the stored ones and adds the
      ranked cells: it reads stored rows in batches and fans nothing out.

    Why: Sail runs every partition of a plan at once (a read per file, two partitions each,
    all in one union) and its unnest emits one batch per input batch, up to 8,192 lines x 2,000
    cells, so the cells of every file were in memory together before the writer drained them;
    and the ranking holds every repeated cell it is given, whose number grows with the input
    (duplicates are a share of the rows). Measured at 2,000 columns: exploded cells alone
    written to Parquet peaked at 1.27 GB RSS on 0.2 GB of CSV and 4.14 GB on 1 GB (the whole
    parse 1.65 and 5.17 GB), one job per file 0.83 GB on 1 GB; on 5 GB the ranking of its
    8.4 M repeated cells in one job peaked at 4.79 GB (1.88 GB without it). The keys that mark
    repeated lines are found once over every file (find_repeats): no fan-out, no growth."""
    lines = read_wide_lines(spark, files)
    groups = file_groups(files, GROUP_BYTES)
    if staging is None or len(groups) == 1:
        return wide_to_long(lines, header, line_keys, cell_keys, data, LOCAL_ZONE)
    folder = Scratch(str(staging)) / f"acme-cells-{uuid.uuid4().hex[:8]}"
    repeats = find_repeats(split_lines(lines, LOCAL_ZONE), line_keys)
    if repeats.keys is None:  # too many for an IN-list: every group's job joins them, found once
        repeats = Repeats(None, stage(repeats.frame, folder / "repeated_keys"))

    def group_cells(group: list[dict]) -> DataFrame:
        return explode_cells(mark_repeated_lines(split_lines(read_wide_lines(spark, group), LOCAL_ZONE),
                                                 line_keys, repeats))

    cells = stage_parts([group_cells(g) for g in groups], folder / "cells")
    rows = single_cells(cells.filter(~F.col("repeated")), header)
    if repeats.keys != []:
        repeated = stage(cells.filter(F.col("repeated")), folder / "repeated")
        rows = rank_in_parts(repeated, header, cell_keys, folder / "ranked").unionByName(rows)
    return contract_rows(rows, data)


def _file_entry(i: int, raw: RawFile, header: Header, series: int, time_pos: int, id_pos: int) -> dict:
    return {"path": raw.path, "size": file_size(raw), "header_line": header.line, "file_id": i, "series_id": series,
            "n_cols": len(header.names), "time_pos": time_pos, "id_pos": id_pos}


def _series_ids(files: list[RawFile], keys: tuple[str, str]) -> list[int]:
    """Files of one series (e.g. a metric's monthly files) share an id: duplicates span them."""
    ids: dict[tuple, int] = {}
    return [ids.setdefault(tuple(f.constants[k] for k in keys), len(ids)) for f in files]


def _json_key(name: str) -> str:
    return json.dumps(name) + ":"


def _repeat_error(name: str, first: str) -> str:
    if name == first:
        return f"header repeats column '{name}'"
    return f"column '{name}' names the same series as column '{first}'"


def utilization_header_rows(file_id: int, raw: RawFile, header: Header) -> list[tuple]:
    """One row per value column: file constants, column name, parsed key, header_error."""
    month = raw.constants.get("month")
    rank = int(month.replace("-", "")) if month else 0  # the unsplit file first, then by month
    fixed = (raw.name, rank, raw.constants["cluster"], raw.constants["metric"], raw.constants["unit"])
    rows, seen = [], {}
    time_pos = header.names.index("Time")
    for pos, name in enumerate(header.names):
        if pos == time_pos:
            continue
        node, gpu, ib, error = parse_column_name(name)
        if name == "Time":
            error = "second Time column"
        key = (node, gpu, ib)
        if error is None and key in seen:
            error = _repeat_error(name, seen[key])
        seen.setdefault(key, name)
        rows.append((file_id, pos, *fixed, name, None, _json_key(name), None, node, gpu, ib, error))
    return rows


UTILIZATION_HEADER = (
    "file_id int, pos int, source_file string, file_rank int, cluster string, metric string, "
    "unit string, column string, id_name string, json_key string, id_json_key string, "
    "node_ip string, gpu_index int, ib_device string, header_error string"
)


def _utilization_inputs(spark: SparkSession, files: list[RawFile]) -> tuple[list[dict], DataFrame, list[list[tuple]]]:
    """(each file's entry for read_wide_lines, the header frame, each file's header rows)."""
    entries, per_file = [], []
    for i, (raw, series) in enumerate(zip(files, _series_ids(files, ("cluster", "metric")))):
        header = read_header(raw.path, raw.name)
        entries.append(_file_entry(i, raw, header, series, header.names.index("Time"), -1))
        per_file.append(utilization_header_rows(i, raw, header))
    header_df = spark.createDataFrame([r for rows in per_file for r in rows], UTILIZATION_HEADER)
    return entries, header_df, per_file


UTIL_KEYS = ["cluster", "metric", "ts", "node_ip", "gpu_index", "ib_device"]
UTIL_LINE_KEYS = ["series_id", "ts"]


def _util_data() -> list:
    return [F.col(c) for c in (*UTIL_KEYS, "value", "unit")]


def parse_utilization(
    spark: SparkSession, files: list[RawFile], schema: TableSchema, staging: Path | None = None,
) -> DataFrame:
    """Wide metric CSVs -> one row per cell of bronze.acme_utilization (+ the parse contract),
    line by line: the exact parse. A large input is exploded in groups of files staged under
    `staging` (unpivot_files). An ingest takes the one pass first (UtilizationParser.parse)."""
    entries, header_df, _ = _utilization_inputs(spark, files)
    return unpivot_files(spark, entries, header_df, UTIL_LINE_KEYS, UTIL_KEYS, _util_data(), staging)


# ---------------------------------------------------------------- the one pass (widepass), checked

PASS_REASON = "file parsed line by line"  # a marker's or line row's; never stored: rest drops them


TAIL_BYTES = 1 << 20  # read from a file's end for its last line (a release line is ~12 kB at 2,000 columns)
UNKNOWN_SPAN = [-widepass.MAX_EPOCH_S, widepass.MAX_EPOCH_S]  # a file whose Times the driver cannot read


def _last_line(path: str) -> bytes:
    """The file's last non-empty line: of a plain file from a ranged read of its end; a `.gz`
    one is inflated through (only a series of several files asks, see time_spans)."""
    if path.endswith(".gz"):
        tail = b""
        with gzip.open(path if "://" not in path else objectstore.open_raw(path), "rb") as fh:
            while chunk := fh.read(8 * 2**20):
                tail = (tail + chunk)[-TAIL_BYTES:]
    else:
        handle = objectstore.open_seekable(path) if "://" in path else open(path, "rb")
        with handle as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read(TAIL_BYTES)
    lines = tail.rstrip(b"\r\n").rsplit(b"\n", 1)
    if len(lines) < 2 and len(tail) >= TAIL_BYTES:
        raise ValueError("the last line is longer than the tail read")
    return lines[-1]


def first_and_last_time(raw: RawFile, time_pos: int) -> list[int] | None:
    """The Time of the file's first and last data lines, as epoch seconds; None when either is
    not a plain whole number (the pass then fails the file, or finds it where these say)."""
    try:
        with open_text(raw.path) as fh:
            fh.readline()
            first = fh.readline().rstrip("\r\n")
        last = _last_line(raw.path).decode("utf-8")
        return [int(first.split(",")[time_pos]), int(last.split(",")[time_pos])]
    except (ValueError, IndexError, OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None


def time_spans(files: list[RawFile], entries: list[dict]) -> tuple[list, list]:
    """(each file's [first, last] Time or None, the Time ranges where another file of its series
    has lines): a line of one of those ranges may repeat a Time of another file, so the pass
    hands it to the exact parse. Only a series of several files reads its files' ends."""
    by_series: dict[int, list[int]] = {}
    for i, e in enumerate(entries):
        by_series.setdefault(e["series_id"], []).append(i)
    spans: list = [None] * len(files)
    overlaps: list = [[] for _ in files]
    for members in by_series.values():
        if len(members) < 2:
            continue
        for i in members:
            spans[i] = first_and_last_time(files[i], entries[i]["time_pos"])
        for i in members:
            low, high = spans[i] or UNKNOWN_SPAN
            for j in members:
                other_low, other_high = spans[j] or UNKNOWN_SPAN
                if j != i and max(low, other_low) <= min(high, other_high):
                    overlaps[i].append([max(low, other_low), min(high, other_high)])
    return spans, overlaps


def whole_overlaps(entries: list[dict], spans: list, overlaps: list) -> set[int]:
    """The series a file of which may repeat every one of its Times in another file (a metric both
    unsplit and split, a file whose Times could not be read): those series are parsed exactly,
    in groups of files, rather than handed over a line at a time."""
    return {e["series_id"] for e, span, ranges in zip(entries, spans, overlaps)
            if ranges and (span is None or span in ranges)}


def utilization_facts(header_rows: list[tuple]) -> list[list]:
    """A metric file's header facts for the pass: per value column [position, node, GPU, IB device]."""
    return [[r[1], r[11], r[12], r[13]] for r in header_rows]


def power_facts(header_rows: list[tuple]) -> list[list]:
    """An IPMI file's header facts for the pass: per reading column [position, component]."""
    return [[r[1], r[11]] for r in header_rows]


def pass_rows(files: list[RawFile], entries: list[dict], per_file: list[list[tuple]], dictionary: bool,
              sink: Sink | None = None, facts_of=utilization_facts) -> list[tuple]:
    """widepass's input, one row per file (FILE_COLUMNS), largest file first so that the engine's
    round-robin spreads the large files over its partitions; with a sink, where the pass writes
    its cell rows itself."""
    spans, overlaps = time_spans(files, entries)
    exact = whole_overlaps(entries, spans, overlaps)
    rows = []
    for i in sorted(range(len(files)), key=lambda i: -file_size(files[i])):
        raw, entry, header_rows = files[i], entries[i], per_file[i]
        facts = facts_of(header_rows)
        series = raw.constants.get("metric", raw.constants.get("kind"))
        rows.append((raw.path, raw.name, raw.constants["cluster"], series, raw.constants["unit"],
                     entry["series_id"], entry["file_id"], entry["time_pos"], entry["n_cols"], json.dumps(facts),
                     dictionary, None if spans[i] is None else json.dumps(spans[i]), json.dumps(overlaps[i]),
                     entry["series_id"] in exact, None if sink is None else sink_spec(str(sink.folder), sink.constants),
                     entry["id_pos"]))
    return rows


PASS_FILES = ("path string, source_file string, cluster string, metric string, unit string, series_id int, "
              "file_id int, time_pos int, n_cols int, columns_json string, dictionary boolean, span_json string, "
              "overlaps_json string, exact boolean, sink_json string, id_pos int")


def one_pass(spark: SparkSession, files: list[RawFile], entries: list[dict], per_file: list[list[tuple]],
             schema: TableSchema, sink: Sink | None = None, facts_of=utilization_facts) -> DataFrame:
    """The parse contract of `files` from widepass, one pass each, with its KIND column: its raw
    and marker rows carry a parse problem, so that nothing counts them as rows if they stayed.
    With a sink the cell rows are in its files instead (widepass writes them)."""
    rows = pass_rows(files, entries, per_file, takes_dictionary_strings(spark), sink, facts_of)
    frame = spark.createDataFrame(rows, PASS_FILES)
    # files read at once: each costs its task ~2 GB while its rows are staged (measured on Sail
    # 0.7.2, 2,000 columns: 4 files at once peaked at 8.2 GB, 2 at 4.75 GB), and tasks beyond
    # the cores add memory, not speed
    partitions = min(int(spark.conf.get("spark.sql.shuffle.partitions") or 2), os.cpu_count() or 2, len(rows))
    tally = progress.expect([f.path for f in files], [file_size(f) for f in files])  # the step's ETA (io.progress)
    out = frame.repartition(max(1, partitions)).mapInArrow(progress.tallying(widepass.parse_files, tally), widepass.OUTPUT_DDL)
    cell = F.col(widepass.KIND) == widepass.CELL
    given = {"kind": F.col("metric"), **{name: F.col(name) for name in widepass.OUTPUT.names}}  # IPMI's kind: its series
    return out.select(
        *[given.get(c.name, F.lit(None).cast(c.spark_type)).alias(c.name) for c in schema.data_columns], "source_file",
        F.lit(None).cast("string").alias("raw_line"), F.lit(None).cast("string").alias("raw_values_json"),
        F.lit(None).cast("string").alias(ROW_ID),
        F.when(cell, F.array().cast("array<string>")).otherwise(F.array(F.lit(PASS_REASON))).alias(PARSE_ERRORS),
        widepass.KIND, widepass.SERIES, widepass.FILE, widepass.LINE, (~cell).alias(widepass.ASIDE), widepass.NOT_IPV4,
        widepass.OFF_SHAPE,
    )


def raw_line_cells(spark: SparkSession, raw: DataFrame, entries: list[dict], header: DataFrame,
                   staging: Path, line_keys: list[str], cell_keys: list[str], data: list) -> DataFrame:
    """The exact parse of the lines the pass handed over (widepass's raw rows: file id and line):
    every line of a Time that may repeat is among them, so the repeats are found, ranked
    (rank_in_parts) and finished here as the exact parse does it, without reading a file again."""
    folder = Scratch(str(staging)) / f"acme-raw-{uuid.uuid4().hex[:8]}"
    ints = spark.createDataFrame([tuple(int(e[n]) for n in FILE_INTS) for e in entries],
                                 ", ".join(f"{n} int" for n in FILE_INTS))
    lines = raw.join(F.broadcast(ints), "file_id")
    cells = stage_parts([explode_cells(mark_repeated_lines(split_lines(lines, LOCAL_ZONE), line_keys))],
                        folder / "cells")
    ranked = rank_in_parts(cells.filter(F.col("repeated")), header, cell_keys, folder / "ranked")
    return contract_rows(ranked.unionByName(single_cells(cells.filter(~F.col("repeated")), header)), data)


class WideParser(Parser):
    """A parser of the utilization release's files: `parse` is the one pass, every file read
    once, checked and unpivoted in Arrow (widepass), its cells written by the pass itself into
    the run's sink; line by line only where the exact parse is needed (`remainder`): every file of
    a series one file of which fails a check or has a column the header rules reject, and the
    lines of a Time that may repeat, which the pass hands over (the duplicate ranking spans files,
    so the pass never holds by itself). `exact` is the exact parse, a large input in groups of
    files staged in the run's scratch. The metric files and the IPMI files differ in their
    header facts, keys and the columns their cells make (UtilizationParser, PowerParser)."""

    needs_scratch = True
    needs_sink = True
    series_keys: tuple[str, str] = ("cluster", "metric")

    def inputs(self, spark: SparkSession, files: list[RawFile]) -> tuple[list[dict], DataFrame, list[list[tuple]]]:
        """(each file's entry for read_wide_lines, the header frame, each file's header rows)."""
        raise NotImplementedError

    def keys(self) -> tuple[list[str], list[str], list]:
        """(line keys, cell keys, the data columns of a finished cell) for the exact parse."""
        raise NotImplementedError

    def facts(self, header_rows: list[tuple]) -> list[list]:
        raise NotImplementedError

    def exact(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              scratch: Scratch | None = None) -> DataFrame:
        entries, header, _ = self.inputs(spark, files)
        line_keys, cell_keys, data = self.keys()
        return unpivot_files(spark, entries, header, line_keys, cell_keys, data, scratch)

    def _series(self, f: RawFile) -> tuple[str, str]:
        return tuple(f.constants[k] for k in self.series_keys)

    def _bad_header_series(self, files: list[RawFile], per_file: list[list[tuple]]) -> set[tuple[str, str]]:
        """The series one file of which has a column the header rules reject (a header row's last
        field is its error)."""
        return {self._series(f) for f, rows in zip(files, per_file) if any(r[-1] is not None for r in rows)}

    def parse(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              lake: Config | None = None, scratch: Scratch | None = None,
              sink: Sink | None = None) -> DataFrame | FastParse:
        if scratch is None:
            return self.exact(spark, files, schema)
        entries, _, per_file = self.inputs(spark, files)
        bad_header = self._bad_header_series(files, per_file)
        chosen = [i for i, f in enumerate(files) if self._series(f) not in bad_header]
        if not chosen:
            return self.exact(spark, files, schema, scratch=scratch)
        frame = one_pass(spark, [files[i] for i in chosen], [entries[i] for i in chosen],
                         [per_file[i] for i in chosen], schema, sink, self.facts)
        # not alone: the raw rows are parsed by the remainder; the cells are the sink's files, or
        # (with no sink) staged apart from the raw rows
        if sink is not None:
            return FastParse(frame, alone=False, written=sink.folder)
        return FastParse(frame, alone=False, apart=widepass.ASIDE)

    def remainder(self, spark: SparkSession, staged: DataFrame, files: list[RawFile], schema: TableSchema, *,
                  scratch: Scratch | None = None) -> tuple[DataFrame | None, DataFrame | None]:
        """The pass's cells but those of a series a file of which failed a check (every file of
        such a series is parsed exactly), and the exact parse of the lines it handed over (the
        lines of a Time that may repeat; raw_line_cells); the raw and marker rows dropped."""
        entries, header, per_file = self.inputs(spark, files)
        line_keys, cell_keys, data = self.keys()
        series_ids = {self._series(f): e["series_id"] for f, e in zip(files, entries)}
        kind, series = F.col(widepass.KIND), F.col(widepass.SERIES)
        failed = {r[0] for r in staged.filter(kind == widepass.MARKER).select(series).distinct().collect()}
        exact = {series_ids[s] for s in self._bad_header_series(files, per_file)} | failed
        kept = ~series.isin(sorted(exact)) if exact else F.lit(True)
        # every cell row kept (None: their files as they lie) unless a series is parsed exactly
        good = staged.filter((kind == widepass.CELL) & kept) if exact else None
        raw = staged.filter((kind == widepass.RAW) & kept).select(F.col(widepass.FILE).alias("file_id"),
                                                                  F.col(widepass.LINE).alias("line"))
        parts = []
        if exact:
            chosen = [e for e in entries if e["series_id"] in exact]
            for raw_file, entry in zip(files, entries):  # the engine reads these as text: no line past the bound
                if entry["series_id"] in failed:
                    check_lines(raw_file.path, raw_file.name)
            parts.append(unpivot_files(spark, chosen, header, line_keys, cell_keys, data, scratch))
        handed = raw.count()
        if handed:
            parts.append(raw_line_cells(spark, raw, entries, header, scratch, line_keys, cell_keys, data))
        log.info("%s: %d series parsed line by line, %d line(s) handed over", schema.full_name, len(exact), handed)
        return good, union_all(parts) if parts else None


class UtilizationParser(WideParser):
    """The metric files' parser (WideParser): DCGM and Prometheus wide files."""

    name = "acme.utilization"

    def inputs(self, spark: SparkSession, files: list[RawFile]) -> tuple[list[dict], DataFrame, list[list[tuple]]]:
        return _utilization_inputs(spark, files)

    def keys(self) -> tuple[list[str], list[str], list]:
        return UTIL_LINE_KEYS, UTIL_KEYS, _util_data()

    def facts(self, header_rows: list[tuple]) -> list[list]:
        return utilization_facts(header_rows)


class PowerParser(WideParser):
    """The IPMI power files' parser (WideParser): one line per (Time, server), a column per reading."""

    name = "acme.power"
    series_keys = ("cluster", "kind")

    def inputs(self, spark: SparkSession, files: list[RawFile]) -> tuple[list[dict], DataFrame, list[list[tuple]]]:
        return _power_inputs(spark, files)

    def keys(self) -> tuple[list[str], list[str], list]:
        return POWER_LINE_KEYS, POWER_KEYS, _power_data()

    def facts(self, header_rows: list[tuple]) -> list[list]:
        return power_facts(header_rows)


def power_header_rows(file_id: int, raw: RawFile, header: Header, id_pos: int) -> list[tuple]:
    """One row per reading column: file constants, column (= component), header_error."""
    fixed = (raw.name, 0, raw.constants["cluster"], raw.constants["kind"], raw.constants["unit"])
    time_pos = header.names.index("Time")
    rows, seen = [], set()
    for pos, name in enumerate(header.names):
        if pos in (time_pos, id_pos):
            continue
        error = None
        if not re.fullmatch(r"[A-Za-z0-9_.]+", name):
            error = f"column '{name}' is not a power reading name"
        elif name in seen:
            error = _repeat_error(name, name)
        seen.add(name)
        id_name = header.names[id_pos]
        rows.append((file_id, pos, *fixed, name, id_name, _json_key(name), _json_key(id_name), name, error))
    return rows


POWER_HEADER = (
    "file_id int, pos int, source_file string, file_rank int, cluster string, kind string, "
    "unit string, column string, id_name string, json_key string, id_json_key string, "
    "component string, header_error string"
)


POWER_LINE_KEYS = ["series_id", "ts", "id_raw"]
POWER_KEYS = ["cluster", "kind", "ts", "id_raw", "component"]


def _power_data() -> list:
    return [F.col("cluster"), F.col("kind"), F.col("ts"), F.col("id_raw").alias("node"),
            F.col("component"), F.col("value"), F.col("unit")]


def _power_inputs(spark: SparkSession, files: list[RawFile]) -> tuple[list[dict], DataFrame, list[list[tuple]]]:
    """(each file's entry for read_wide_lines, the header frame, each file's header rows)."""
    entries, per_file = [], []
    for i, (raw, series) in enumerate(zip(files, _series_ids(files, ("cluster", "kind")))):
        header = read_header(raw.path, raw.name)
        lowered = [n.lower() for n in header.names]
        id_pos = next((lowered.index(c) for c in NODE_COLUMNS if c in lowered), None)
        if id_pos is None:
            raise TracelakeError(
                f"{raw.name}: IPMI files need a server column ({', '.join(NODE_COLUMNS)}); "
                f"header is '{header.line[:120]}'"
            )
        entries.append(_file_entry(i, raw, header, series, header.names.index("Time"), id_pos))
        per_file.append(power_header_rows(i, raw, header, id_pos))
    return entries, spark.createDataFrame([r for rows in per_file for r in rows], POWER_HEADER), per_file


def parse_power(
    spark: SparkSession, files: list[RawFile], schema: TableSchema, staging: Path | None = None,
) -> DataFrame:
    """IPMI power CSVs -> one row per (ts, node, component) of bronze.acme_power, line by line:
    the exact parse (large inputs staged in groups of files, as parse_utilization). An ingest
    takes the one pass first (PowerParser.parse)."""
    entries, header_df, _ = _power_inputs(spark, files)
    return unpivot_files(spark, entries, header_df, POWER_LINE_KEYS, POWER_KEYS, _power_data(), staging)
