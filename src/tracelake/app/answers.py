"""`tracelake serve` answers `tracelake query` itself, so the client imports neither pyspark nor
pandas: a question is one JSON line over a Unix socket beside the engine's (a 0700 folder, peers
of another uid refused), and the answer is the printed text, in JSON lines of a megabyte as it
comes, then the exit code and the stderr line.

The serve process holds one session on its engine; questions are answered one at a time, through
the same guard, schema answers and printer as a query with an engine of its own (statements.py,
results.py), so the two print the same bytes. A client that finds no answer socket, or one that
does not answer, takes the usual way (its own session on the served engine, or its own engine).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import socket
import struct
import threading
from pathlib import Path

ANSWERS_NAME = "answers.sock"
MAX_QUESTION = 1 << 20  # a statement of a megabyte is no question a person types
QUESTION_TIMEOUT_S = 10.0


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[2]


def _read_line(conn: socket.socket) -> bytes:
    chunks, size = [], 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk or size > MAX_QUESTION:
            break
    return b"".join(chunks).split(b"\n", 1)[0]


CHUNK = 1 << 20  # printed text sent to the client a megabyte at a time


class _Sender(io.TextIOBase):
    """The printed text as JSON lines {"out": …} of about CHUNK characters each: an export never
    sits whole in the serve or the client."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.parts, self.size = conn, [], 0

    def write(self, text: str) -> int:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= CHUNK:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.parts:
            self.conn.sendall(json.dumps({"out": "".join(self.parts)}).encode() + b"\n")
            self.parts, self.size = [], 0


def answer_question(engine, config, question: dict, out) -> dict:
    """{"rc", "err"} for one `query`, its printed text written to `out` as it comes: what the
    command would print and exit with."""
    from tracelake.app.cli import _one_line
    from tracelake.app.results import TABLE_ROWS, write_result
    from tracelake.app.statements import answer
    from tracelake.delta.catalog import register_all
    from tracelake.errors import TracelakeError

    fmt = question.get("format") or "csv"
    limit = question.get("limit")
    limit = (limit or None) if limit is not None else (TABLE_ROWS if fmt == "table" else None)
    err = io.StringIO()
    try:
        register_all(engine.spark, config)
        write_result(answer(engine, config, str(question["sql"]), limit, stream=True), fmt, out,
                     question.get("width"), err)
        return {"rc": 0, "err": err.getvalue()}
    except TracelakeError as exc:
        return {"rc": exc.exit_code, "err": f"tracelake: error: {_one_line(exc)}\n"}
    except OSError:
        raise  # the client went away: nothing to answer
    except Exception as exc:  # noqa: BLE001 - the command's one line, as main() prints it
        return {"rc": 1, "err": f"tracelake: error: {_one_line(exc)}\n"}


class AnswerServer:
    """The answer socket of a `serve`: a thread accepting one question per connection."""

    def __init__(self, engine, config, folder: Path) -> None:
        self.engine, self.config = engine, config
        self.path = folder / ANSWERS_NAME
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self.listener.listen(8)
        self.lock = threading.Lock()  # one session: one question at a time
        self.thread = threading.Thread(target=self._accept, name="tracelake-answers", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        me = os.geteuid()
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: serve is ending
                return
            with conn:
                conn.settimeout(QUESTION_TIMEOUT_S)  # the question arrives at once; then the answer takes its time
                try:
                    if _peer_uid(conn) != me:  # the folder's mode keeps others out; this is the second lock
                        continue
                    question = json.loads(_read_line(conn) or b"{}")
                    conn.settimeout(None)
                    sender = _Sender(conn)
                    with self.lock:
                        reply = answer_question(self.engine, self.config, question, sender)
                    sender.flush()
                    conn.sendall(json.dumps(reply).encode() + b"\n")
                except (OSError, ValueError, KeyError):  # a client gone, or not a question: nothing to answer
                    continue

    def close(self) -> None:
        """Stop answering and end the session while the engine still runs: a session released
        after its engine stopped waits for an answer that never comes."""
        self.listener.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
        atexit.unregister(self.engine.stop)
        self.engine.stop()
