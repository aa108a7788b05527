"""Zhejiang per-switch-port counters: trafficinfo/<hour>/<switch folder>/<port file>.csv (docs/formats/zhejiang.md §3).

One file per leaf port, a 10-column CSV polled about every 0.5 s. The file name says which port
it is (§3.2, the rule table below, verified on every real file); the rows say it again, and both
are kept so the quality gate can check they agree. `SaveTimeUTC` (epoch ms) is the time key;
`SaveTime` (China time with a Chinese weekday) is kept as delivered text.

Reading (measured on the 350 real files, Sail, 2 cores). Sail has no input_file_name(), so a
row's file is known either from a read of that file alone or from the row itself:
  fast path   Spark's CSV reader, one read per switch folder, every field as text: 1.4 s of
              parse. The row's PortName names its file through the folder's listing, and the
              result is used only if every file gets exactly as many rows as it has data lines,
              each of its lines names its port, and no text holds U+FFFD (the reader's stand-in
              for a byte that is not UTF-8).
  exact path  one text read per file, the file's identity as literals, combined as a balanced
              union tree (a left-deep union of 350 reads crashes the Spark Connect client),
              each line split once: 4.4 s. Taken when the CSV read fails (a line with another
              number of fields), skips a blank line, or puts a row in another port's file.
Both give io.parse.parse_lines' contract and messages: rows that do not split into 10 fields or
do not cast go to quarantine with reasons. Rejected alternatives: Spark's CSV reader per file
(planning 350 reads costs 0.7 s more than the parse), binaryFile + pyarrow parsing in
mapInArrow (~15 s), a literal (port -> file) map per row (12 s), a join with the listing
(8 s an hour more than the naming rule).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.contract import TableInput, derived
from tracelake.api.tables import changed_groups, read_tables
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io.frames import union_all
from tracelake.io.parse import COUNT_OK, N_FIELDS, raw_field, split_fields, type_fields
from tracelake.io.staging import Checked
from tracelake.io.text import RawFile, check_header, read_lines, regular_file
from tracelake.schema import TableSchema
from tracelake.sources.zhejiang.clock import hours_to_rebuild, shift_hour
from tracelake.sources.zhejiang.layout import MGMT_PORT, TRAFFIC, hour_folders
from tracelake.sources.zhejiang.transforms.ports import (
    carried_state,
    is_opening,
    opening_marks,
    port_rates,
    rates_of,
)

log = logging.getLogger(__name__)

TABLE = "bronze.zj_port_counters"
RATES_TABLE = "silver.zj_port_rates"
SWITCH_DIR = re.compile(r"NH-DC-(NM\d+)-([A-Z]\d{2})-ROCE-(?P<leaf>(?:ST-)?[Ll]eaf-\d+)_GPU_S9825")
PORT_FILE = re.compile(r"(?P<sw>[Ll]eaf-\d+)_(?P<p>\d+)(?:_(?P<s>[12]))?\.csv")
BREAKOUT_PORT = re.compile(r"TwoHundredGigE1/0/(\d+):([12])")
FULL_PORT = re.compile(r"FourHundredGigE1/0/(\d+)")


# ---------------------------------------------------------------- naming rules (docs/formats/zhejiang.md §1, §3.2)

def device_name(folder: str) -> str:
    """The switch's DeviceName: the folder name with `_GPU_S9825` spelled `.GPU.S9825`."""
    if not SWITCH_DIR.fullmatch(folder):
        raise TracelakeError(f"'{folder}' is not a switch folder (NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)")
    return folder.removesuffix("_GPU_S9825") + ".GPU.S9825"


def file_prefix(folder: str) -> str:
    """Port files of a GPU leaf start `Leaf-<n>_`; of a storage leaf `leaf-<n>_` (no `ST-`)."""
    match = SWITCH_DIR.fullmatch(folder)
    if not match:
        raise TracelakeError(f"'{folder}' is not a switch folder (NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)")
    return match.group("leaf").removeprefix("ST-")


def port_name_for_file(file_name: str) -> str:
    """§3.2: `_0` management port, `_<p>_<s>` a 200G breakout lane, `_<p>` a 400G port."""
    match = PORT_FILE.fullmatch(file_name)
    if not match:
        raise TracelakeError(f"'{file_name}' is not a port file name (<leaf>_<p>[_<s>].csv)")
    port, lane = int(match.group("p")), match.group("s")
    if port == 0:
        if lane:
            raise TracelakeError(f"'{file_name}': the management port _0 has no breakout lane")
        return MGMT_PORT
    return f"TwoHundredGigE1/0/{port}:{lane}" if lane else f"FourHundredGigE1/0/{port}"


def port_exists(prefix: str, port_name: str) -> bool:
    """§3.2: a GPU leaf has the management port, 200G lanes 1–30:1–2 and 400G ports 31–64; a
    storage leaf (`leaf-<n>`) the management port and 400G ports 1–64."""
    if port_name == MGMT_PORT:
        return True
    storage = prefix.startswith("leaf-")
    if match := BREAKOUT_PORT.fullmatch(port_name):
        return not storage and 1 <= int(match.group(1)) <= 30
    if match := FULL_PORT.fullmatch(port_name):
        return (1 if storage else 31) <= int(match.group(1)) <= 64
    return False


def file_name_for_port(folder: str, port_name: str) -> str:
    """The inverse rule: where a switch port's counters are written (used by the generator)."""
    prefix = file_prefix(folder)
    if port_name == MGMT_PORT:
        return f"{prefix}_0.csv"
    if match := BREAKOUT_PORT.fullmatch(port_name):
        return f"{prefix}_{int(match.group(1))}_{match.group(2)}.csv"
    if match := FULL_PORT.fullmatch(port_name):
        return f"{prefix}_{int(match.group(1))}.csv"
    raise TracelakeError(f"'{port_name}' is not a leaf port name this release uses")


# ---------------------------------------------------------------- planning

def _hour(name: str, where: str) -> str:
    try:
        datetime.strptime(name, "%Y%m%d%H")
    except ValueError as exc:
        raise TracelakeError(f"{where}: hour folder '{name}' is not a valid YYYYMMDDHH (CST) hour") from exc
    return name


def _switch_files(raw_dir: Path, hour: str, folder: Path) -> list[RawFile]:
    """The port files of one switch folder; macOS dot files are skipped, anything else, or no
    port file at all, is an error."""
    prefix, device = file_prefix(folder.name), device_name(folder.name)
    files = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        where = path.relative_to(raw_dir).as_posix()
        if path.name.endswith(".csv") and not path.is_dir():
            regular_file(path, where)
        if not path.is_file() or not path.name.endswith(".csv"):
            raise TracelakeError(f"{where}: unexpected entry in a switch folder (only port CSVs belong there)")
        port = port_name_for_file(path.name)
        if PORT_FILE.fullmatch(path.name).group("sw") != prefix:
            raise TracelakeError(f"{where}: a {prefix} folder holds a file of another switch")
        if not port_exists(prefix, port):
            kind = "storage leaf" if prefix.startswith("leaf-") else "GPU leaf"
            raise TracelakeError(f"{where}: a {kind} has no port {port} (docs/formats/zhejiang.md §3.2)")
        constants = {"hour_cst": hour, "folder_device_name": device, "file_port_name": port}
        files.append(RawFile(str(path), where, constants))
    if not files:  # a copy that failed part way: the switch's hour would be missing without a word
        raise TracelakeError(f"{TRAFFIC}/{hour}/{folder.name}: a switch folder with no port files")
    return files


def find_port_files(raw_dir: Path, hours: tuple[str, ...] | None = None) -> list[RawFile]:
    """Every trafficinfo/<hour>/<switch folder>/<port file>.csv under the release folder.

    Files directly in an hour folder (the hourly flow/nic/link/port CSVs) belong to another part;
    a sub-folder that is not a switch folder stops the run rather than being left out."""
    files: list[RawFile] = []
    for hour_dir in hour_folders(raw_dir, hours):
        hour = _hour(hour_dir.name, f"{TRAFFIC}/{hour_dir.name}")
        for folder in sorted(p for p in hour_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not SWITCH_DIR.fullmatch(folder.name):
                raise TracelakeError(
                    f"{TRAFFIC}/{hour}/{folder.name}: not a switch folder "
                    "(NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)"
                )
            files += _switch_files(Path(raw_dir), hour, folder)
    return files


def plan(raw_dir: Path, staging: Path, hours: tuple[str, ...] | None = None) -> list[TableInput]:
    files = find_port_files(raw_dir, hours)
    return [TableInput(TABLE, files, partial(parse_port_files, staging=staging))] if files else []


# ---------------------------------------------------------------- parsing

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


# ---------------------------------------------------------------- the fast path: Spark's CSV reader

def own_port_lines(raw: RawFile) -> tuple[int, bool]:
    """(lines after the header, as the text read counts them, a last line without LF included;
    whether each names the file's own port): the count of `,<port>,` equals the
    line count only when every line holds it, as no other field of a line can (times, the
    switch's name, numbers). The fast path attributes a row to a file by its PortName, so two
    files that traded rows would otherwise pass a check of counts alone."""
    with open(raw.path, "rb") as fh:
        data = fh.read()
    lines = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1) - 1
    return lines, data.count(f",{raw.constants['file_port_name']},".encode()) == lines


def _file_for_port(folder: str, port: Column) -> Column:
    """file_name_for_port as a column expression: the lineage name of the file a port's rows
    belong in, from the name's last `/` part (`12:1` -> `_12_1`, `40` -> `_40`, the management
    port's `0` -> `_0`). A name of another form yields a file of the wrong port, or one the folder
    does not have: either way _csv_read_holds sees rows whose port is not their file's and the
    files are parsed line by line. String functions, not regexes: cheaper per row (a full hour's
    staging measured 10.6 s against 12.3-16.0 s with the regexes, on a noisy machine)."""
    suffix = F.translate(F.substring_index(port, "/", -1), ":", "_")
    prefix = f"{folder}/{file_prefix(folder.rsplit('/', 1)[-1])}_"
    return F.concat(F.lit(prefix), suffix, F.lit(".csv"))


def _csv_fields(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """split_fields' output from Spark's CSV reader: one read per switch folder, every field as
    text, quoting off (the format has none, so a quote stays a character, as in a text read).

    The reader cannot say which file a row came from (Sail has no input_file_name()); the row's
    own PortName says, by the naming rule (a per-row join with the folder listing costs 8 s an
    hour, the rule 1.7 s). _csv_read_holds checks every file's rows against its line count
    and its port once they are stored, before the result is used."""
    raw_schema = ", ".join(f"`{name}` string" for name in schema.raw_header)
    by_folder: dict[str, list[RawFile]] = {}
    for raw in files:
        by_folder.setdefault(raw.name.rsplit("/", 1)[0], []).append(raw)
    constants = sorted({k for f in files for k in f.constants} - {"file_port_name"})
    n_fields = len(schema.raw_header)
    raws = [F.col(raw_field(i)) for i in range(n_fields)]
    port = F.col(raw_field(schema.raw_header.index("PortName")))
    frames = []
    for folder, members in by_folder.items():
        rows = spark.read.schema(raw_schema).options(header=True, quote="\u0000", mode="FAILFAST").csv(
            [f.path for f in members])
        fields = rows.select(*[F.col(f"`{name}`").alias(raw_field(i)) for i, name in enumerate(schema.raw_header)])
        frames.append(fields.select(
            _file_for_port(folder, port).alias("source_file"),
            *[F.lit(members[0].constants.get(k)).cast("string").alias(k) for k in constants],
            port.alias("file_port_name"),
            F.concat_ws(schema.delimiter, *[F.coalesce(r, F.lit("")) for r in raws]).alias("raw_line"),
            F.lit(True).alias(COUNT_OK), F.lit(n_fields).alias(N_FIELDS), *raws,
        ))
    return union_all(frames)


def _csv_read_holds(files: list[RawFile], counting: Future) -> Callable[[DataFrame], bool]:
    """The fast path's check of its stored rows: every file has exactly its own port's rows, as
    many as it has data lines, and each of its lines names that port (both read in a thread
    while the engine parses); and no text field holds U+FFFD, which is how Spark's CSV reader
    stores a byte that is not UTF-8 (the text read of the exact path refuses the file instead)."""
    def holds(staged: DataFrame) -> bool:
        found = counting.result()
        if not all(own for _, own in found.values()):
            log.info("%s: a file holds lines of another port, parsing line by line", TABLE)
            return False
        expected = {key: n for key, (n, _) in found.items() if n > 0}
        lossy = F.concat_ws("", "save_time", "device_name").contains("\ufffd")
        rows = staged.groupBy("source_file", "port_name").agg(
            F.count(F.lit(1)).alias("n"), F.max(lossy).alias("lossy")).collect()
        got = {(r["source_file"], r["port_name"]): r["n"] for r in rows}
        if got != expected or any(r["lossy"] for r in rows):
            log.info("%s: rows do not match the files' lines, parsing line by line", TABLE)
            return False
        return True
    return holds


def parse_port_files(
    spark: SparkSession, files: list[RawFile], schema: TableSchema, staging: Path | None = None
) -> DataFrame | Checked:
    """The TableInput parser: header check per file, then the fast path if `staging` is given.

    Fast path (measured on the 350 real files: 1.4 s against 4.4 s): Spark's CSV reader, one
    read per switch folder, checked once stored (io.staging.settle): every file must have exactly
    as many rows attributed to it as it has data lines, each naming its port. Spark's CSV reader
    skips blank lines, fails the whole read on a line with another number of fields and stores a
    byte that is not UTF-8 as U+FFFD; in each case, and whenever a row names a port of another
    file, the files are parsed again line by line (one text read per file), where each such line
    is kept with its reason (and a file that is not UTF-8 is refused, naming it)."""
    if not files:
        raise TracelakeError(f"no input files for {schema.full_name}")
    for raw in files:
        check_header(raw, schema)
    def exact() -> DataFrame:
        return parse_fields(_read_lines(spark, files, schema), schema)

    if staging is None:
        return exact()
    pool = ThreadPoolExecutor(max_workers=1)
    counting = pool.submit(lambda: {(f.name, f.constants["file_port_name"]): own_port_lines(f) for f in files})
    pool.shutdown(wait=False)  # the count runs on while the engine parses
    fast = type_fields(_csv_fields(spark, files, schema), schema, lean=True)
    return Checked(fast, _csv_read_holds(files, counting), exact)


# ---------------------------------------------------------------- derived

def rebuild_rates(spark: SparkSession, config: Config, changed: dict, scratch: Path) -> tuple[DataFrame, tuple] | None:
    """The rates of the changed hours, from their counters plus the carried state of the hour
    before each; and of the stored hour after each, whose opening rows continue from it: only
    those rows are recomputed, and the hour is replaced only when they differ from the stored
    ones. Nothing else of the lake is read, so a re-ingested hour costs about what a new one does."""
    counters, stored = read_tables(spark, config, TABLE, RATES_TABLE)
    if counters is None:
        return None
    own = sorted({values[0] for values in changed[TABLE]})
    hours, _ = hours_to_rebuild(counters, set(own))
    state = carried_state(counters.filter(F.col("hour_cst").isin(sorted({shift_hour(h, -1) for h in own} - set(own)))))
    rates = rates_of(counters.filter(F.col("hour_cst").isin(own)), state, own)
    following = [h for h in hours if h not in own]
    if not following:
        return rates, tuple((h,) for h in own)
    rebuilt, redone = following_hours(counters, stored, following)
    return union_all([rates, *rebuilt]), tuple((h,) for h in sorted([*own, *redone]))


def following_hours(counters: DataFrame, stored: DataFrame | None, following: list[str]) -> tuple[list[DataFrame], list[str]]:
    """(the new rates of the hours after changed ones whose opening rows changed, those hours).
    An hour whose stored rates do not hold a row per counter row (none yet, or a run stopped
    between the two commits) is rebuilt whole instead."""
    hours = F.col("hour_cst").isin(following)
    before = carried_state(counters.filter(F.col("hour_cst").isin([shift_hour(h, -1) for h in following])))
    rows = dict(counters.filter(hours).groupBy("hour_cst").count().collect())
    kept = dict(stored.filter(hours).groupBy("hour_cst").count().collect()) if stored is not None else {}
    whole = [h for h in following if kept.get(h) != rows.get(h)]
    opened = [h for h in following if h not in whole]
    frames = []
    if whole:
        frames.append(rates_of(counters.filter(F.col("hour_cst").isin(whole)), before, whole))
    if opened:
        in_opened = F.col("hour_cst").isin(opened)
        marks = F.broadcast(opening_marks(counters.filter(in_opened)))
        keys = ["hour_cst", "device_name", "port_name"]
        opening = marks.join(counters.filter(in_opened), keys).filter(is_opening()).select(*counters.columns)
        fresh = rates_of(opening, before, opened)
        old = marks.join(stored.filter(in_opened), keys)
        columns = list(fresh.columns)
        differ = changed_groups(old.filter(is_opening()).select(*columns), fresh, columns, "hour_cst")
        if differ:
            tail = old.filter(F.col("hour_cst").isin(differ) & ~is_opening()).select(*columns)
            frames.append(tail.unionByName(fresh.filter(F.col("hour_cst").isin(differ))))
        opened = differ
    return frames, sorted([*whole, *opened])


DERIVED = [replace(derived(RATES_TABLE, port_rates, (TABLE,)), rebuild=rebuild_rates)]
