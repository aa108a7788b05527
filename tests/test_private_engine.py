"""Only the user who runs tracelake can reach its local engine: a second OS user, made for the
test, tries the engine's socket and every TCP port the engine listens on, as a Spark Connect
client and as a bare connection, and fails; our session works. The same probe reaches an engine
started with `local_engine: tcp`, so a probe that cannot connect to anything would not pass."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import make_config

from tracelake import private_engine
from tracelake.engine import start_engine

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a second OS user needs root")

# Imports as root (our interpreter lives where the other user may not look), then becomes the
# other user and tries every target: a bare connection, then a Spark Connect query without retries.
PROBE = r"""
import encodings.idna, os, pwd, socket, sys  # idna: imported before we may no longer read it
from pathlib import Path
from pyspark.sql.connect.client.retries import DefaultPolicy
from pyspark.sql.connect.session import SparkSession
from tracelake import private_engine

user = pwd.getpwnam(sys.argv[1])
os.setgroups([]); os.setgid(user.pw_gid); os.setuid(user.pw_uid)
for target in sys.argv[2:]:
    unix = not target.startswith("sc://")
    try:
        if unix:
            s = socket.socket(socket.AF_UNIX); s.connect(target)
        else:
            host, port = target[5:].split(":"); s = socket.create_connection((host, int(port)), timeout=5)
        s.close()
        bare = "connected"
    except OSError as exc:
        bare = type(exc).__name__
    try:
        if unix:
            spark = private_engine.session(private_engine.PrivateServer(None, Path(target)))
        else:
            spark = SparkSession.builder.remote(target).create()
        spark._client.set_retry_policies([DefaultPolicy(max_retries=0)])
        query = f"reached: {spark.sql('SELECT 42').collect()[0][0]}"
    except Exception as exc:
        query = f"refused: {type(exc).__name__}"
    print(target, bare, query, flush=True)
"""


@pytest.fixture
def other_user():
    name = f"tl-other-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=True)


def probe(user: str, *targets: str) -> dict[str, tuple[str, str]]:
    """target -> (bare connection outcome, Spark Connect outcome), as `user`."""
    done = subprocess.run([sys.executable, "-c", PROBE, user, *targets], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "RUST_LOG": "error"})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.split(" ", 2) for line in done.stdout.splitlines()]
    return {target: (bare, query) for target, bare, query in lines}


def listening_tcp_ports(pid: int) -> list[int]:
    """The TCP ports `pid` listens on in our network namespace (its sockets matched in /proc/net)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


@needs_root
def test_another_user_cannot_reach_the_engine(other_user, tmp_path):
    engine = start_engine(make_config(tmp_path / "lake"))
    try:
        server = engine._server
        assert engine.spark.sql("SELECT 42").collect()[0][0] == 42  # ours works
        folder = server.socket_path.parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.geteuid()
        # the engine process listens on no TCP port another user could find with `ss -ltnp`
        assert listening_tcp_ports(server.process.pid) == []
        assert probe(other_user, str(server.socket_path)) == {
            str(server.socket_path): ("PermissionError", "refused: SparkConnectGrpcException")}
        # with the folder opened up, the socket still serves no one else (SO_PEERCRED)
        os.chmod(folder, 0o755)
        os.chmod(server.socket_path, 0o777)
        assert probe(other_user, str(server.socket_path)) == {
            str(server.socket_path): ("connected", "refused: SparkConnectGrpcException")}
        assert engine.spark.sql("SELECT 43").collect()[0][0] == 43  # and ours still works
    finally:
        engine.stop()
    assert not folder.exists()  # the socket and its folder end with the engine


@needs_root
def test_the_probe_reaches_an_engine_on_a_shared_port(other_user, tmp_path):
    config = make_config(tmp_path / "lake")
    engine = start_engine(replace(config, local_engine="tcp"))
    try:
        [port] = listening_tcp_ports(os.getpid())
        url = f"sc://127.0.0.1:{port}"
        assert probe(other_user, url) == {url: ("connected", "reached: 42")}
    finally:
        engine.stop()


def test_without_namespaces_the_engine_does_not_start_and_names_the_choice(monkeypatch, tmp_path):
    from tracelake import private_engine
    from tracelake.errors import TracelakeError

    def unavailable(egress=False):
        raise private_engine.Unavailable("cannot make a private network namespace: Operation not permitted")
    monkeypatch.setattr(private_engine, "start", unavailable)
    with pytest.raises(TracelakeError) as refused:
        start_engine(make_config(tmp_path / "lake"))
    assert str(refused.value) == (
        "cannot keep the local engine private (cannot make a private network namespace: Operation not "
        "permitted); on a machine no one else uses, run it on a 127.0.0.1 port any local user can reach "
        "with --conf local_engine=tcp")


@needs_root
def test_a_lake_on_object_storage_keeps_the_engine_private(other_user, tmp_path, s3_server, s3_env):
    """The engine reaches the bucket through our process (its proxy socket beside the engine's,
    in the same 0700 folder); no one else reaches the engine or its way out."""
    from tracelake.config import load_config

    lake = f"s3://{s3_server.new_bucket()}/lake"
    engine = start_engine(load_config(overrides={"lake_root": lake}))
    try:
        server = engine._server
        engine.spark.range(7).write.format("delta").mode("overwrite").save(f"{lake}/bronze/t")
        assert engine.spark.read.format("delta").load(f"{lake}/bronze/t").count() == 7
        assert listening_tcp_ports(server.process.pid) == []
        egress = server.socket_path.parent / private_engine.EGRESS_NAME
        assert stat.S_IMODE(server.socket_path.parent.stat().st_mode) == 0o700
        assert probe(other_user, str(server.socket_path), str(egress)) == {
            str(server.socket_path): ("PermissionError", "refused: SparkConnectGrpcException"),
            str(egress): ("PermissionError", "refused: SparkConnectGrpcException")}
    finally:
        engine.stop()
    assert not server.socket_path.parent.exists()


def test_the_proxy_reads_the_host_an_engine_request_names():
    assert private_engine._target("CONNECT s3.eu-west-1.amazonaws.com:443 HTTP/1.1") == (
        "s3.eu-west-1.amazonaws.com", 443, True)
    assert private_engine._target("GET http://127.0.0.1:9000/bucket/key?x=1 HTTP/1.1") == ("127.0.0.1", 9000, False)
    assert private_engine._target("PUT http://minio.local/bucket/key HTTP/1.1") == ("minio.local", 80, False)
    assert private_engine._target("CONNECT [::1]:9000 HTTP/1.1") == ("::1", 9000, True)
    for line in ("GET /bucket/key HTTP/1.1", "CONNECT host HTTP/1.1", "hello", "GET https://x/ HTTP/1.1"):
        assert private_engine._target(line) is None


def test_the_engines_session_outlives_sails_idle_limit(monkeypatch):
    """Sail removes a session after 900 s without a request (its temporary views with it): a
    shell, notebook or test run idle that long met `session ... is not running`. The child gets
    Sail's limit in its environment, a year; set to 2 s, the session is gone after 4 s idle,
    which shows the setting is the one Sail obeys."""
    import time

    assert private_engine.SESSION_TIMEOUT_S == 365 * 24 * 3600
    monkeypatch.setattr(private_engine, "SESSION_TIMEOUT_S", 2)
    server = private_engine.start()
    spark = None
    try:
        with open(f"/proc/{server.process.pid}/environ", "rb") as handle:
            child_env = dict(e.split(b"=", 1) for e in handle.read().split(b"\0") if b"=" in e)
        assert child_env[private_engine.SESSION_TIMEOUT_KEY.encode()] == b"2"
        spark = private_engine.session(server)
        spark.range(3).createOrReplaceTempView("kept")
        assert spark.sql("SELECT count(*) FROM kept").collect()[0][0] == 3
        time.sleep(4)
        with pytest.raises(Exception, match="is not running"):
            spark.sql("SELECT count(*) FROM kept").collect()
    finally:
        # the client closed while its engine still answers: closed later (by the garbage
        # collector, the engine gone) it once waited forever on a release of the failed query
        if spark is not None:
            spark.stop()
        server.stop()


def test_an_engine_killed_under_a_run_ends_its_queries_at_once_with_the_reason():
    """The client retries a lost server for at least 10 minutes (for a remote server's hiccups):
    a run whose engine the kernel's out-of-memory killer ended waited that long, then printed a
    gRPC error. Our own child gone, the next query fails at once and lost_engine says why."""
    import signal
    import time

    server = private_engine.start()
    spark = None
    try:
        spark = private_engine.session(server)
        assert spark.range(3).count() == 3
        assert private_engine.lost_engine() is None
        os.kill(server.process.pid, signal.SIGKILL)  # the child this test started
        server.process.wait()
        began = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017 - gRPC's error; what the user sees is lost_engine's
            spark.range(3).count()
        waited = time.monotonic() - began
        assert private_engine.lost_engine() == (
            f"the local engine (pid {server.process.pid}) was killed by SIGKILL "
            "(the kernel's out-of-memory killer sends it: see `dmesg`)")
        print(f"the query failed after {waited:.1f} s")  # no timed assert: the 10 minutes would hang the run
    finally:
        server.stop()
    assert private_engine.lost_engine() is None  # stopped by us: not lost
