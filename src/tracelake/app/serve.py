"""`tracelake serve`: one engine kept running for a lake, so later commands skip its start.

`serve` starts the local profile's private engine (`engine.serve_private`: a child process only
our user can reach, through a Unix socket in a 0700 folder) and writes how to reach it into the
lake: `<lake>/_serve/engine.json`, the file 0600 in a 0700 folder. A later command on the same
lake (`served_socket`) uses that engine when the record is ours, names this lake, its process
lives and its socket answers; a record that fails any of these is stale: it is removed (when
ours) and the command starts its own engine. Ctrl-C or SIGTERM stops `serve`, which removes the
record first; a `serve` killed with -9 leaves a record the next command finds stale.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tracelake.config import Config
from tracelake.errors import TracelakeError

FOLDER = "_serve"
RECORD = "engine.json"
POLL_S = 0.5


def record_path(config: Config) -> Path:
    return Path(config.lake_root) / FOLDER / RECORD


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: not ours to use
        return False
    return True


def _owned_private(path: Path, kind: int) -> bool:
    """Ours, of this kind (no link), and closed to group and others."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return info.st_uid == os.geteuid() and stat.S_IFMT(info.st_mode) == kind and not info.st_mode & 0o077


def _read(config: Config) -> dict | None:
    """The record when it is there and ours, else None (one that is not ours is left alone)."""
    path = record_path(config)
    if not (_owned_private(path.parent, stat.S_IFDIR) and _owned_private(path, stat.S_IFREG)):
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _remove(config: Config) -> None:
    path = record_path(config)
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass


def served_socket(config: Config, tell: Callable[[str], None]) -> str | None:
    """The socket of the engine `tracelake serve` runs for this lake, or None (then the command
    starts its own). A stale record is removed, and said so in one line."""
    if config.profile != "local" or config.local_engine != "private" or "://" in config.lake_root:
        return None
    record = _read(config)
    if record is None:
        return None
    from tracelake import private_engine

    pid, socket_path = record.get("pid"), record.get("socket")
    if (isinstance(pid, int) and isinstance(socket_path, str) and record.get("lake") == config.lake_root
            and _alive(pid) and private_engine.reachable(Path(socket_path))):
        tell(f"using the engine `tracelake serve` runs for this lake (pid {pid})")
        return socket_path
    _remove(config)
    tell(f"the engine recorded in {record_path(config)} is gone: record removed; starting one")
    return None


def served_pid(config: Config) -> int | None:
    pid = (_read(config) or {}).get("pid")
    return pid if isinstance(pid, int) else None


def stopped_line(pid: int, user: str, again: str) -> str:
    """What a client says when the serve it used ends (`user`: "this command", …)."""
    return f"the served engine (pid {pid}) stopped while {user} used it; {again} (it starts an engine of its own)"


def watch(pid: int, socket_path: str, leave: Callable[[int], None]) -> threading.Thread:
    """Call `leave` with the serve's pid once it ends (its process gone, or its socket): a
    command attached to it otherwise waited on the client's retries until something killed it
    (measured: a query whose serve got SIGTERM was still waiting a minute later)."""
    def run() -> None:
        while _alive(pid) and os.path.exists(socket_path):
            time.sleep(POLL_S)
        leave(pid)
    thread = threading.Thread(target=run, name="serve-watch", daemon=True)
    thread.start()
    return thread


def _write(config: Config, socket_path: Path, answers: Path | None = None) -> None:
    """The record, 0600 in a 0700 folder, written whole or not at all."""
    path = record_path(config)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _owned_private(path.parent, stat.S_IFDIR):
        raise TracelakeError(f"{path.parent} is not a folder only this user may enter (mode 0700); remove it")
    text = json.dumps({"pid": os.getpid(), "socket": str(socket_path), "lake": config.lake_root,
                       "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       **({"answers": str(answers)} if answers else {})})
    temp = path.with_name(f".{RECORD}.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(temp, path)


def serve(config: Config, tell: Callable[[str], None]) -> int:
    """Run the engine for the lake until Ctrl-C or SIGTERM (or until the engine itself ends:
    exit 1); the record is removed on the way out."""
    from tracelake.engine import serve_private

    if "://" in config.lake_root:
        raise TracelakeError("serve keeps an engine for a local lake folder; an object-store lake has no folder to record it in")
    if served_socket(config, lambda _line: None):
        record = _read(config) or {}
        raise TracelakeError(f"{config.lake_root} is already served (pid {record.get('pid')}); stop that one first")
    from tracelake.app.answers import AnswerServer
    from tracelake.engine import attach_served

    server = serve_private(config)
    answers = None
    try:
        # `tracelake query` asks this process, which answers on a session of its own (app/answers.py)
        answers = AnswerServer(attach_served(config, str(server.socket_path)), config, server.socket_path.parent)
        _write(config, server.socket_path, answers.path)
        tell(f"serving the lake {config.lake_root} (pid {os.getpid()}); "
             "commands on this lake use this engine; Ctrl-C or SIGTERM stops it")
        while server.process.poll() is None:
            time.sleep(POLL_S)
        tell(f"the engine ended (rc {server.process.returncode}); the record is removed")
        return 1
    except KeyboardInterrupt:
        tell(f"stopped serving {config.lake_root}")
        return 0
    finally:
        _remove(config)
        if answers is not None:
            answers.close()
        server.stop()
