"""The local profile's engine, reachable by the user who runs tracelake and no one else.

Sail's Spark Connect server takes only an address and a port, and any local user can connect to
a port on 127.0.0.1 and read, write or drop what the server can. So the server runs in a child
process with a network namespace of its own (a user namespace too, when we are not root): its
127.0.0.1 is not the machine's, and no other process can reach its port. The child relays a
Unix socket, made in a folder only we may enter (0700), to that port, and accepts a connection
only from a process of our own user (SO_PEERCRED). The client speaks gRPC to the socket.

The child ends when its parent does: it reads its stdin, a pipe only the parent holds, and exits
at its end (a parent killed with -9 included). It ignores Ctrl-C: the parent handles it.

Its network has no way out. A lake on object storage needs one, so `start(egress=True)` gives the
engine an HTTP proxy: inside the child, 127.0.0.1:<port> (HTTP_PROXY/HTTPS_PROXY, which Sail's
object-store client honours) is relayed to a second Unix socket in the same 0700 folder, where
the parent, in the machine's network, connects to the host the engine names (CONNECT for https,
an absolute URL for plain http) and relays the bytes. Ingress stays as it was: no other user
can reach the engine.

`python -m tracelake.private_engine SOCKET [EGRESS_SOCKET]` is the child; `start()` starts one,
`session()` connects
(also to the socket of a child that `tracelake serve` started: `reachable()` says whether one answers).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
READY = "ready"
SOCKET_NAME = "engine.sock"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 5.0
RELAY_CHUNK = 1 << 18
# Sail removes a session after 900 s without a request (spark.session_timeout_secs), and with it
# the session's temporary views and settings: a shell, a notebook or a long test run left idle
# for a quarter of an hour then met "table not found". The child serves only its parent, so the
# session lives as long as the parent does (a year: under the limit of the timers Sail uses).
SESSION_TIMEOUT_KEY = "SAIL_SPARK__SESSION_TIMEOUT_SECS"
SESSION_TIMEOUT_S = 365 * 24 * 3600


class Unavailable(Exception):
    """The child could not make its private network (no user namespaces here, for one)."""


# ---------------------------------------------------------------- the child


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _own_network() -> None:
    """Move this (single-threaded) process into a new network namespace, inside a new user
    namespace that maps our ids to themselves when we are not root; bring its loopback up."""
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    flags = CLONE_NEWNET if uid == 0 else CLONE_NEWUSER | CLONE_NEWNET
    if libc.unshare(flags) != 0:
        raise Unavailable(f"cannot make a private network namespace: {os.strerror(ctypes.get_errno())}")
    if uid != 0:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags_now = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags_now | IFF_UP))


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(RELAY_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _relay(client: socket.socket, port: int) -> None:
    with client, socket.create_connection(("127.0.0.1", port)) as server:
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        back = threading.Thread(target=_pump, args=(server, client), daemon=True)
        back.start()
        _pump(client, server)
        back.join()


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _serve(path: str, port: int) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(16)
    print(READY, flush=True)
    me = os.geteuid()
    while True:
        conn, _ = listener.accept()
        if _peer_uid(conn) != me:  # the folder's mode keeps others out; this is the second lock
            conn.close()
            continue
        threading.Thread(target=_relay, args=(conn, port), daemon=True).start()


def _exit_with_parent(path: str) -> None:
    """Block on stdin until the parent closes it or dies; then remove the socket and its
    folder, and end (Sail's threads with us)."""
    while sys.stdin.buffer.read(4096):
        pass
    folder = os.path.dirname(path)
    for remove, target in ((os.unlink, path), (os.unlink, os.path.join(folder, EGRESS_NAME)), (os.rmdir, folder)):
        try:
            remove(target)
        except OSError:
            pass
    os._exit(0)


def _egress_into(listener: socket.socket, egress_path: str) -> None:
    """Inside the child: each connection to the proxy port relayed to the parent's egress socket."""
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_relay_to_unix, args=(conn, egress_path), daemon=True).start()


def _relay_to_unix(client: socket.socket, path: str) -> None:
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as parent:
        try:
            parent.connect(path)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(parent, client), daemon=True)
        back.start()
        _pump(client, parent)
        back.join()


def _open_egress(egress_path: str) -> None:
    """Listen for the engine's proxy connections on the child's own loopback; point the engine's
    HTTP clients at it (before the engine starts, which reads the variables)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ[name] = proxy
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        os.environ.pop(name, None)
    threading.Thread(target=_egress_into, args=(listener, egress_path), daemon=True).start()


def child_main(path: str, egress_path: str | None = None) -> None:
    """Serve, or say in one line on stdout why not (never a traceback: the parent may be gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _own_network()
        if egress_path:
            _open_egress(egress_path)
        import pyspark  # noqa: F401 - Sail imports it with the first session: 0.2 s the client would wait for
        from pysail.spark import SparkConnectServer

        server = SparkConnectServer(ip="127.0.0.1", port=0)
        server.start(background=True)
        threading.Thread(target=_exit_with_parent, args=(path,), daemon=True).start()
        _serve(path, server.listening_address[1])
    except Exception as exc:  # noqa: BLE001 - the reason goes to the parent
        try:
            print(f"unavailable: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}", flush=True)
        finally:
            os._exit(3)


# ---------------------------------------------------------------- the parent


EGRESS_NAME = "egress.sock"
EGRESS_HEAD_LIMIT = 1 << 16
EGRESS_CONNECT_TIMEOUT_S = 10.0


def _target(first_line: str) -> tuple[str, int, bool] | None:
    """(host, port, is CONNECT) of a proxy request line, None when it is not one."""
    parts = first_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    method, target = parts[0], parts[1]
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return (host.strip("[]"), int(port), True) if host and port.isdigit() else None
    if not target.startswith("http://"):
        return None
    authority = target[len("http://"):].split("/", 1)[0]
    host, sep, port = authority.rpartition(":")
    if not sep or not port.isdigit() or "]" in port:
        host, port = authority, "80"
    return host.strip("[]"), int(port), False


def _proxy(conn: socket.socket) -> None:
    """One proxy connection of the engine: the request head read, the host it names reached from
    this process's network, the bytes relayed both ways (a plain-http connection stays with the
    host of its first request: the engine's object-store client keeps one endpoint)."""
    with conn:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < EGRESS_HEAD_LIMIT:
            chunk = conn.recv(RELAY_CHUNK)
            if not chunk:
                return
            head += chunk
        try:
            target = _target(head.split(b"\r\n", 1)[0].decode("latin-1"))
        except ValueError:
            target = None
        if target is None:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        host, port, tunnel = target
        try:
            upstream = socket.create_connection((host, port), timeout=EGRESS_CONNECT_TIMEOUT_S)
        except OSError:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            return
        with upstream:
            upstream.settimeout(None)
            if tunnel:
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
            else:
                rest = head
            if rest:
                upstream.sendall(rest)
            back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
            back.start()
            _pump(conn, upstream)
            back.join()


def _serve_egress(listener: socket.socket) -> None:
    me = os.geteuid()
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # closed: the engine stopped
            return
        if _peer_uid(conn) != me:
            conn.close()
            continue
        threading.Thread(target=_proxy, args=(conn,), daemon=True).start()


def _egress_listener(folder: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(folder / EGRESS_NAME))
    finally:
        os.umask(old)
    listener.listen(64)
    threading.Thread(target=_serve_egress, args=(listener,), daemon=True).start()
    return listener


class PrivateServer:
    """A running child: its socket path and the pipe whose end stops it (and the parent's end of
    its way out, when it has one)."""

    def __init__(self, process: subprocess.Popen, socket_path: Path, egress: socket.socket | None = None) -> None:
        self.process, self.socket_path, self.egress = process, socket_path, egress
        self.stopping = False

    def lost(self) -> str | None:
        """How the child ended when it ended without stop() (the kernel's out-of-memory killer,
        a crash); None while it serves or once stopped. Only a child this process started."""
        if self.process is None or self.stopping or self.process.poll() is None:
            return None
        code = self.process.returncode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            why = " (the kernel's out-of-memory killer sends it: see `dmesg`)" if -code == signal.SIGKILL else ""
            return f"the local engine (pid {self.process.pid}) was killed by {name}{why}"
        return f"the local engine (pid {self.process.pid}) ended with exit code {code}"

    def stop(self) -> None:
        self.stopping = True
        if self.egress is not None:
            self.egress.close()
            self.egress = None
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.socket_path.parent, ignore_errors=True)


def _socket_folder() -> Path:
    """A new folder only we may enter (mkdtemp makes it 0700), short enough for a socket path
    (108 bytes at most)."""
    folder = Path(tempfile.mkdtemp(prefix="tracelake-engine-"))
    if len(str(folder / SOCKET_NAME)) < 100:
        return folder
    folder.rmdir()
    return Path(tempfile.mkdtemp(prefix="tracelake-engine-", dir="/tmp"))


def start(egress: bool = False) -> PrivateServer:
    """Start the child and wait until it serves (importing the client meanwhile: each takes
    about 0.3 s); Unavailable with the child's reason when it cannot make its private network.
    With `egress`, the engine reaches other hosts through this process (an object store)."""
    folder = _socket_folder()
    egress_listener = _egress_listener(folder) if egress else None
    package_root = str(Path(__file__).resolve().parents[1])  # where `tracelake` was imported from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
           SESSION_TIMEOUT_KEY: str(SESSION_TIMEOUT_S)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tracelake.private_engine", str(folder / SOCKET_NAME),
         *([str(folder / EGRESS_NAME)] if egress else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, text=True, env=env,
    )
    server = PrivateServer(process, folder / SOCKET_NAME, egress_listener)
    STARTED.append(server)
    try:
        import pyspark.sql.connect.session  # noqa: F401

        answered, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        line = process.stdout.readline().strip() if answered else f"unavailable: no answer in {START_TIMEOUT_S:.0f} s"
    except BaseException:  # Ctrl-C while it starts: it goes too
        server.stop()
        raise
    if line != READY:
        server.stop()
        reason = line.removeprefix("unavailable: ")
        raise Unavailable(reason or f"the engine process ended (rc {process.returncode})")
    return server


STARTED: list[PrivateServer] = []  # the children this process started (lost_engine)


def lost_engine() -> str | None:
    """How a child this process started ended under it, if one did (PrivateServer.lost)."""
    return next((why for server in STARTED if (why := server.lost())), None)


def reachable(socket_path: Path) -> bool:
    """Whether a private engine answers on this socket: it is a socket, in a folder of our own
    that no one else may enter, and a connection is accepted (the child relays it and closes
    it when we do)."""
    try:
        folder = os.lstat(socket_path.parent)
        if folder.st_uid != os.geteuid() or folder.st_mode & 0o077 or not stat.S_ISDIR(folder.st_mode):
            return False
        if not stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2.0)
            probe.connect(str(socket_path))
        return True
    except OSError:
        return False


def session(server: PrivateServer | Path):
    """A Spark Connect session over the child's socket (of a server this process started, or
    the socket path of one `tracelake serve` runs)."""
    path = server.socket_path if isinstance(server, PrivateServer) else Path(server)
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession

    class UnixSocketChannel(DefaultChannelBuilder):
        """gRPC to a Unix socket; the authority is a plain name, as the server's HTTP/2 layer
        refuses the socket path there."""

        def __init__(self, path: Path) -> None:
            super().__init__("sc://localhost", channelOptions=[("grpc.default_authority", "localhost")])
            self._path = path

        def toChannel(self):
            return self._insecure_channel(f"unix:{self._path}")

    # what SparkSession.builder.remote() sets: pyspark.sql.functions then builds Connect columns
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    spark = SparkSession.builder.channelBuilder(UnixSocketChannel(path)).create()
    if isinstance(server, PrivateServer) and server.process is not None:
        spark.client.set_retry_policies([_while_serving(server)])
    return spark


def _while_serving(server: PrivateServer):
    """The client's default retries (at least 10 minutes of them, for a remote server's
    hiccups), but none once our own child has ended: a run whose engine the kernel killed
    stops at once with the reason (lost_engine) instead of waiting those 10 minutes."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class WhileServing(DefaultPolicy):
        def can_retry(self, e: BaseException) -> bool:
            return server.process.poll() is None and super().can_retry(e)

    return WhileServing()


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
