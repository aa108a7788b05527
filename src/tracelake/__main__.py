"""`python -m tracelake` and the `tracelake` command: the command line, with Ctrl-C and SIGTERM
answered by one line from the first moment (before the command line's imports)."""

import sys


def run() -> None:
    from tracelake.app import signals

    signals.end_at_once()
    if sys.argv[1:2] == ["query"]:  # the serve of the lake may answer it, with no engine library loaded here
        from tracelake.app.quick import served_query

        code = served_query(sys.argv[1:])
        if code is not None:
            leave(code)
    from tracelake.app.cli import main

    code = main()
    signals.ignore()
    leave(code)


def leave(code: int) -> None:
    """Exit with `code` once the exit handlers have run (the engine's stop, logging's flush) and
    the standard streams are flushed, without the interpreter's teardown of every module and
    object it holds: on a full hour's ingest that teardown took 0.18 s after the command's last
    step, against 0.02 s. A thread still running (none is, after a command) gets the usual exit."""
    import atexit
    import os
    import threading

    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a stream closed: nothing left to say
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
