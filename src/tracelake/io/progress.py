"""Progress from inside one engine job, for the ETA of a table being parsed.

Why a side channel: a table's files are parsed in one engine job, and Sail's Connect server sends
no execution progress (measured on 0.7.2: the client's progress handler is called once, at the
end, with no stages). A pass that reads files in Python (the port pass, the utilization pass)
knows when each file is done, so its task appends one line per file to a tally folder in the
run's staging; the run sums the lines while the job runs. Best effort on both sides: a task that
cannot write there (a worker on another machine) reports nothing, and the step's line then shows
its elapsed time only. Nothing here reads or decides on data.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Watch:
    """A step's tally folder and what its parse said it will read (`expect`)."""

    folder: Path
    sizes: dict[str, int] = field(default_factory=dict)  # path -> bytes, of every file the parse reads

    def done(self) -> tuple[int, int, int]:
        """(files, rows, bytes) the tasks reported so far; a line still being written is skipped."""
        files = rows = size = 0
        try:
            tallies = list(self.folder.iterdir())
        except OSError:
            return 0, 0, 0
        for tally in tallies:
            try:
                text = tally.read_text(encoding="utf-8")
            except OSError:
                continue
            for line in text.split("\n")[:-1]:  # only whole lines: the last piece has no newline yet
                count, _, path = line.partition("\t")
                files += 1
                rows += int(count) if count.isdigit() else 0
                size += self.sizes.get(path, 0)
        return files, rows, size

    def eta_s(self, elapsed: float) -> float | None:
        """Seconds left, from the share of bytes (or files, where sizes are unknown) done so far
        in `elapsed`; None before the first file is done."""
        files, _, size = self.done()
        total = sum(self.sizes.values())
        share = size / total if total and size else (files / len(self.sizes) if self.sizes else 0)
        if share <= 0:
            return None
        return max(0.0, elapsed * (1 - share) / share)


_CURRENT: ContextVar[Watch | None] = ContextVar("tracelake_progress", default=None)


@contextmanager
def watching(folder: Path) -> Iterator[Watch]:
    """Watch the parse run inside the block: a parser that reports (expect, tally) writes to `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():  # an earlier batch's tallies of the same table, in the same run
        old.unlink(missing_ok=True)
    watch = Watch(folder)
    token = _CURRENT.set(watch)
    try:
        yield watch
    finally:
        _CURRENT.reset(token)


def expect(paths: list[str], sizes: list[int] | None = None) -> str | None:
    """Called by a parser on the driver with the files its tasks will read (and their sizes,
    when a store's listing gave them): the tally folder to hand to them (None when no step is
    watching)."""
    watch = _CURRENT.get()
    if watch is None:
        return None
    for i, path in enumerate(paths):
        if sizes is not None:
            watch.sizes[path] = sizes[i]
            continue
        try:
            watch.sizes[path] = os.path.getsize(path)
        except OSError:  # a URL, or gone: counted as a file, without bytes
            watch.sizes[path] = 0
    return str(watch.folder)


def tally(folder: str | None, path: str, rows: int) -> None:
    """Called in a task when it has read `path` into `rows` rows. Never fails the task."""
    tally_files(folder, [(path, rows)])


def tally_files(folder: str | None, done: list[tuple[str, int]]) -> None:
    """tally for several files (path, rows) at once: one append for a group of files."""
    if not folder or not done:
        return
    name = f"{os.getpid()}-{threading.get_ident()}.tally"
    try:
        with open(os.path.join(folder, name), "a", encoding="utf-8") as out:
            out.write("".join(f"{rows}\t{path}\n" for path, rows in done))
    except OSError:
        pass


def tallying(parse: Callable[..., Iterator], folder: str | None) -> Callable[[Iterator], Iterator]:
    """mapInArrow's function: `parse(batches, folder)`, a pass that tallies each file done to
    `folder` (expect's)."""
    def parse_and_tally(batches: Iterator) -> Iterator:
        return parse(batches, folder)
    return parse_and_tally
