"""Compressed raw bytes unpacked within documented bounds: the one copy loop for every
compressed input this process unpacks (a Zeus `.xz` or `.gz`, an AcmeTrace job trace `.gz`, a
member of an ITP `.tar.gz`). A few hundred kilobytes of `.xz` or `.gz` can hold a line of
gigabytes: the engines then failed deep inside (`Offset overflow`, exit 1) after taking 3 to 9 GB.
Here such a file stops at its first line past MAX_LINE_BYTES, or once its unpacked bytes pass
MAX_UNPACKED_BYTES, exit 2 naming the file and the line, in memory of about one chunk."""

from __future__ import annotations

import gzip
import lzma
import zlib
from pathlib import Path
from typing import BinaryIO

from tracelake.errors import TracelakeError

MAX_LINE_BYTES = 8 << 20  # 8 MiB: the widest real line (2,000 GPU columns of AcmeTrace) is about 20 KiB
MAX_UNPACKED_BYTES = 64 << 30  # 64 GiB of one file: the largest release file unpacks to a few GiB
CHUNK = 1 << 20


def _too_long(name: str, line: int, limit: int) -> TracelakeError:
    return TracelakeError(f"{name}: line {line:,} is longer than {limit >> 20} MiB, the bound on one line "
                          "(a line this long is refused, not read)")


def copy_bounded(source: BinaryIO, target: BinaryIO, name: str, max_line: int = MAX_LINE_BYTES,
                 max_bytes: int = MAX_UNPACKED_BYTES) -> int:
    """Copy the unpacked bytes of `source` to `target` a chunk at a time; the bytes copied. A
    line longer than `max_line` or a whole longer than `max_bytes` stops with a TracelakeError
    naming `name` and the line."""
    total, lines_before, run = 0, 0, 0  # run: bytes of the line still open at the chunk's start
    while chunk := source.read(CHUNK):
        total += len(chunk)
        if total > max_bytes:
            raise TracelakeError(f"{name}: unpacks to more than {max_bytes >> 30} GiB, the bound on one file "
                                 "(refused as a compressed bomb)")
        parts = chunk.split(b"\n")
        lengths = [run + len(parts[0]), *(len(p) for p in parts[1:])]
        if max(lengths) > max_line:
            raise _too_long(name, lines_before + next(i for i, n in enumerate(lengths) if n > max_line) + 1, max_line)
        lines_before += len(parts) - 1
        run = lengths[-1]
        target.write(chunk)
    return total


OPENERS = {".xz": lzma.open, ".gz": gzip.open}


def unpacked(path, staging: Path, name: str):
    """`path` itself when it is not `.xz` or `.gz`; else its bytes unpacked into `staging`
    within the bounds (the engines read no `.xz`, and read a `.gz` without any), streamed from
    its store when it lies in one: its compressed bytes are read once, never copied whole first."""
    from tracelake.io import objectstore

    opener = OPENERS.get(Path(str(path)).suffix)
    if opener is None:
        return path
    staging.mkdir(parents=True, exist_ok=True)
    target = staging / Path(str(path)).stem
    stored = objectstore.is_url(str(path))
    kind = Path(str(path)).suffix
    try:
        with (objectstore.open_input(str(path)) if stored else open(path, "rb")) as raw, \
                opener(raw) as src, open(target, "wb") as dst:
            copy_bounded(src, dst, name)
    except (lzma.LZMAError, gzip.BadGzipFile, zlib.error) as exc:
        raise TracelakeError(f"{name}: not a valid {kind} file ({exc})") from exc
    except EOFError:  # the stream ends before its end marker: a cut-off download
        raise TracelakeError(f"{name}: truncated {kind} file (the stream ends before its end marker)") from None
    return target


class _Nowhere:
    def write(self, data: bytes) -> int:
        return len(data)


def check_lines(path: str, name: str) -> None:
    """Read `path` through the bounds, writing nothing (gzip undone for a `.gz` name, from its
    store for a URL): for a compressed file the engine is about to read as text itself."""
    from tracelake.io import objectstore

    with (objectstore.open_input(path) if objectstore.is_url(path) else open(path, "rb")) as raw:
        source = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
        try:
            copy_bounded(source, _Nowhere(), name)
        except (gzip.BadGzipFile, zlib.error, EOFError):
            return  # a damaged stream: the engine's read names it (io.text.unreadable)
