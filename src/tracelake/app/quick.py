"""`tracelake query` asked of the `tracelake serve` that runs for the lake, before the command
line loads the engine's libraries: the serve answers (app/answers.py) and this process only
prints. Only the plain form takes this way: `query SQL` with `--lake`, `--format`, `--limit`;
any other flag, no serve, or a serve without an answer socket, and main() runs as usual.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import sys
from pathlib import Path

FLAGS = ("--lake", "--format", "--limit")
FORMATS = ("csv", "json", "table")


def _parsed(argv: list[str]) -> dict | None:
    """{"sql", "--lake", "--format", "--limit"} of a plain `query`, or None for any other form."""
    if not argv or argv[0] != "query":
        return None
    found: dict = {}
    rest = argv[1:]
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name in FLAGS:
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            if name in found:
                return None
            found[name] = value
        elif word.startswith("-") or "sql" in found:
            return None
        else:
            found["sql"] = word
    if "sql" not in found or found.get("--format", "csv") not in FORMATS:
        return None
    if "--limit" in found and not found["--limit"].isdigit():
        return None
    return found


def _private_socket(path: Path) -> bool:
    try:
        folder, sock = os.lstat(path.parent), os.lstat(path)
    except OSError:
        return False
    return (folder.st_uid == os.geteuid() and not folder.st_mode & 0o077 and stat.S_ISDIR(folder.st_mode)
            and stat.S_ISSOCK(sock.st_mode) and sock.st_uid == os.geteuid())


def _ask(path: Path, question: dict, pid: int) -> int | None:
    """The serve's answer, its printed text written as it comes; the exit code, or None when
    the serve does not take the question (then main() goes on)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5.0)
        try:
            conn.connect(str(path))
            conn.sendall(json.dumps(question).encode() + b"\n")
        except OSError:
            return None
        conn.settimeout(None)  # a question takes the time it takes
        print(f"tracelake: using the engine `tracelake serve` runs for this lake (pid {pid})", file=sys.stderr)
        with conn.makefile("rb") as replies:
            for line in replies:
                if not line.endswith(b"\n"):
                    break
                reply = json.loads(line)
                if "out" in reply:
                    sys.stdout.write(str(reply["out"]))
                    continue
                sys.stderr.write(str(reply.get("err", "")))
                return int(reply.get("rc", 1))
    sys.stderr.write(f"tracelake: error: the served engine (pid {pid}) ended before it answered; "
                     "run the command again (it starts an engine of its own)\n")
    return 2


def served_query(argv: list[str]) -> int | None:
    """The exit code of a query the serve answered; None when this way does not apply."""
    found = _parsed(argv)
    if found is None:
        return None
    from tracelake.app.serve import _alive, _read
    from tracelake.config import load_config
    from tracelake.errors import TracelakeError

    try:
        config = load_config(overrides={"lake_root": found.get("--lake")})
    except TracelakeError:
        return None  # main() says what is wrong
    if config.profile != "local" or config.local_engine != "private" or "://" in config.lake_root:
        return None
    record = _read(config) or {}
    pid, answers = record.get("pid"), record.get("answers")
    if not (isinstance(pid, int) and isinstance(answers, str) and record.get("lake") == config.lake_root
            and _alive(pid) and _private_socket(Path(answers))):
        return None
    fmt = found.get("--format") or ("table" if sys.stdout.isatty() else "csv")
    limit = int(found["--limit"]) if "--limit" in found else None
    return _ask(Path(answers), {"sql": found["sql"], "format": fmt, "limit": limit,
                                "width": shutil.get_terminal_size((120, 24)).columns}, pid)
