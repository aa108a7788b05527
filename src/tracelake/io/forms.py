"""A raw file found by its name in whichever form the release may store it: in one of the places a
source accepts, as it is or compressed. One finder for every source, so a `.csv.gz` named in the
docs is read rather than skipped, and two copies of one file (two places, or two forms) stop the
run instead of loading its rows twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracelake.errors import TracelakeError
from tracelake.io.storetree import StorePath, lexists
from tracelake.io.text import regular_file


@dataclass(frozen=True)
class Found:
    path: Path | StorePath  # a local file, or an object of a store's listing (read in place)
    name: str  # its path under the raw folder: the lineage name
    aliases: tuple[str, ...]  # the names of its other places and forms, whose stored rows are its own


def find_one(raw_dir: Path, places: Sequence[str], suffixes: Sequence[str]) -> Found | None:
    """The file at one of `places` (paths under `raw_dir`), as it is or with one of `suffixes`
    (`.gz`, `.xz`); None when there is none; an error naming them when there is more than one."""
    names = [f"{place}{suffix}" for place in places for suffix in ("", *suffixes)]
    present = [name for name in names if lexists(raw_dir / name)]
    if len(present) > 1:
        raise TracelakeError(f"{raw_dir}: {' and '.join(present)} are one file in two places or forms; keep one")
    if not present:
        return None
    name = present[0]
    return Found(regular_file(raw_dir / name, name), name, tuple(n for n in names if n != name))
