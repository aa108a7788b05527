"""Ctrl-C (SIGINT) and SIGTERM, what orchestrators send, end a command with one line at any moment.

Until a command starts its work (interpreter start, imports, argument parsing) there is nothing
to clean up: a signal ends the process at once (`end_at_once`), instead of a traceback from the
middle of an import. Once it works, the first signal unwinds (`unwind_first`: a `Stopped`, which
is a KeyboardInterrupt), so a run removes its staging folder and releases the lake's lock; a
second signal, or the grace running out while the engine holds the thread, ends the process at
once. Only stdlib here: this module is imported before anything else.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

GRACE_S = 5.0  # after the first signal, the longest a run may take to stop
LINES = {
    signal.SIGINT: "tracelake: interrupted; tables keep their last committed versions",
    signal.SIGTERM: "tracelake: terminated; tables keep their last committed versions",
}
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal's number, as shells report


class Stopped(KeyboardInterrupt):
    """A signal's unwinding; `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_of(exc: BaseException) -> int:
    return getattr(exc, "signum", signal.SIGINT)


def exit_now(signum: int = signal.SIGINT, frame: object = None) -> None:
    """Say why, then end the process (os._exit flushes nothing, so the line is flushed first)."""
    print(LINES[signum], file=sys.stderr, flush=True)
    os._exit(CODES[signum])


def _unwind(signum: int, frame: object) -> None:
    timer = threading.Timer(GRACE_S, exit_now, args=(signum,))
    timer.daemon = True
    timer.start()
    for each in LINES:
        signal.signal(each, exit_now)
    raise Stopped(signum)


def _install(handler) -> None:
    if threading.current_thread() is threading.main_thread():  # Python allows no other
        for each in LINES:
            signal.signal(each, handler)


def end_at_once() -> None:
    _install(exit_now)


def unwind_first() -> None:
    _install(_unwind)


def ignore() -> None:
    """For the exit of a finished command: a signal then changes nothing, and the interpreter's
    teardown (which puts back the default handlers, so a signal would kill it without a word)
    leaves an ignored signal ignored."""
    _install(signal.SIG_IGN)
