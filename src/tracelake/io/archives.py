"""Reading members out of tar archives without trusting their names.

Every member is checked before anything is written: absolute paths, `..` components, links and
device files are rejected with an error naming the member. Wanted members are streamed into a
run's private staging folder, never next to the archive.
"""

from __future__ import annotations

import gzip
import lzma
import re
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from tracelake.errors import TracelakeError
from tracelake.io.unpack import copy_bounded


def _check_member(archive: Path, member: tarfile.TarInfo) -> None:
    name = member.name
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise TracelakeError(f"{archive.name}: member '{name}' has an absolute path; refusing the archive")
    if ".." in parts:
        raise TracelakeError(f"{archive.name}: member '{name}' escapes the archive with '..'; refusing the archive")
    if not (member.isfile() or member.isdir()):
        raise TracelakeError(f"{archive.name}: member '{name}' is a link or special file; refusing the archive")


def extract_members(
    archive: Path, dest: Path, wanted: Callable[[str], bool]
) -> dict[str, Path]:
    """Copy the wanted regular-file members of `archive` into `dest`; return name -> path."""
    try:
        tar = tarfile.open(archive, mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise TracelakeError(f"{archive}: not a readable tar archive ({exc})") from exc
    try:
        return _copy_members(archive, tar, dest, wanted)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as exc:  # truncated or corrupt
        raise TracelakeError(f"{archive}: truncated or corrupt archive ({exc or type(exc).__name__})") from None


def _copy_members(
    archive: Path, tar: tarfile.TarFile, dest: Path, wanted: Callable[[str], bool]
) -> dict[str, Path]:
    with tar:
        members = tar.getmembers()
        for member in members:
            _check_member(archive, member)
        out: dict[str, Path] = {}
        for member in members:
            if not member.isfile() or not wanted(member.name):
                continue
            target = dest / PurePosixPath(member.name).name
            if target.name in {p.name for p in out.values()}:
                raise TracelakeError(f"{archive.name}: two members are named {target.name}")
            dest.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:  # pragma: no cover - isfile() guarantees a stream
                continue
            with source, open(target, "wb") as fh:
                copy_bounded(source, fh, f"{archive.name}!{member.name}")
            out[member.name] = target
        _read_to_end(tar)
        return out


def _read_to_end(tar: tarfile.TarFile) -> None:
    """Decompress what is left of the stream after the last member. tarfile stops at the
    end-of-archive blocks, but gzip and xz check their CRC after them: without this, a flipped
    bit in the compressed data yields members with wrong bytes and no error."""
    stream = tar.fileobj
    while stream.read(1 << 20):
        pass
