"""Zhejiang per-switch-port counters: trafficinfo/<hour>/<switch folder>/<port file>.csv (doc §3).

One file per leaf port, a 10-column CSV polled about every 0.5 s. The file name says which port
it is (§3.2, the rule table below, verified on every real file); the rows say it again, and both
are kept so the quality gate can check they agree. `SaveTimeUTC` (epoch ms) is the time key;
`SaveTime` (China time with a Chinese weekday) is kept as delivered text.

Reading (measured on the 350 real files, Sail, 2 cores): one text read per file, the file's
identity added as literals (Sail has no input_file_name()), combined as a balanced union tree (a
left-deep union of 350 reads crashes the Spark Connect client). Text reads are the fast part;
the alternatives were slower: Spark's CSV reader per file (4-6x), binaryFile + pyarrow parsing in
mapInArrow (~15 s against ~1 s), one read per switch folder (same speed, but loses the file).
Splitting and casting cost more than reading, so parse_fields splits each line once; rows that
do not split into 10 fields or do not cast go to quarantine with reasons (reader.parse_lines'
contract and messages).
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.lake import read_tables
from tracelake.reader import PARSE_ERRORS, ROW_ID, RawFile, check_header
from tracelake.schema import Column as ColumnSpec
from tracelake.schema import TableSchema
from tracelake.sources import TableInput
from tracelake.transforms.zhejiang_ports import port_rates

TABLE = "bronze.zj_port_counters"
RATES_TABLE = "silver.zj_port_rates"
TRAFFIC = "trafficinfo"
HOUR_DIR = re.compile(r"^\d{10}$")
SWITCH_DIR = re.compile(r"^NH-DC-(NM\d+)-([A-Z]\d{2})-ROCE-(?P<leaf>(?:ST-)?[Ll]eaf-\d+)_GPU_S9825$")
PORT_FILE = re.compile(r"^(?P<sw>[Ll]eaf-\d+)_(?P<p>\d+)(?:_(?P<s>[12]))?\.csv$")
MGMT_PORT = "M-GigabitEthernet0/0/0"
BREAKOUT_PORT = re.compile(r"^TwoHundredGigE1/0/(\d+):([12])$")
FULL_PORT = re.compile(r"^FourHundredGigE1/0/(\d+)$")
EPOCH_MS = "epoch_ms"  # schema `format` of a timestamp column delivered as Unix epoch milliseconds
EPOCH_MS_MIN, EPOCH_MS_MAX = -62_135_596_800_000, 253_402_300_799_999  # 0001-01-01 .. 9999-12-31


# ---------------------------------------------------------------- naming rules (doc §1, §3.2)

def device_name(folder: str) -> str:
    """The switch's DeviceName: the folder name with `_GPU_S9825` spelled `.GPU.S9825`."""
    if not SWITCH_DIR.match(folder):
        raise TracelakeError(f"'{folder}' is not a switch folder (NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)")
    return folder.removesuffix("_GPU_S9825") + ".GPU.S9825"


def file_prefix(folder: str) -> str:
    """Port files of a GPU leaf start `Leaf-<n>_`; of a storage leaf `leaf-<n>_` (no `ST-`)."""
    match = SWITCH_DIR.match(folder)
    if not match:
        raise TracelakeError(f"'{folder}' is not a switch folder (NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)")
    return match.group("leaf").removeprefix("ST-")


def port_name_for_file(file_name: str) -> str:
    """§3.2: `_0` management port, `_<p>_<s>` a 200G breakout lane, `_<p>` a 400G port."""
    match = PORT_FILE.match(file_name)
    if not match:
        raise TracelakeError(f"'{file_name}' is not a port file name (<leaf>_<p>[_<s>].csv)")
    port, lane = int(match.group("p")), match.group("s")
    if port == 0:
        if lane:
            raise TracelakeError(f"'{file_name}': the management port _0 has no breakout lane")
        return MGMT_PORT
    return f"TwoHundredGigE1/0/{port}:{lane}" if lane else f"FourHundredGigE1/0/{port}"


def file_name_for_port(folder: str, port_name: str) -> str:
    """The inverse rule: where a switch port's counters are written (used by the generator)."""
    prefix = file_prefix(folder)
    if port_name == MGMT_PORT:
        return f"{prefix}_0.csv"
    if match := BREAKOUT_PORT.match(port_name):
        return f"{prefix}_{int(match.group(1))}_{match.group(2)}.csv"
    if match := FULL_PORT.match(port_name):
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
    """The port files of one switch folder; macOS dot files are skipped, anything else is an error."""
    prefix, device = file_prefix(folder.name), device_name(folder.name)
    files = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        where = path.relative_to(raw_dir).as_posix()
        if not path.is_file() or not path.name.endswith(".csv"):
            raise TracelakeError(f"{where}: unexpected entry in a switch folder (only port CSVs belong there)")
        port = port_name_for_file(path.name)
        if PORT_FILE.match(path.name).group("sw") != prefix:
            raise TracelakeError(f"{where}: a {prefix} folder holds a file of another switch")
        constants = {"hour_cst": hour, "folder_device_name": device, "file_port_name": port}
        files.append(RawFile(str(path), where, constants))
    return files


def find_port_files(raw_dir: Path) -> list[RawFile]:
    """Every trafficinfo/<hour>/<switch folder>/<port file>.csv under the release folder.

    Files directly in an hour folder (the hourly flow/nic/link/port CSVs) belong to another part;
    a sub-folder that is not a switch folder stops the run rather than being left out."""
    root = Path(raw_dir) / TRAFFIC
    if not root.is_dir():
        return []
    files: list[RawFile] = []
    for hour_dir in sorted(p for p in root.iterdir() if p.is_dir() and HOUR_DIR.match(p.name)):
        hour = _hour(hour_dir.name, f"{TRAFFIC}/{hour_dir.name}")
        for folder in sorted(p for p in hour_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not SWITCH_DIR.match(folder.name):
                raise TracelakeError(
                    f"{TRAFFIC}/{hour}/{folder.name}: not a switch folder "
                    "(NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)"
                )
            files += _switch_files(Path(raw_dir), hour, folder)
    return files


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    files = find_port_files(raw_dir)
    return [TableInput(TABLE, files, parse_port_files)] if files else []


# ---------------------------------------------------------------- parsing

def union_all(frames: list[DataFrame]) -> DataFrame:
    """Union as a balanced tree: depth log2(n). A left-deep union of ~350 reads crashes the
    Spark Connect client (segmentation fault, measured); a balanced one of thousands does not."""
    while len(frames) > 1:
        pairs = [frames[i].unionByName(frames[i + 1]) for i in range(0, len(frames) - 1, 2)]
        frames = pairs + (frames[-1:] if len(frames) % 2 else [])
    return frames[0]


def _line_endings(raw: RawFile) -> tuple[bool, bool]:
    """(has a UTF-8 BOM, uses CRLF), from the first line: the cheap per-row path is for plain LF."""
    with open(raw.path, "rb") as fh:
        first = fh.readline()
    return first.startswith(b"\xef\xbb\xbf"), first.endswith(b"\r\n")


def _read_lines(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """Data lines of every file with its lineage name and the constants its path implies.

    A line equal to the header is the header (as in reader.read_raw_lines); a BOM or CR is
    stripped only in files that have them, since a per-row regex costs seconds per hour."""
    header = schema.delimiter.join(schema.raw_header)
    names = sorted({k for f in files for k in f.constants})
    frames = []
    for raw in files:
        bom, crlf = _line_endings(raw)
        line = F.col("value")
        if bom or crlf:
            line = F.regexp_replace(line, "^\ufeff|\r$", "")
        cols = [F.lit(raw.name).alias("source_file"), line.alias("raw_line")]
        cols += [F.lit(raw.constants.get(k)).cast("string").alias(k) for k in names]
        frames.append(spark.read.text(raw.path).select(*cols))
    return union_all(frames).filter(F.col("raw_line") != F.lit(header))


def _typed(raw: Column, col: ColumnSpec) -> Column:
    if col.format == EPOCH_MS:  # out of the year 1-9999 range would fail the whole read
        millis = raw.try_cast("bigint")
        return F.when(millis.between(EPOCH_MS_MIN, EPOCH_MS_MAX), F.timestamp_millis(millis))
    return raw if col.type == "string" else raw.try_cast(col.type)


def parse_fields(lines: DataFrame, schema: TableSchema) -> DataFrame:
    """reader.parse_lines' contract and error texts, evaluated so each line is split once.

    Spark Connect engines do not share the split between the 30-odd expressions that use a
    field, so the fields are computed in one projection and used in the next (measured on
    Sail: 2.6 s of CPU less per real hour). `format: epoch_ms` columns hold whole Unix
    milliseconds. raw_values_json is filled for rows that failed to parse; for a parsed row it
    is null because its raw_line splits exactly into the header's fields (to_json on every
    row costs more than the rest of the parse)."""
    n_fields = len(schema.raw_header)
    split = lines.select("*", F.split(F.col("raw_line"), re.escape(schema.delimiter), -1).alias("_fields"))
    count_ok = F.size(F.col("_fields")) == F.lit(n_fields)
    raw_names = {name: f"_raw{i}" for i, name in enumerate(schema.raw_header)}
    fields = split.select(
        *lines.columns, count_ok.alias("_count_ok"), F.size(F.col("_fields")).alias("_n_fields"),
        *[F.when(count_ok, F.get(F.col("_fields"), i)).alias(raw_names[name])
          for i, name in enumerate(schema.raw_header)],
    )
    typed, problems = [], [(~F.col("_count_ok"), F.concat(
        F.lit(f"expected {n_fields} fields, found "), F.col("_n_fields").cast("string")))]
    for col in schema.data_columns:
        if col.source is None:
            if col.name not in lines.columns:
                raise TracelakeError(f"{schema.full_name}: nothing supplies column '{col.name}'")
            typed.append(F.col(col.name).cast(col.type).alias(col.name))
            continue
        raw = F.col(raw_names[col.source])
        present = raw.isNotNull() & (F.length(raw) > 0)
        if col.null_values:
            present = present & ~raw.isin(*col.null_values)
        typed.append(F.when(present, _typed(raw, col)).alias(col.name))
        kind = "epoch time in whole milliseconds" if col.format == EPOCH_MS else col.type
        problems.append((present & F.col(col.name).isNull(),
                         F.concat(F.lit(f"{col.name}: '"), raw, F.lit(f"' is not a valid {kind}"))))
        if not col.nullable:
            problems.append((F.col("_count_ok") & ~present, F.lit(f"{col.name}: missing value")))
    names = {c.name for c in schema.data_columns}
    values = fields.select(*[c for c in fields.columns if c not in names], *typed)
    # the messages are built only for rows that have a problem (CASE evaluates branches lazily)
    failed = reduce(Column.__or__, [cond for cond, _ in problems])
    messages = F.array_compact(F.array(*[F.when(cond, text) for cond, text in problems]))
    checked = values.select(
        "*", F.when(failed, messages).otherwise(F.array().cast("array<string>")).alias(PARSE_ERRORS))
    raw_json = F.to_json(F.struct(*[F.col(raw_names[n]).alias(n) for n in schema.raw_header]))
    return checked.select(
        *[c.name for c in schema.data_columns],
        "source_file", "raw_line",
        F.when(F.col("_count_ok") & (F.size(F.col(PARSE_ERRORS)) > 0), raw_json).alias("raw_values_json"),
        F.xxhash64(F.col("source_file"), F.col("raw_line")).cast("string").alias(ROW_ID),
        PARSE_ERRORS,
    )


def parse_port_files(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """The TableInput parser: header check per file, then one text read per file."""
    if not files:
        raise TracelakeError(f"no input files for {schema.full_name}")
    for raw in files:
        check_header(raw, schema)
    return parse_fields(_read_lines(spark, files, schema), schema)


# ---------------------------------------------------------------- derived

def _silver_rates(spark: SparkSession, config: Config) -> DataFrame | None:
    [counters] = read_tables(spark, config, TABLE)
    return None if counters is None else port_rates(counters)


DERIVED = [(RATES_TABLE, _silver_rates, (TABLE,))]
