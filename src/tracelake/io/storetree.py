"""A raw folder at a URL walked as a local one, from one listing of the store.

A source's plan walks its raw folder (`/`, iterdir, is_dir, is_file, name, relative_to). Given a
StorePath it walks the store's listing instead, so the files the engine's tasks read themselves
(`in_place`) are planned at their URLs and never copied: on a cluster they are read where the
tasks run, and their listed sizes (`size`, `listed_size`) spare a request each. Every other
file was copied to the run's staging before the plan (the driver opens it: an archive, a
workbook, a log it checks); its node stands for that copy (`str`, `fspath`).
Folders print as their URL, so a plan's errors name the store. No pyarrow here: the listing is
made by io.objectstore.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tracelake.errors import TracelakeError


@dataclass(frozen=True)
class Listing:
    """One listing of `url`: every object's relative path and size, the copies of those not read
    in place. The sizes spare a request per file where a plan weighs its files (AcmeTrace's
    utilization groups)."""

    url: str
    local: Path  # where the files not read in place were copied, with every folder of the listing
    files: frozenset[str]
    in_place: frozenset[str]
    sizes: Mapping[str, int] = field(default_factory=dict, compare=False)
    folders: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        parents = {str(p) for rel in self.files for p in PurePosixPath(rel).parents if str(p) != "."}
        object.__setattr__(self, "folders", frozenset(parents | {""}))

    @classmethod
    def of(cls, url: str, local: Path, listed: Iterable[tuple[str, int]], in_place: Callable[[str], bool]) -> Listing:
        """From io.objectstore.list_files's (relative path, size) pairs."""
        sizes = dict(listed)
        files = frozenset(sizes)
        return cls(url.rstrip("/"), local, files, frozenset(rel for rel in files if in_place(rel)), sizes)


@dataclass(frozen=True, order=True)
class StorePath:
    """A node of a Listing: the root folder (rel "") or an object or folder under it."""

    rel: str
    listing: Listing = field(compare=False, repr=False)

    @classmethod
    def root(cls, listing: Listing) -> StorePath:
        return cls("", listing)

    def __truediv__(self, name: str) -> StorePath:
        rel = f"{self.rel}/{name}" if self.rel else str(name)
        return StorePath(str(PurePosixPath(rel)), self.listing)

    @property
    def url(self) -> str:
        return f"{self.listing.url}/{self.rel}" if self.rel else self.listing.url

    @property
    def in_place(self) -> bool:
        """An object the engine reads at its URL (no copy of it exists)."""
        return self.rel in self.listing.in_place

    @property
    def name(self) -> str:
        return PurePosixPath(self.rel).name

    @property
    def stem(self) -> str:
        return PurePosixPath(self.rel).stem

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.rel).suffix

    @property
    def parent(self) -> StorePath:
        parent = str(PurePosixPath(self.rel).parent)
        return StorePath("" if parent == "." else parent, self.listing)

    def is_dir(self) -> bool:
        return self.rel in self.listing.folders

    def is_file(self) -> bool:
        return self.rel in self.listing.files

    def exists(self) -> bool:
        return self.is_dir() or self.is_file()

    def is_symlink(self) -> bool:
        return False

    def size(self) -> int:
        """The object's size as listed (no request)."""
        if not self.is_file():
            raise TracelakeError(f"{self.url}: not a file")
        return self.listing.sizes[self.rel]

    def iterdir(self) -> list[StorePath]:
        if not self.is_dir():
            raise TracelakeError(f"{self.url}: not a folder")
        prefix = f"{self.rel}/" if self.rel else ""
        names = {rel[len(prefix):].split("/", 1)[0] for rel in self.listing.files | self.listing.folders
                 if rel.startswith(prefix) and rel != self.rel}
        return [self / name for name in sorted(names)]

    def relative_to(self, other: StorePath) -> PurePosixPath:
        return PurePosixPath(self.rel).relative_to(other.rel)

    def as_posix(self) -> str:
        return str(self)

    def local_copy(self) -> Path:
        """The run's copy of this file or folder (folders are all made; files read in place have none)."""
        if self.in_place:
            raise TracelakeError(f"{self.url}: read where it is stored; there is no local copy of it")
        return self.listing.local.joinpath(*PurePosixPath(self.rel).parts)

    def __fspath__(self) -> str:
        return os.fspath(self.local_copy())

    def __str__(self) -> str:
        """A folder or a file read in place: its URL; a copied file: the copy's path."""
        return self.url if self.in_place or self.is_dir() or not self.is_file() else os.fspath(self.local_copy())


def as_folder(raw_dir: str | os.PathLike) -> Path | StorePath:
    """A plan's raw folder as something to walk: a StorePath as it is, anything else as a Path."""
    return raw_dir if isinstance(raw_dir, StorePath) else Path(raw_dir)


def lexists(path: str | os.PathLike) -> bool:
    """os.path.lexists for a plan's paths: a StorePath is there when its listing holds it (a
    file read in place has no local copy to ask about)."""
    return path.exists() if isinstance(path, StorePath) else os.path.lexists(path)


def listed_size(path: str | os.PathLike) -> int | None:
    """A file's size when a listing gave it (a file read in place), else None: a local file
    is asked when its size is needed."""
    return path.size() if isinstance(path, StorePath) and path.in_place else None
