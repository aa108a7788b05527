"""`python -m tracelake` and the `tracelake` command: the command line, with Ctrl-C and SIGTERM
answered by one line from the first moment (before the command line's imports)."""

import sys


def run() -> None:
    from tracelake.app import signals

    signals.end_at_once()
    from tracelake.app.cli import main

    code = main()
    signals.ignore()
    sys.exit(code)


if __name__ == "__main__":
    run()
