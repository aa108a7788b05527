"""A run's input files put where an engine on other machines reads them: a run prefix in the
lake's store (`<lake>/_staging/<run id>/`).

Why: an archive's members, an unpacked .xz, a transcoded hourly CSV are made by this process on
its own disk, which a Spark Connect server's tasks cannot read. So, when the lake is at a URL
and the engine is not one on this machine (run.pipeline decides), every input file still on
this disk is uploaded once and planned at its object URL; the lineage names stay as they are.
A file that is a byte copy of a raw object (a URL raw folder's download) is planned at that
object's URL instead: nothing to upload. The prefix is removed at the run's end, and a crashed
run's by the next run on the lake (`remove_stale`, under the lake's write lock).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from tracelake.errors import TracelakeError
from tracelake.io import objectstore
from tracelake.io.staging import LEFT_BEHIND
from tracelake.io.text import RawFile

FOLDER = "_staging"


def prefix_for(lake_root: str, run_id: str) -> str:
    return f"{lake_root.rstrip('/')}/{FOLDER}/{run_id}"


def _target(path: Path, roots: Mapping[Path, str]) -> str | None:
    """The URL `path` is read at: under the deepest root that holds it, else None."""
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path.is_relative_to(root):
            return f"{roots[root].rstrip('/')}/{path.relative_to(root).as_posix()}"
    return None


def upload(local: Path, url: str) -> None:
    """One file to the object `url`, a chunk at a time; errors name the URL."""
    fs, path = objectstore.filesystem(url)
    try:
        with open(local, "rb") as src, fs.open_output_stream(path) as out:
            while chunk := src.read(1 << 22):
                out.write(chunk)
    except pa.ArrowException as exc:
        raise objectstore.store_error(url, exc) from None
    except OSError as exc:
        if exc.filename:  # our side: the staged file went away
            raise
        raise objectstore.store_error(url, exc) from None


def place(files: Iterable[RawFile], prefix: str, roots: Mapping[Path, str]) -> list[RawFile]:
    """`files` as the engine reads them: a file at a URL as it is; a local one at the URL its
    root maps it to (`roots`: local folder -> URL), uploaded there first when that URL is under
    `prefix` (a file of no root goes to `<prefix>/files/`). Its size is kept, as a listing
    gives it (io.text.file_size)."""
    placed, done = [], {}
    for raw in files:
        if objectstore.is_url(raw.path):
            placed.append(raw)
            continue
        local = Path(raw.path).absolute()
        if local not in done:
            url = _target(local, roots) or f"{prefix}/files/{len(done)}-{local.name}"
            if url.startswith(prefix.rstrip("/") + "/"):
                upload(local, url)
            done[local] = url
        placed.append(replace(raw, path=done[local], size=os.path.getsize(local)))
    return placed


def remove(prefix: str) -> None:
    """Every object under the run's prefix (none left is fine)."""
    objectstore.delete_under(prefix)


def remove_stale(lake_root: str, keep: str) -> list[str]:
    """Run prefixes under `<lake>/_staging` other than `keep` (a run id), and heal folders
    (io.staging.LEFT_BEHIND): left by runs killed before their cleanup. Called while the lake's
    write lock is held, so no other run is using them."""
    folder = f"{lake_root.rstrip('/')}/{FOLDER}"
    try:
        stale = [name for name in objectstore.list_dirs(folder) if LEFT_BEHIND.fullmatch(name) and name != keep]
    except TracelakeError:
        return []
    for name in stale:
        remove(f"{folder}/{name}")
    return stale

