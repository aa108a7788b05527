"""Zhejiang hourly CSVs: trafficinfo/<hour>/<hour>_{flow,nic,link,port}.csv, or the same four
kinds as the sheets of trafficinfo/<hour>/<hour>.xlsx (docs/formats/zhejiang.md §1, §4).

The real files are not public, so the reader is lenient where the doc is unsure and strict where
a mistake would lose data: headers are matched case-insensitively, in any order, in the release's
misspelt or the corrected spelling (and the duplicate OutBrdcastPkts by position); every field is
trimmed; a file that is not UTF-8 is read as GB18030 when nearly all its non-ASCII lines are
(else its undecodable lines are quarantined, see _as_utf8); times are China-local 上午/下午 text,
converted to UTC with column expressions (see _zhtime). A missing documented column stops the run
with one line; a row that does not fit goes to quarantine with its reasons.

That is the exact parse, line by line in the engine. An ingest first tries the fast parse
(hourlypass: each file read once in Arrow where the engine's task runs) and keeps the exact parse
for a table the fast one cannot type exactly, or where a rule sets a row aside.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from dataclasses import dataclass, replace
from datetime import date, datetime, time
from functools import partial
from pathlib import Path
from typing import ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.contract import FastParse, Parser, TableInput, derived
from tracelake.api.tables import read_tables
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io.frames import union_all
from tracelake.io.parse import (
    PARSE_ERRORS,
    ROW_ID,
    VERDICT,
    finish,
    raw_field,
    raw_values_json,
    split_fields,
    typed_columns,
)
from tracelake.io.staging import Scratch
from tracelake.io.text import RawFile, first_bad_utf8, open_text, read_lines, regular_file, transcode_to_utf8
from tracelake.schema import TableSchema
from tracelake.sources.zhejiang import hourlypass
from tracelake.sources.zhejiang.clock import cst_to_utc, hours_to_rebuild, time_groups, utc_from_groups
from tracelake.sources.zhejiang.layout import TRAFFIC, hour_folders
from tracelake.sources.zhejiang.transforms.hourly import last_samples, link_wiring, nic_rates, wiring_with
from tracelake.sources.zhejiang.xlsx import read_sheets

NIC_TABLE = "bronze.zj_nic"
LINK_TABLE, WIRING_TABLE = "bronze.zj_link", "silver.zj_link_wiring"
TABLES = {
    "flow": "bronze.zj_flow",
    "nic": NIC_TABLE,
    "link": "bronze.zj_link",
    "port": "bronze.zj_port_minute",
}
# a column whose header marks the kind, for workbook sheets whose names do not say it
SIGNATURE = {"flow": "sourceqp", "nic": "receivedbytes", "link": "ifabbreviatedname", "port": "inpktsloss"}
# corrected spellings (lower case) -> the release's raw name; the duplicate link column
SPELLINGS = {
    "receivedpacketsbyunicast": "ReceiveddPacketsByUnicast",
    "transmittedpacketsbyunicast": "TransmitteddPacketsByUnicast",
    "inmulticastpkts": "InMuticastPkts",
    "outmulticastpkts": "OutMuticastPkts",
    "outbrdcastpkts.1": "OutBrdcastPkts_2",
}
OPTIONAL = {"OutBrdcastPkts_2"}  # a de-duplicating export may have dropped the repeated column
# a file is GB18030 when at least this share of its lines holding non-ASCII bytes are not UTF-8
# (a GBK line is valid UTF-8 only by chance; 上午/下午 never are)
GB18030_SHARE = 0.9
ESCAPED_BYTE = r"\\x[89a-f][0-9a-f]"  # a non-UTF-8 byte as the backslashreplace handler writes it
NOT_UTF8 = "line is not UTF-8 text (undecodable bytes shown as \\xNN)"


# ---------------------------------------------------------------- planning

def _not_utf8_share(path: Path) -> float:
    """The share of the lines holding non-ASCII bytes that do not decode as UTF-8 (0.0 if none).
    Neither encoding has a newline byte inside a character, so lines split safely."""
    text = bad = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.isascii():
                continue
            text += 1
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                bad += 1
    return bad / text if text else 0.0


def _as_utf8(path: Path, staging: Path, name: str) -> tuple[str, bool]:
    """(a UTF-8 path for Spark's text reader, whether undecodable bytes were escaped).

    A UTF-8 file is read where it is. Otherwise a copy goes to the run's staging folder: as
    GB18030 (a Chinese Excel export) when it has no UTF-8 BOM, at least GB18030_SHARE of its
    lines holding non-ASCII bytes fail UTF-8, and it all decodes as GB18030; else as UTF-8 with
    each undecodable byte written as a `\\xNN` escape, and the lines holding one are quarantined.
    So one GBK field in a UTF-8 file costs its line, not every Chinese time of the file
    (GB18030 decodes UTF-8 too, into other characters, without an error); a mixed file counts
    as UTF-8, since a quarantined line is seen and a mis-decoded one is not."""
    if first_bad_utf8(path) is None:
        return str(path), False
    target = staging / name.replace("/", "__")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as fh:
        bom = fh.read(3) == codecs.BOM_UTF8
    if not bom and _not_utf8_share(path) >= GB18030_SHARE:
        try:
            transcode_to_utf8(path, target, "gb18030")
            return str(target), False
        except UnicodeDecodeError:
            pass
    transcode_to_utf8(path, target, "utf-8", "backslashreplace")
    return str(target), True


def _cell_text(value: object) -> str:
    """A workbook cell as the CSV text an export would have written."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).upper()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
    if isinstance(value, datetime):  # a real date cell: local time as shown, 24-hour
        frac = f".{value.microsecond:06d}" if value.microsecond else ""
        return f"{value.year}/{value.month}/{value.day} {value:%H:%M:%S}{frac}"
    if isinstance(value, (date, time)):
        return value.isoformat()
    return str(value)


def _sheet_kind(sheet: str, rows: list[list[object]], where: str) -> str | None:
    named = [k for k in TABLES if k in sheet.lower()]
    if len(named) == 1:
        return named[0]
    if not rows:
        return None
    header = {_cell_text(v).strip().lower() for v in rows[0]}
    kinds = [k for k, col in SIGNATURE.items() if col in header]
    if len(kinds) != 1:
        raise TracelakeError(f"{where}: sheet '{sheet}' is none of flow/nic/link/port (by name or header)")
    return kinds[0]


def _workbook_files(path: Path, hour: str, staging: Path) -> dict[str, RawFile]:
    """Each sheet of <hour>.xlsx as a UTF-8 CSV in staging, named <hour>.xlsx!<sheet>."""
    where = f"{TRAFFIC}/{hour}/{path.name}"
    found: dict[str, RawFile] = {}
    for sheet, rows in read_sheets(path).items():
        kind = _sheet_kind(sheet, rows, where)
        if kind is None:
            continue  # an empty sheet holds no rows
        if kind in found:
            raise TracelakeError(f"{where}: two sheets hold {kind} rows")
        target = staging / "zj_hourly" / hour / f"{path.stem}__{kind}.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        for row in rows:
            writer.writerow([_cell_text(v) for v in row])
        target.write_text(buffer.getvalue(), encoding="utf-8")
        found[kind] = RawFile(str(target), f"{where}!{sheet}", {"hour_cst": hour})
    return found


def _hour_files(hour_dir: Path) -> dict[str, Path]:
    """The hourly files of an hour folder, by name. An hour folder holds switch folders (ports.py
    reads and checks them), <hour>_{flow,nic,link,port}.csv, <hour>.xlsx and dot files: any other
    entry (a misnamed `_Flow.csv`, a `notes.txt`) stops the run rather than being left unread, and
    so does an hour folder with nothing to ingest."""
    hour = hour_dir.name
    wanted = {f"{hour}_{kind}.csv" for kind in TABLES} | {f"{hour}.xlsx"}
    found: dict[str, Path] = {}
    folders: list[Path] = []
    for path in sorted(hour_dir.iterdir()):
        if path.name.startswith("."):
            continue
        if path.is_dir():
            folders.append(path)
        elif path.name in wanted:
            found[path.name] = regular_file(path, f"{TRAFFIC}/{hour}/{path.name}")
        else:
            raise TracelakeError(
                f"{TRAFFIC}/{hour}/{path.name}: unexpected file in an hour folder (want {hour}_flow.csv, "
                f"{hour}_nic.csv, {hour}_link.csv, {hour}_port.csv or {hour}.xlsx beside the switch folders)"
            )
    if not found and not folders:  # an hour that has not arrived, or a failed copy (ports.py
        # refuses a switch folder without port files)
        raise TracelakeError(f"{TRAFFIC}/{hour}: the hour folder holds no switch folders and no hourly files")
    return found


def plan(raw_dir: Path, staging: Path, hours: tuple[str, ...] | None = None) -> list[TableInput]:
    """TableInputs for the hourly files found in raw_dir (all hours, or the chosen ones); []
    when there are none."""
    files: dict[str, list[RawFile]] = {kind: [] for kind in TABLES}
    escaped: set[str] = set()
    for hour_dir in hour_folders(raw_dir, hours):
        hour = hour_dir.name
        found = _hour_files(hour_dir)
        by_kind: dict[str, RawFile] = {}
        for kind in TABLES:
            path = found.get(f"{hour}_{kind}.csv")
            if path is not None:
                name = f"{TRAFFIC}/{hour}/{path.name}"
                readable, was_escaped = _as_utf8(path, staging / "zj_hourly", name)
                by_kind[kind] = RawFile(readable, name, {"hour_cst": hour})
                if was_escaped:
                    escaped.add(name)
        book = found.get(f"{hour}.xlsx")
        if book is not None:
            for kind, raw in _workbook_files(book, hour, staging).items():
                if kind in by_kind:
                    raise TracelakeError(
                        f"{TRAFFIC}/{hour}: {kind} rows both in {hour}_{kind}.csv and {book.name}; keep one"
                    )
                by_kind[kind] = raw
        for kind, raw in by_kind.items():
            files[kind].append(raw)
    parser = HourlyParser(frozenset(escaped))
    return [TableInput(TABLES[k], v, parser) for k, v in files.items() if v]


# ---------------------------------------------------------------- parsing

def _first_line(path: str) -> str:
    """The header; of a file the engine reads from a store, by ranged reads of its start."""
    with open_text(path) as fh:
        return fh.readline().rstrip("\r\n").lstrip("\ufeff")


def header_positions(header_line: str, schema: TableSchema, where: str) -> tuple[dict[str, int], list[str]]:
    """Raw column name -> field position, and a unique label for every field of the file.

    Matching ignores case and padding and takes the corrected spellings; a name that repeats
    (link.csv's OutBrdcastPkts) maps its second occurrence to `<name>_2`."""
    known = {name.lower(): name for name in schema.raw_header}
    known.update({k: v for k, v in SPELLINGS.items() if v in schema.raw_header})
    positions: dict[str, int] = {}
    labels: list[str] = []
    for i, field in enumerate(header_line.split(schema.delimiter)):
        text = field.strip()
        name = known.get(text.lower())
        if name in positions and f"{name}_2" in schema.raw_header:
            name = f"{name}_2"
        if name is None or name in positions:
            name = text if text and text not in labels else f"_extra_{i + 1}"
        else:
            positions[name] = i
        labels.append(name)
    missing = [n for n in schema.raw_header if n not in positions and n not in OPTIONAL]
    if missing:
        raise TracelakeError(
            f"{where}: header lacks {schema.full_name}'s documented column(s) {', '.join(missing)} "
            f"(found: {header_line[:300]})"
        )
    return positions, labels


def _groups(i: int) -> str:
    """The column holding field i's time groups (clock.time_groups)."""
    return f"_time_groups{i}"


def _parse_file(spark: SparkSession, raw: RawFile, schema: TableSchema, escaped: bool = False) -> DataFrame:
    """One file → the parser contract, its fields matched to the schema by its own header;
    `escaped`: the file's undecodable bytes were written as escapes (_as_utf8), and the lines
    showing one are quarantined (so is a line of that file holding such text of its own: rare,
    and seen)."""
    header = _first_line(raw.path)
    positions, labels = header_positions(header, schema, raw.name)
    lines = read_lines(spark, [raw], header)
    split = split_fields(lines, schema.delimiter, len(labels), trim=True)
    # each local time's groups in a projection of their own (clock.time_groups)
    times = {c.name: positions[c.source] for c in schema.data_columns if c.type == "timestamp" and c.source in positions}
    split = split.select("*", *[time_groups(F.col(raw_field(i))).alias(_groups(i)) for i in sorted(set(times.values()))])
    fields = {name: F.col(raw_field(i)) for name, i in positions.items()}
    # an optional column this file does not have reads as an empty field
    fields.update({name: F.lit(None).cast("string") for name in schema.raw_header if name not in positions})
    overrides = {"timestamp": cst_to_utc,
                 **{name: partial(utc_from_groups, groups=F.col(_groups(i))) for name, i in times.items()}}
    typed, problems = typed_columns(schema, fields, split.columns, len(labels), overrides=overrides, values_first=True)
    if escaped:
        problems = [(F.col("raw_line").rlike(ESCAPED_BYTE), F.lit(NOT_UTF8)), *problems]
    by_label = {label: F.col(raw_field(i)) for i, label in enumerate(labels)}
    return finish(split, schema, typed, raw_values_json(by_label), problems, values_first=True)


@dataclass(frozen=True)
class HourlyParser(Parser):
    """The parse_lines contract for hourly files whose headers may differ in order and spelling;
    `escaped`: the lineage names of files staged with escaped bytes (plan). `parse` is the fast
    parse of hourlypass where it can type the table, checked once staged; the parse line by line
    (`exact`) where it cannot, or, for every file, when it does not hold."""

    escaped: frozenset[str] = frozenset()
    name: ClassVar[str] = "zhejiang.hourly"

    def exact(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              scratch: Scratch | None = None) -> DataFrame:
        if not files:
            raise TracelakeError(f"no input files for {schema.full_name}")
        return union_all([_parse_file(spark, raw, schema, raw.name in self.escaped) for raw in files])

    def parse(self, spark: SparkSession, files: list[RawFile], schema: TableSchema, *,
              lake: Config | None = None, scratch: Scratch | None = None) -> DataFrame | FastParse:
        if not files or self.escaped.intersection(raw.name for raw in files) or not hourlypass.takes(schema):
            return self.exact(spark, files, schema)
        return FastParse(_fast_parse(spark, files, schema), clean=True, needs_raw=True)

    def remainder(self, spark: SparkSession, staged: DataFrame, files: list[RawFile], schema: TableSchema, *,
                  scratch: Scratch | None = None) -> None:
        """None: a table whose fast parse did not hold is parsed again line by line, every file."""
        return None


def _fast_parse(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """hourlypass over the files, one engine task reading each; the headers are matched here, so a
    file lacking a documented column stops the run as the exact parse stops it."""
    rows = [(raw.path, raw.name, raw.constants.get("hour_cst"),
             json.dumps(header_positions(_first_line(raw.path), schema, raw.name)[0])) for raw in files]
    frame = spark.createDataFrame(rows, ", ".join(f"{c} string" for c in hourlypass.FILE_COLUMNS))
    out = frame.mapInArrow(partial(hourlypass.parse_files, schema=schema), hourlypass.output_ddl(schema))
    return out.select(
        *[c.name for c in schema.data_columns], "source_file",
        F.lit(None).cast("string").alias("raw_line"), F.lit(None).cast("string").alias("raw_values_json"),
        F.concat(F.col("source_file"), F.lit(":"), F.col("line_number").cast("string")).alias(ROW_ID),
        PARSE_ERRORS, VERDICT,
    )


# ---------------------------------------------------------------- derived tables

def rebuild_nic_rates(spark: SparkSession, config: Config, changed: dict, scratch: Scratch) -> tuple[DataFrame, tuple] | None:
    """The NIC rates of the changed hours and of the stored hour after each (its first interval
    starts in the changed hour), from those hours' samples plus each NIC's last sample of the
    hour before; nothing else of the lake is read."""
    [nic] = read_tables(spark, config, NIC_TABLE)
    if nic is None:
        return None
    hours, before = hours_to_rebuild(nic, {values[0] for values in changed[NIC_TABLE]})
    earlier = last_samples(nic.filter(F.col("hour_cst").isin(before)))
    return nic_rates(nic.filter(F.col("hour_cst").isin(hours)), earlier), tuple((h,) for h in hours)


def rebuild_link_wiring(spark: SparkSession, config: Config, changed: dict, scratch: Scratch) -> tuple[DataFrame, None] | None:
    """silver.zj_link_wiring with the link ends of the changed hours added to the stored ones
    (wiring_with), when the stored table holds no row of those hours: its samples add up to the
    rows of every other hour (a count the engine takes from the files' metadata). A new hour
    then reads its own rows only, however many hours the lake holds. Otherwise (a replaced
    hour, an hour whose rebuild never ran, no table yet) it is built whole from every hour."""
    link, stored = read_tables(spark, config, LINK_TABLE, WIRING_TABLE)
    if link is None:
        return None
    hours = F.col("hour_cst").isin(sorted({values[0] for values in changed[LINK_TABLE]}))
    if stored is not None:
        [(samples,)] = stored.agg(F.sum("samples")).collect()
        if (samples or 0) == link.filter(~hours).count():
            return wiring_with(stored, link_wiring(link.filter(hours))), None
    return link_wiring(link), None


DERIVED = [
    replace(derived("silver.zj_nic_rates", nic_rates, (NIC_TABLE,)), rebuild=rebuild_nic_rates),
    replace(derived(WIRING_TABLE, link_wiring, (LINK_TABLE,)), rebuild=rebuild_link_wiring),
]
