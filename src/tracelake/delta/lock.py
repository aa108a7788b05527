"""One writer per lake: runs that write take an exclusive lock on the lake folder.

Two ingests of one source into one lake raced their MERGEs and left every key twice, forever
after (a MERGE never removes duplicates already in a table). Writers of a local lake therefore
queue on an OS file lock (`<lake>/_locks/write.lock`, released by the kernel even when a run is
killed). The lock covers the whole lake because derived tables (silver.jobs, …) are written by
every source's ingest; `maintain --optimize/--vacuum` takes it too (its commits would otherwise
win a race against an ingest's, stopping the ingest between its bronze and silver commits, and a
vacuum could remove files an ingest has staged). Object-store lakes (s3://, abfss://) have no such lock: there, concurrent
writers rely on Delta's commit conflicts, and the loser fails with a message that says to retry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tracelake.config import Config
from tracelake.errors import TracelakeError

LOCK_WAIT_S = 6 * 3600.0  # a queued scheduler run waits for the one before it, up to this long


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "another run"
    except OSError:
        return "another run"


@contextlib.contextmanager
def lake_write_lock(
    config: Config, wait_s: float = LOCK_WAIT_S, on_wait: Callable[[str], None] | None = None,
    poll_s: float = 0.2,
) -> Iterator[None]:
    """Hold the lake's write lock for the block; waits (telling `on_wait` once) while another
    run holds it, and fails with a clear line after `wait_s`."""
    if "://" in config.lake_root:
        yield
        return
    locks = Path(config.lake_root) / "_locks"
    try:
        locks.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TracelakeError(f"lake {config.lake_root} is not writable: {exc.strerror}") from None
    path = locks / "write.lock"
    with open(path, "a+") as handle:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                if time.monotonic() >= deadline:
                    raise TracelakeError(
                        f"another run (ingest or maintain) is writing the lake at {config.lake_root} ({holder}); retry later"
                    ) from None
                if on_wait and not told:
                    on_wait(f"waiting for another run (ingest or maintain) writing this lake ({holder})")
                    told = True
                time.sleep(poll_s)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
