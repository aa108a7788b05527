"""The hourly CSVs' fast parse: each file read once with pyarrow inside the engine's task (by path,
as the port pass reads its files), typed in Arrow and handed over in the staged form (no raw line,
no raw values: io.staging.FastParse's `clean`).

It takes a file only where every value types exactly as the line-by-line parse (hourly._parse_file)
would type it: whole integers, plain decimals, the local times of clock.TIME_PATTERN with a valid
date and clock; every line of the header's field count; UTF-8 with no BOM or stray CR inside; no
header line repeated; every value of a column that needs one present. Any other file yields one
marker row (the verdict io.parse.EXACT), and the table is then parsed line by line (hourly.HourlyParser's
fallback), so every quarantine row and reason stays that parse's. So does a table where a
quarantine rule sets a row aside (FastParse.needs_raw): its quarantine row needs the raw text.

Why: the exact parse costs the engine about 20 µs a line (a split, a trim and a cast per field,
a regex per local time, the raw values as JSON): 1.7-2.2 s of its CPU for one hour's four files
(84 K lines, in process), on the two cores the port pass keeps busy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from tracelake.io import objectstore
from tracelake.io.frames import arrow_ddl
from tracelake.io.parse import EXACT, EXACT_REASON, KEPT, PARSE_ERRORS, VERDICT
from tracelake.schema import TableSchema
from tracelake.sources.zhejiang.clock import AM, PM

FILE_COLUMNS = ("path", "source_file", "hour_cst", "positions")
BOM = b"\xef\xbb\xbf"
# the text a decimal may have to be typed here (an integer must print as its value); any other
# text (a sign, padding inside, a bare ".5", a Unicode digit the engine's regex takes) sends the
# file line by line
DECIMAL = r"^-?[0-9]{1,300}(\.[0-9]{1,300})?([eE][-+]?[0-9]{1,3})?$"
# clock.TIME_PATTERN with ASCII digits and named groups (RE2, pyarrow's regex engine)
LOCAL_TIME = (r"^(?P<y>[0-9]{4})[/-](?P<mo>[0-9]{1,2})[/-](?P<d>[0-9]{1,2})(?:\s+|T)(?:(?P<m>上午|下午)\s*)?"
              r"(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{2})(?::(?P<s>[0-9]{2}))?(?:\.(?P<f>[0-9]{1,6}))?$")
FIRST_YEAR, LAST_YEAR = 1971, 2999  # times outside these years go line by line
CST_OFFSET_S = 8 * 3600
ARROW_TYPES = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64(),
               "timestamp": pa.timestamp("us", tz="UTC")}


def takes(schema: TableSchema) -> bool:
    """Whether the fast parse can type every column of the schema (else the table goes line by line)."""
    return all(c.type in ARROW_TYPES and not c.null_values and not c.non_finite for c in schema.data_columns) \
        and len(schema.delimiter) == 1


def output_schema(schema: TableSchema) -> pa.Schema:
    """What the function yields: the schema's data columns, source_file, the line's number, its
    parse problems (none, or EXACT_REASON on a marker row) and its verdict (EXACT on a marker row)."""
    return pa.schema([*[(c.name, ARROW_TYPES[c.type]) for c in schema.data_columns], ("source_file", pa.string()),
                      ("line_number", pa.int64()), (PARSE_ERRORS, pa.list_(pa.string())), (VERDICT, pa.int8())])


def output_ddl(schema: TableSchema) -> str:
    return arrow_ddl(output_schema(schema))


class NeedsExact(Exception):
    """The file holds something the fast parse does not type as the exact parse would."""


def _fields(data: bytes, header: bytes, n_fields: int, delimiter: str) -> pa.Table:
    """The data lines' fields as text, by position (f0, f1, …)."""
    stray_cr = b"\r" in data and data.count(b"\r") != data.count(b"\r\n") + data.endswith(b"\r")
    if BOM in data or stray_cr or data.find(header, 1) >= 0:
        raise NeedsExact  # the exact parse strips a BOM or CR of any line and drops every header line
    try:
        return pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(use_threads=False, column_names=[f"f{i}" for i in range(n_fields)],
                                          skip_rows=1),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, quote_char=False, ignore_empty_lines=False,
                                            newlines_in_values=False),
            convert_options=pcsv.ConvertOptions(column_types={f"f{i}": pa.string() for i in range(n_fields)},
                                                strings_can_be_null=False, check_utf8=True),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):  # a line of another field count, bytes not UTF-8
        raise NeedsExact from None


def _matches(text: pa.Array, pattern: str) -> None:
    if pc.all(pc.match_substring_regex(text.drop_null(), pattern)).as_py() is False:
        raise NeedsExact


def local_times(text: pa.Array) -> pa.Array:
    """China-local times (clock.utc_from_groups' rule for 上午/下午) as UTC instants; NeedsExact
    where one does not match or names no valid date and clock."""
    if text.null_count == len(text):
        return pa.nulls(len(text), pa.timestamp("us", tz="UTC"))
    present = text.drop_null()
    parts = pc.extract_regex(present, LOCAL_TIME)
    if parts.null_count:
        raise NeedsExact

    def number(name: str) -> np.ndarray:
        digits = parts.field(name)
        return pc.cast(pc.if_else(pc.equal(digits, ""), "0", digits), pa.int64()).to_numpy()

    year, month, day, written, minute, second = (number(n) for n in ("y", "mo", "d", "h", "mi", "s"))
    marker = parts.field("m")
    pm, am = pc.equal(marker, PM).to_numpy(zero_copy_only=False), pc.equal(marker, AM).to_numpy(zero_copy_only=False)
    hour = np.where(pm & (written < 12), written + 12, np.where(am & (written == 12), 0, written))
    micros = pc.cast(pc.utf8_rpad(parts.field("f"), 6, "0"), pa.int64()).to_numpy()
    months = (year - 1970) * 12 + month - 1
    first = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    length = (months + 1).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64) - first
    valid = ((year >= FIRST_YEAR) & (year <= LAST_YEAR) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= length)
             & ~(am & (written > 12)) & (hour <= 23) & (minute <= 59) & (second <= 59))
    if not valid.all():
        raise NeedsExact
    seconds = (first + day - 1) * 86400 + hour * 3600 + minute * 60 + second - CST_OFFSET_S
    instants = pa.array(seconds * 1_000_000 + micros, pa.timestamp("us", tz="UTC"))
    if len(present) == len(text):
        return instants
    at = np.cumsum(text.is_valid().to_numpy(zero_copy_only=False)) - 1
    return pc.if_else(text.is_valid(), instants.take(pa.array(np.maximum(at, 0))), pa.scalar(None, instants.type))


def _typed(text: pa.Array, kind: str) -> pa.Array:
    if kind == "string":
        return text
    if kind == "timestamp":
        return local_times(text)
    if kind == "double":
        _matches(text, DECIMAL)
    try:
        value = pc.cast(text, ARROW_TYPES[kind])
    except pa.ArrowInvalid:  # not a number, or out of range
        raise NeedsExact from None
    if kind == "bigint" and pc.all(pc.equal(pc.cast(value, pa.string()), text)).as_py() is False:
        raise NeedsExact  # only a whole number written as its value prints (no sign, no leading zero)
    if kind == "double" and pc.all(pc.is_finite(value.drop_null())).as_py() is False:
        raise NeedsExact
    return value


def typed_file(data: bytes, schema: TableSchema, positions: dict[str, int], source_file: str,
               constants: dict[str, str]) -> pa.Table:
    """One file's rows as output_schema's columns; NeedsExact where the exact parse must read it."""
    header = data[: data.find(b"\n")] if b"\n" in data else data
    header = header.removesuffix(b"\r")
    n_fields = header.count(schema.delimiter.encode()) + 1
    fields = _fields(data, header, n_fields, schema.delimiter)
    n = fields.num_rows
    if not n:
        raise NeedsExact  # no rows: the exact parse and the row-count rule say what that means
    columns = {}
    for col in schema.data_columns:
        if col.source is None:
            if col.name not in constants:
                raise NeedsExact
            columns[col.name] = pa.repeat(pa.scalar(constants[col.name], pa.string()), n)
            continue
        if col.source in positions:
            # spaces trimmed as the exact parse trims them (a UTF-8 character holds no space byte)
            text = pc.ascii_trim(fields.column(f"f{positions[col.source]}").combine_chunks(), " ")
            text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
        else:
            text = pa.nulls(n, pa.string())
        if not col.nullable and text.null_count:
            raise NeedsExact
        columns[col.name] = _typed(text, col.type)
    no_problems = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.string()))
    columns.update(source_file=pa.repeat(pa.scalar(source_file, pa.string()), n),
                   line_number=pa.array(np.arange(2, n + 2, dtype=np.int64)),
                   **{PARSE_ERRORS: no_problems, VERDICT: pa.array(np.full(n, KEPT, np.int8))})
    return pa.table(columns, schema=output_schema(schema))


def _marker(schema: TableSchema, source_file: str) -> pa.Table:
    """One row saying: parse this table line by line."""
    row = {f.name: pa.nulls(1, f.type) for f in output_schema(schema)}
    row.update(source_file=pa.array([source_file]), **{PARSE_ERRORS: pa.array([[EXACT_REASON]]),
                                                        VERDICT: pa.array([EXACT], pa.int8())})
    return pa.table(row, schema=output_schema(schema))


def parse_files(batches: Iterator[pa.RecordBatch], schema: TableSchema) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function over rows of FILE_COLUMNS (`positions`: the header's raw column ->
    field position, as JSON, from hourly.header_positions on the driver)."""
    for batch in batches:
        for file in batch.to_pylist():
            try:
                with objectstore.open_raw(file["path"]) as stream:
                    data = stream.read().removeprefix(BOM)
                table = typed_file(data, schema, json.loads(file["positions"]), file["source_file"],
                                   {"hour_cst": file["hour_cst"]})
            except NeedsExact:
                table = _marker(schema, file["source_file"])
            yield from table.to_batches()
