"""Preparing a batch's bronze tables (the small ones alongside the big one), and committing them.

An hour of Zhejiang traffic is one big input (2,160 port files, 1.5 GB) and four small ones (the
hourly flow, nic, link and port CSVs, about 10 MB together). The big one's parse keeps both cores
busy for 13 s; each small one then took 0.2-0.9 s, most of it the engine's round trips (plans,
small scans, the gate's queries), 1.9 s one after another. Prepared in threads while the big one
runs, they make the hour 0.6 s shorter (a lone generated full hour, whole process, 5 + 5 runs
alternated: wall 0.96x). Nothing is written to a table while preparing, so the threads change no
guarantee: the batch still commits only after every input is prepared, and the first error in
batch order is the one raised, once every thread has ended.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from tracelake.api.contract import TableInput
from tracelake.io.text import file_size

ALONGSIDE_BYTES = 64 << 20  # an input this small (its files together) may be prepared alongside the biggest
ALONGSIDE_THREADS = 4
T = TypeVar("T")
R = TypeVar("R")


def _bytes(item: TableInput) -> int | None:
    try:
        return sum(file_size(f) for f in item.files)
    except OSError:  # a file this process cannot see: its parser names it, one input after another
        return None


def alongside(batch: list[TableInput]) -> int | None:
    """The index of the input to prepare in this thread while the others are prepared in
    threads: the biggest, when every other is small (ALONGSIDE_BYTES); None to prepare them one
    after another (one input, or several big ones, whose parses would only take turns for the
    cores and add up their memory)."""
    if len(batch) < 2:
        return None
    sizes = [_bytes(item) for item in batch]
    if None in sizes:
        return None
    big = max(range(len(batch)), key=sizes.__getitem__)
    return big if all(size <= ALONGSIDE_BYTES for i, size in enumerate(sizes) if i != big) else None


def prepare_batch(batch: list[TableInput], prepare: Callable[[TableInput], T]) -> list[T]:
    """prepare(item) of every input, in batch order (see the module docstring)."""
    big = alongside(batch)
    if big is None:
        return [prepare(item) for item in batch]
    failed: BaseException | None = None
    with ThreadPoolExecutor(max_workers=ALONGSIDE_THREADS, thread_name_prefix="tracelake-prepare") as pool:
        futures: dict[int, Future] = {i: pool.submit(prepare, item) for i, item in enumerate(batch) if i != big}
        try:
            main = prepare(batch[big])
        except BaseException as exc:  # noqa: BLE001 - raised below, in batch order, once the threads end
            failed = exc
            for i, future in futures.items():
                if i > big or not isinstance(exc, Exception):
                    future.cancel()
    if failed is not None and not isinstance(failed, Exception):  # Ctrl-C: at once
        raise failed
    results = []
    for i in range(len(batch)):
        if i == big and failed is not None:
            raise failed
        results.append(main if i == big else futures[i].result())
    return results


# a batch's tables committed at once: each commit is mostly round trips to the engine and the
# Delta log (0.1-0.35 s each, five for a Zhejiang hour), not work that needs the cores
COMMIT_THREADS = 4


def commit_batch(prepared: list[T], commit: Callable[[T], R], threads: int = COMMIT_THREADS) -> list[R]:
    """commit(table) of every prepared table of a batch, each in a thread of its own (they write
    different tables), the results in batch order. Every commit started runs to its end; the
    first error in batch order is then raised. With threads=1, one after another in batch
    order, as before."""
    if threads <= 1 or len(prepared) < 2:
        return [commit(item) for item in prepared]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tracelake-commit") as pool:
        futures = [pool.submit(commit, item) for item in prepared]
    return [future.result() for future in futures]  # read once the pool's exit has waited for all
