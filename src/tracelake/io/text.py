"""Raw files as text: the file a run reads (RawFile), its encoding checks, and the one reader of
its data lines that every parser uses."""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import os
import stat
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.errors import TracelakeError, printable
from tracelake.io.frames import union_all
from tracelake.io.storetree import StorePath
from tracelake.schema import TableSchema


@dataclass(frozen=True)
class RawFile:
    """A file to ingest: where Spark reads it, its lineage name, and columns its name implies.
    `aliases`: the lineage names the same file has in another place or form the source accepts
    (`job_trace/trace_seren.csv` for `trace_seren.csv`, `.csv.xz` for `.csv`): rows stored under
    them are this file's, so moving or recompressing a file replaces its rows instead of
    leaving them stored under the old name."""

    path: str
    name: str
    constants: dict[str, str | None] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    size: int | None = None  # bytes, when a store's listing gave it (a file read in place): see file_size


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


def regular_file(path: str | Path | StorePath, name: str) -> Path | StorePath:
    """`path`, when it is a regular file (a link is followed); else a TracelakeError naming it and
    what it is. Every input is checked so before it is read: a FIFO blocks the read, and with it
    the run holding the lake's lock, until someone writes to it; a device never ends. A file read
    in place from a store is an object of its listing, which holds nothing else."""
    if isinstance(path, StorePath) and path.in_place:
        return path
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise TracelakeError(f"{name}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = next((what for test, what in _KINDS if test(mode)), "not a file")
        raise TracelakeError(f"{name}: {kind}, not a regular file; only regular files are read")
    return Path(path)


HEAD_BYTES = 1 << 16  # what a first-line check reads of an object in a store
HEADER_AGAIN = "_header_again"  # read_lines: the reason of a header line repeated mid-file, else null
SCAN_BYTES = 1 << 22


def _open_binary(path: str | Path, mode: str = "rb"):
    """A raw file's bytes: a local path, or a URL read from its store (a file read in place)."""
    if "://" in str(path):
        from tracelake.io.objectstore import open_input

        return open_input(str(path))
    return open(path, mode)


def first_line_bytes(path: str | Path) -> bytes:
    """The file's first line with its newline; of a file in a store, from a ranged read of its
    start (HEAD_BYTES), not the whole object."""
    if "://" in str(path):
        from tracelake.io.objectstore import read_head

        head = read_head(str(path), HEAD_BYTES)
        return head[: head.find(b"\n") + 1] if b"\n" in head else head
    with open(path, "rb") as fh:
        return fh.readline()


def _open_text(path: str | Path) -> io.TextIOBase:
    """The file as UTF-8 text with universal newlines, for its first line: of a file in a store,
    its first HEAD_BYTES decoded as a local file's start would be."""
    if "://" in str(path):
        from tracelake.io.objectstore import read_head

        return io.TextIOWrapper(io.BytesIO(read_head(str(path), HEAD_BYTES)), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


@contextlib.contextmanager
def open_binary_input(path: str | Path) -> Iterator[io.BufferedIOBase]:
    """The file's bytes as the engine reads them: gzip undone for a `.gz` name, a URL streamed
    from its store."""
    with _open_binary(path) as binary:
        if str(path).endswith(".gz"):
            with gzip.GzipFile(fileobj=binary, mode="rb") as inflated:
                yield inflated
        else:
            yield binary


@contextlib.contextmanager
def open_text(path: str | Path) -> Iterator[io.TextIOWrapper]:
    """The file as UTF-8 text with universal newlines, gzip undone for a `.gz` name, as a local
    `open(…, "rt")` reads it. A URL is read from its store HEAD_BYTES at a time by ranged reads:
    a reader of its first lines fetches those, not the whole object."""
    if "://" in str(path):
        from tracelake.io.objectstore import open_input

        binary = open_input(str(path), buffer_size=HEAD_BYTES)
    else:
        binary = open(path, "rb")
    with binary:
        layer = gzip.GzipFile(fileobj=binary, mode="rb") if str(path).endswith(".gz") else binary
        yield io.TextIOWrapper(layer, encoding="utf-8", newline="")


def file_size(raw: RawFile) -> int:
    """The file's size in bytes: as its store listed it, else asked of the local file system."""
    return raw.size if raw.size is not None else os.path.getsize(raw.path)


def first_bad_utf8(path: str | Path, opener: Callable = _open_binary) -> tuple[int, int] | None:
    """(offset, value) of the first byte of `path` that is not UTF-8, or None when it all
    decodes; read a chunk at a time (`opener`: e.g. gzip.open for a compressed file)."""
    decode, offset = codecs.getincrementaldecoder("utf-8")().decode, 0
    try:
        with opener(path, "rb") as fh:
            while chunk := fh.read(1 << 22):
                decode(chunk)
                offset += len(chunk)
            decode(b"", final=True)
    except UnicodeDecodeError as exc:
        return offset + exc.start, exc.object[exc.start]
    return None


def transcode_to_utf8(path: str | Path, target: Path, encoding: str, errors: str = "strict") -> None:
    """`path` decoded as `encoding`, written to `target` as UTF-8, a chunk at a time."""
    decoder = codecs.getincrementaldecoder(encoding)(errors)
    with open(path, "rb") as src, open(target, "w", encoding="utf-8", newline="") as dst:
        while chunk := src.read(1 << 22):
            dst.write(decoder.decode(chunk))
        dst.write(decoder.decode(b"", final=True))


def utf8_readable(raw: RawFile, staging: Path) -> RawFile:
    """The file itself when it is UTF-8; else a staged copy whose undecodable bytes are written
    as `\\xNN` escapes, so the engine can read it (Sail fails the whole read on one bad byte)
    and the lines holding them stay visible in quarantine instead of failing the run."""
    if first_bad_utf8(raw.path) is None:
        return raw
    staging.mkdir(parents=True, exist_ok=True)
    copy = staging / f"utf8-{abs(hash(raw.name)):x}-{Path(raw.path).name}"
    transcode_to_utf8(raw.path, copy, "utf-8", "backslashreplace")
    return RawFile(str(copy), raw.name, raw.constants)


def unreadable(files: Sequence[RawFile]) -> TracelakeError | None:
    """After the engine failed to read `files`: the first one that is not UTF-8 text or whose
    gzip stream is cut short or corrupt, as a user-facing error naming it; None when every file
    reads. check_header decodes only the start of a file and the engine's own error names no
    file, so this reads each file whole: it runs on the error path only. A line longer than
    io.unpack's bound is named first: the engines fail on one (a 300 MB line: Sail's result
    message over its limit, exit 1) without naming the file."""
    from tracelake.io.unpack import check_lines

    for raw in files:
        try:
            check_lines(raw.path, raw.name)
        except TracelakeError as exc:
            return exc
        try:
            opener = _open_binary
            if raw.path.endswith(".gz"):
                opener = (lambda p, m: gzip.open(_open_binary(p))) if "://" in raw.path else gzip.open
            bad = first_bad_utf8(raw.path, opener)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            return TracelakeError(f"{raw.name}: truncated or corrupt gzip file ({exc or type(exc).__name__})")
        if bad is not None:
            return TracelakeError(f"{raw.name}: not UTF-8 text (byte 0x{bad[1]:02x} near offset {bad[0]})")
    return None


def check_header(raw: RawFile, schema: TableSchema) -> None:
    """The first line must be the documented header; anything else is a different format."""
    expected = schema.delimiter.join(schema.raw_header)
    try:
        with _open_text(raw.path) as fh:
            first = fh.readline().rstrip("\r\n").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise TracelakeError(f"{raw.name}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    if first != expected:
        raise TracelakeError(
            f"{raw.name}: header {quoted_content(raw.path, first)} does not match {schema.full_name}'s "
            f"documented header '{expected}'"
        )


def quoted_content(path: str | Path, text: str, limit: int = 200) -> str:
    """A file's text as an error may quote it: escaped, cut at `limit`, and not at all when the
    file is a symbolic link (the link may lead to a file its owner never meant to show, and an
    error message travels to logs others read)."""
    if Path(path).is_symlink():
        return "(not shown: the file is a symbolic link)"
    return f"'{printable(text[:limit])}'"


def _line_endings(raw: RawFile) -> tuple[bool, bool]:
    """(has a UTF-8 BOM, uses CRLF), from the file's first line."""
    first = first_line_bytes(raw.path)
    return first.startswith(b"\xef\xbb\xbf"), first.endswith(b"\r\n")


def header_lines_again(path: str | Path, header: str, loose: bool) -> list[int]:
    """The numbers of the lines after the first that read_lines would take for `header` (two
    files joined by hand repeat it): `loose` as read_lines reads a line with its BOM and CR
    stripped. One pass of bytes.find holding one chunk, and a second pass counting lines only
    when a header is found (bench/header_scan.py)."""
    text = header.encode()
    starts = [b"\n" + text, b"\n\xef\xbb\xbf" + text] if loose else [b"\n" + text]
    ends = (b"\n", b"\r\n") if loose else (b"\n",)
    found, base, carry = [], 0, b""  # base: the file offset of data[0]
    with open_binary_input(path) as fh:
        while True:
            chunk = fh.read(SCAN_BYTES)
            data = carry + (chunk or b"\n")  # at the end, a last line with no newline of its own
            for start in starts:
                at = data.find(start)
                while at >= 0:
                    if data.startswith(ends, at + len(start)):
                        found.append(base + at)
                    at = data.find(start, at + 1)
            if not chunk:
                break
            keep = max(0, len(data) - len(starts[-1]) - 2)  # a header may straddle the chunks
            base, carry = base + keep, data[keep:]
    return _line_numbers(path, sorted(set(found))) if found else []


def _line_numbers(path: str | Path, offsets: list[int]) -> list[int]:
    """The number of the line that begins right after each newline at `offsets` (ascending)."""
    numbers, newlines, base = [], 0, 0
    with open_binary_input(path) as fh:
        while offsets and (chunk := fh.read(SCAN_BYTES)):
            while offsets and offsets[0] < base + len(chunk):
                numbers.append(newlines + chunk.count(b"\n", 0, offsets[0] - base) + 2)
                offsets = offsets[1:]
            newlines, base = newlines + chunk.count(b"\n"), base + len(chunk)
    return numbers


def header_again_reason(line: int) -> str:
    return f"line {line:,} repeats the file's header line (files joined?): not a data line"


def read_lines(spark: SparkSession, files: list[RawFile], header: str, *, detect_endings: bool = False) -> DataFrame:
    """The one reader of raw text for every parser: the data lines of `files` (a line equal to
    `header` is a header and dropped) with `source_file`, `raw_line` and the constants their
    paths imply (every constant any file has, null where a file lacks it). A UTF-8 BOM (which
    would hide the header) and a line's CR are stripped; `detect_endings` strips them only in
    files whose first line has them, since a per-row regex costs seconds per real hour of port
    counters. Lines are split on "\n" alone: with the default separator Sail yields an empty
    extra line where a split falls between the "\r" and "\n" of a CRLF file (measured).
    A header line after the first (files joined) is a row of its own with HEADER_AGAIN saying
    so, for the parse to set aside (io.parse.finish): read = kept + quarantined still holds."""
    if not files:
        raise TracelakeError("no input files to read")
    constant_names = sorted({k for f in files for k in f.constants})
    strips = [not detect_endings or any(_line_endings(raw)) for raw in files]  # one look at each file's start
    again = [(raw, n) for raw, loose in zip(files, strips) for n in header_lines_again(raw.path, header, loose)]
    frames = []
    for raw, loose in zip(files, strips):
        line = F.col("value")
        if loose:
            line = F.regexp_replace(line, "^\ufeff|\r$", "")
        cols = [F.lit(raw.name).alias("source_file"), line.alias("raw_line")]
        cols += [F.lit(raw.constants.get(k)).cast("string").alias(k) for k in constant_names]
        cols += [F.lit(None).cast("string").alias(HEADER_AGAIN)] if again else []
        frames.append(spark.read.option("lineSep", "\n").text(str(raw.path)).select(*cols))
    lines = union_all(frames).filter(F.col("raw_line") != F.lit(header))
    if not again:
        return lines
    rows = [(raw.name, header, *[raw.constants.get(k) for k in constant_names], header_again_reason(n))
            for raw, n in again]
    ddl = ", ".join(f"`{c}` string" for c in lines.columns)
    return lines.unionByName(spark.createDataFrame(rows, ddl))


def read_raw_lines(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """All data lines of the files, the schema's documented header dropped (read_lines)."""
    if not files:
        raise TracelakeError(f"no input files for {schema.full_name}")
    return read_lines(spark, files, schema.delimiter.join(schema.raw_header))
