"""One writer per lake: runs that write take an exclusive lock on the lake folder.

Two ingests of one source into one lake raced their MERGEs and left every key twice, forever
after (a MERGE never removes duplicates already in a table). Writers of a local lake therefore
queue on an OS file lock (`<lake>/_locks/write.lock`, released by the kernel even when a run is
killed). The lock covers the whole lake because derived tables (silver.jobs, …) are written by
every source's ingest; `maintain --optimize/--vacuum` takes it too (its commits would otherwise
win a race against an ingest's, stopping the ingest between its bronze and silver commits, and a
vacuum could remove files an ingest has staged).

An object store has no file locks and S3 no atomic rename. There the lock is an object,
`<lake>/_locks/write.lock`, created with a conditional write (If-None-Match: the store refuses to
create an object that exists): a second writer finds it there and stops at once with a line
naming the run that holds it (host, pid, start), instead of racing the first one's MERGEs. The
holder deletes it when its run ends, failed or not. A run killed with -9 leaves it: the next run
on the same machine sees that its holder no longer runs and takes it over with a second
conditional write (If-Match on the ETag it read, so of two such runs one wins); one left by a
machine that is gone must be deleted by hand, as the message says. A store without conditional writes is
refused. (The engine's own commits are conditional too: Sail and deltalake write each
`_delta_log` version only where none exists.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io import objectstore

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
        with _object_lock(config.lake_root):
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


def _machine() -> str:
    """This kernel boot and PID namespace: where a holder's pid can be checked."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pids = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{pids}"


HOLDER = re.compile(r"pid (\d+) on (\S+) since (\S+) \[(.*)\]")


def _gone(held: str) -> bool:
    """Whether the holder named in a lock object was a process of this machine (same boot, same
    PID namespace) that no longer runs: a run killed with -9 here."""
    found = HOLDER.fullmatch(held)
    if not found or not found.group(4) or found.group(4) != _machine():
        return False
    try:
        os.kill(int(found.group(1)), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


@contextlib.contextmanager
def _object_lock(lake_root: str) -> Iterator[None]:
    """The lake's lock object, created only when none exists (If-None-Match); removed when the
    block ends. One left by a run killed on this machine is taken over, conditionally
    (If-Match on the ETag read), so of two runs finding it only one gets it."""
    url = f"{lake_root.rstrip('/')}/_locks/write.lock"
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    holder = f"pid {os.getpid()} on {socket.gethostname()} since {since} [{_machine()}]".encode()
    if not objectstore.create_exclusive(url, holder):
        found = objectstore.read_versioned(url)
        held = (found[0] if found else b"").decode(errors="replace").strip()
        taken = False
        if found is None:  # released between the two calls
            taken = objectstore.create_exclusive(url, holder)
        elif _gone(held) and found[1]:
            taken = objectstore.replace_if_unchanged(url, found[1], holder)
            if taken:
                print(f"tracelake: took over the lake's lock from a run that no longer runs ({held.split(' [')[0]})",
                      file=sys.stderr)
        if not taken:
            raise TracelakeError(
                f"another run (ingest or maintain) is writing the lake at {lake_root} "
                f"({held.split(' [')[0] or 'another run'}); retry when it ends "
                f"(a run that was killed on another machine leaves {url} behind: delete it once no run is writing)"
            )
    try:
        yield
    finally:
        objectstore.delete_object(url)
