"""The hourly CSVs' fast parse (hourlypass): every value it types equals the line-by-line parse's,
row for row, and whatever it cannot type so sends the table line by line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from same_rows import same_rows

from tracelake.io.parse import PARSE_ERRORS
from tracelake.io.staging import FastParse
from tracelake.io.text import RawFile
from tracelake.quality.gate import load_suite
from tracelake.quality.split import row_flags, staged_form
from tracelake.run.parsing import settle_parse
from tracelake.schema import load_schema
from tracelake.sources.zhejiang import hourly, hourlypass
from tracelake.sources.zhejiang.synth.cluster import load_cluster
from tracelake.sources.zhejiang.synth.hourly import HourlyWriter
from tracelake.sources.zhejiang.synth.world import World

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "hourly" / "trafficinfo" / "2024052412"
LINK = "bronze.zj_link"


def _values(frame, schema):
    return frame.select(*[c.name for c in schema.data_columns], "source_file")


def _staged(spark, item, path: Path):
    schema = load_schema(item.table)
    flags, by_gx = row_flags(load_suite(item.table))
    return settle_parse(spark, item.parser, item.files, schema, path,
                        lambda frame, proven, clean=False: staged_form(frame, schema, flags, by_gx, proven, clean))


@pytest.mark.e2e  # a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
@pytest.mark.portable
@pytest.mark.slow_on_classic
def test_fast_parse_of_generated_hours_equals_the_exact_parse_row_for_row(spark, tmp_path):
    """Two generated hours as CSVs and a third as a workbook: every table held whole and its staged
    rows are the line-by-line parse's, value for value."""
    cluster = load_cluster("synthetic")[0]
    hours = ["2024052323", "2024052400", "2024052401"]
    writer = HourlyWriter(World(cluster, hours, 3, 0.05, 11))
    for hour in hours:
        writer.write_hour(hour, tmp_path / "raw" / "trafficinfo" / hour, "xlsx" if hour == hours[2] else "csv")
    items = hourly.plan(tmp_path / "raw", tmp_path / "staging")
    assert sorted(i.table for i in items) == ["bronze.zj_flow", "bronze.zj_link", "bronze.zj_nic", "bronze.zj_port_minute"]
    for item in items:
        schema = load_schema(item.table)
        assert isinstance(item.parser.parse(spark, item.files, schema), FastParse)
        settled = _staged(spark, item, tmp_path / "fast" / item.table)
        staged, held = settled.rows, settled.held
        assert held, item.table
        exact = item.parser.exact(spark, item.files, schema)
        got, want = _values(staged, schema).toArrow(), _values(exact, schema).toArrow()
        assert want.num_rows > 100, item.table
        assert same_rows(got, want, rtol=0, atol=0), item.table
        assert exact.filter(F.size(PARSE_ERRORS) > 0).count() == 0


# one link row (the fixture's first) with a field replaced: (column, text, typed by the fast parse)
VARIANTS = [
    ("InOctets", "93553320477", True), ("InOctets", "  42 ", True), ("InOctets", "-7", True),
    ("InOctets", "+42", False), ("InOctets", "007", False), ("InOctets", "1.0", False), ("InOctets", "99999999999999999999", False),
    ("InOctets", "٤٢", False),
    ("InUseRatio", "0.87", True), ("InUseRatio", "1e-3", True), ("InUseRatio", "-0.0", True), ("InUseRatio", "12", True),
    ("InUseRatio", ".5", False), ("InUseRatio", "5.", False), ("InUseRatio", "1e400", False), ("InUseRatio", "NaN", False),
    ("InUseRatio", "+1", False), ("InUseRatio", "0x10", False),
    ("StartTime", "2024/5/24 下午12:00:04", True), ("StartTime", "2024/5/24 上午12:00:04", True),
    ("StartTime", "2024/5/24 上午00:00:04", True), ("StartTime", "2024/5/24 下午1:05", True),
    ("StartTime", "2024/5/24 下午13:05:09", True), ("StartTime", "2024-05-24T01:02:03.5", True),
    ("StartTime", "2024/2/29 0:00:04.123456", True), ("StartTime", "2024/5/24  下午 1:05:09", True),
    ("StartTime", "2024/5/24 上午13:00:00", False), ("StartTime", "2024/2/30 上午1:00:00", False),
    ("StartTime", "2023/2/29 1:00:00", False), ("StartTime", "2024/5/24 24:00:00", False),
    ("StartTime", "2024/5/24 1:60:00", False), ("StartTime", "2024/5/24 1:00:60", False),
    ("StartTime", "24/5/2024 1:00", False), ("StartTime", "2024|5|24|下午|12|01|05|", False),
    ("StartTime", "2024/5/24\u3000下午1:05:09", False), ("StartTime", "", False),
    ("DstPort", "", True), ("DstPort", "  FourHundredGigE1/0/8  ", True), ("IfOperStatus", "上", True),
    ("DstPort", "\tFourHundredGigE1/0/8", True), ("DstPort", "\u00a0FourHundredGigE1/0/8\u3000", True),
    ("DeviceName", "", False),
]


def _naive_utc(value):
    """An Arrow instant as the engine's rows give it: naive, in the session's UTC."""
    return value.astimezone(UTC).replace(tzinfo=None) if isinstance(value, datetime) else value


def _variant_line(n: int, column: str, text: str) -> tuple[str, str]:
    """(the link header, its first fixture row with `column` written as `text`), tagged by its Ip."""
    header, first, *_ = (FIXTURE / "2024052412_link.csv").read_text(encoding="utf-8").splitlines()
    names, fields = header.split(","), first.split(",")
    fields[names.index("Ip")] = f"10.0.0.{n}"
    fields[names.index(column)] = text
    return header, ",".join(fields)


@pytest.mark.portable
def test_each_value_the_fast_parse_types_is_the_exact_parses_and_the_rest_go_line_by_line(spark, tmp_path):
    """Each variant alone in a file for the fast parse, all of them as the lines of one file for
    the exact parse (a line's outcome there is its own)."""
    schema = load_schema(LINK)
    names = [c.name for c in schema.data_columns]
    lines, fast = [], {}
    for n, (column, text, typed) in enumerate(VARIANTS):
        header, line = _variant_line(n, column, text)
        lines.append(line)
        positions, _ = hourly.header_positions(header, schema, "f")
        try:
            table = hourlypass.typed_file(f"{header}\n{line}\n".encode(), schema, positions, "f", {"hour_cst": "2024052412"})
            fast[f"10.0.0.{n}"] = tuple(_naive_utc(v) for v in table.select(names).to_pylist()[0].values())
        except hourlypass.NeedsExact:
            pass
        assert (f"10.0.0.{n}" in fast) == typed, (column, text)
    path = tmp_path / "2024052412_link.csv"
    path.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    exact = hourly.HourlyParser().exact(spark, [RawFile(str(path), "f", {"hour_cst": "2024052412"})], schema)
    rows = {r.ip: r for r in exact.select(*names, PARSE_ERRORS).collect()}
    assert len(rows) == len(VARIANTS)
    for ip, values in fast.items():
        assert not rows[ip][PARSE_ERRORS] and tuple(rows[ip])[:-1] == values, VARIANTS[int(ip.split(".")[-1])]


def _fast_or_exact(data: bytes, table: str = LINK):
    """The fast parse's table of a file's bytes, or None where it sends the file line by line."""
    schema = load_schema(table)
    header = data.split(b"\n", 1)[0].decode().rstrip("\r")
    positions, _ = hourly.header_positions(header, schema, "f")
    try:
        return hourlypass.typed_file(data, schema, positions, "f", {"hour_cst": "2024052412"})
    except hourlypass.NeedsExact:
        return None


EDITS = [  # (id, an edit of the fixture's link.csv, rows the fast parse types; None: line by line)
    ("crlf", lambda d: d.replace(b"\n", b"\r\n"), 3),
    ("quotes-kept-as-text", lambda d: d.replace(b",up,", b',"up",', 1), 3),
    ("empty-last-line", lambda d: d + b"\n", None),
    ("empty-line", lambda d: d.replace(b"\n", b"\n\n", 1), None),
    ("cr-in-a-field", lambda d: d.replace(b",up,", b",u\rp,", 1), None),
    ("a-field-too-many", lambda d: d.replace(b",up,", b",up,,", 1), None),
    ("the-header-again", lambda d: d + d.split(b"\n", 1)[0] + b"\n", None),
    ("a-bom-inside", lambda d: d.replace(b"\n", b"\n\xef\xbb\xbf", 1), None),
    ("not-utf8", lambda d: d.replace(b",up,", b",\xff,", 1), None),
    ("no-data-line", lambda d: d.split(b"\n", 1)[0] + b"\n", None),
]


@pytest.mark.parametrize("edit, rows", [(e, r) for _, e, r in EDITS], ids=[i for i, _, _ in EDITS])
def test_what_sends_a_file_line_by_line(edit, rows):
    typed = _fast_or_exact(edit((FIXTURE / "2024052412_link.csv").read_bytes()))
    assert (None if typed is None else typed.num_rows) == rows
    if typed is not None:
        assert typed.column("if_oper_status").to_pylist()[0] in ("up", '"up"')


def test_the_file_rows_carry_their_positions_from_the_header(tmp_path):
    """The header's own order: columns matched by name (hourly.header_positions), not by place."""
    header, *lines = (FIXTURE / "2024052412_link.csv").read_text(encoding="utf-8").splitlines()
    names = header.split(",")
    order = [4, 0, 1, 2, 3, *range(5, len(names))]  # StartTime first
    data = "\n".join([",".join(names[i] for i in order),
                      *[",".join(line.split(",")[i] for i in order) for line in lines]]).encode() + b"\n"
    swapped = _fast_or_exact(data)
    plain = _fast_or_exact((FIXTURE / "2024052412_link.csv").read_bytes())
    assert swapped is not None and swapped.equals(plain)
    assert json.loads(json.dumps(hourly.header_positions(header, load_schema(LINK), "f")[0]))["StartTime"] == 4
