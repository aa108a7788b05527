"""The object-store plumbing on an S3 server (moto, tests/objectstore/s3kit.py) without an engine:
listing a lake's tables through the store, the lake's lock object, raw downloads, and the errors
a user sees (a missing bucket, refused credentials, an endpoint that does not answer)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from s3kit import WRONG_SECRET, free_port, server_refusing_keys

from tracelake.config import load_config
from tracelake.delta.catalog import list_lake_tables
from tracelake.delta.lock import _machine, lake_write_lock
from tracelake.errors import TracelakeError
from tracelake.io import objectstore


def test_tables_are_listed_through_the_store(s3_server, s3_env, tmp_path, capsys):
    bucket = s3_server.new_bucket()
    lake = f"s3://{bucket}/lake"
    write_deltalake(f"{lake}/bronze/itp_jobs", pa.table({"job_id": ["a"]}))
    write_deltalake(f"{lake}/gold/jobs_gpu_count_cdf", pa.table({"n": [1]}))
    s3_server.client().put_object(Bucket=bucket, Key="lake/silver/jobs/_delta_log/_last_checkpoint.tmp", Body=b"")
    s3_server.client().put_object(Bucket=bucket, Key="lake/silver/notes/readme.txt", Body=b"not a table")
    config = load_config(overrides={"lake_root": lake})
    assert list_lake_tables(config) == [("bronze", "itp_jobs"), ("gold", "jobs_gpu_count_cdf")]
    assert "silver.jobs is not a table" in capsys.readouterr().err
    # a lake on object storage stages on this machine, never in the bucket
    assert "://" not in config.staging_dir and config.staging_dir.startswith(str(tmp_path.anchor))


def test_a_second_writer_is_refused_while_the_lock_object_exists(s3_server, s3_env):
    config = load_config(overrides={"lake_root": f"s3://{s3_server.new_bucket()}/lake"})
    lock = f"{config.lake_root}/_locks/write.lock"
    with lake_write_lock(config):
        assert f"pid {os.getpid()}" in objectstore.read_object(lock).decode()
        with pytest.raises(TracelakeError) as refused, lake_write_lock(config):
            pass
        assert str(refused.value).startswith(f"another run (ingest or maintain) is writing the lake at {config.lake_root} "
                                             f"(pid {os.getpid()} on ")
        assert f"a run that was killed on another machine leaves {lock} behind: delete it once no run is writing" \
            in str(refused.value)
        assert "[" not in str(refused.value)  # the machine's ids stay in the object
    assert objectstore.read_object(lock) is None  # released
    with lake_write_lock(config):  # and taken again
        pass


def test_a_lock_left_by_a_run_killed_here_is_taken_over(s3_server, s3_env, capsys):
    """A holder of this machine whose process is gone (a run killed with -9) is replaced by a
    conditional write; one of another machine, or alive here, is not."""
    config = load_config(overrides={"lake_root": f"s3://{s3_server.new_bucket()}/lake"})
    lock = f"{config.lake_root}/_locks/write.lock"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid is free now
    here = _machine()
    assert objectstore.create_exclusive(lock, f"pid {gone.pid} on host since 2026-01-01T00:00:00Z [{here}]".encode())
    with lake_write_lock(config):
        assert objectstore.read_object(lock).decode().startswith(f"pid {os.getpid()} on ")
    assert "took over the lake's lock from a run that no longer runs (pid " in capsys.readouterr().err
    assert objectstore.read_object(lock) is None
    for holder in (f"pid {gone.pid} on elsewhere since 2026-01-01T00:00:00Z [another-boot/pid:[1]]",
                   f"pid {os.getppid()} on host since 2026-01-01T00:00:00Z [{here}]"):  # alive
        objectstore.delete_object(lock)
        assert objectstore.create_exclusive(lock, holder.encode())
        with pytest.raises(TracelakeError, match="another run .ingest or maintain. is writing the lake"):
            with lake_write_lock(config):
                pass
        assert objectstore.read_object(lock).decode() == holder  # left as it was


def test_raw_download_keeps_relative_paths_and_folders(s3_server, s3_env, tmp_path):
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    for key in ("raw/trafficinfo/2024052400/a.csv", "raw/trafficinfo/2024052401/b.csv", "raw/book.xlsx"):
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    packed = gzip.compress(b"job_id\n1\n")
    client.put_object(Bucket=bucket, Key="raw/jobs.csv.gz", Body=packed)
    got = objectstore.download(f"s3://{bucket}/raw", tmp_path, lambda rel: "2024052401" not in rel)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in got) == [
        "book.xlsx", "jobs.csv.gz", "trafficinfo/2024052400/a.csv"]
    assert (tmp_path / "jobs.csv.gz").read_bytes() == packed  # as stored, not inflated by its name
    assert (tmp_path / "trafficinfo" / "2024052401").is_dir()  # the folder of a file left out is there, empty
    assert objectstore.list_files(f"s3://{bucket}/raw/trafficinfo") == [("2024052400/a.csv", 32), ("2024052401/b.csv", 32)]


def test_store_errors_name_the_url_and_never_the_secret(s3_server, s3_env, monkeypatch):
    with pytest.raises(TracelakeError, match=r"^cannot use s3://no-such-bucket-here/lake: no such bucket$"):
        objectstore.check_reachable("s3://no-such-bucket-here/lake")
    bucket = s3_server.new_bucket()
    assert objectstore.check_reachable(f"s3://{bucket}/lake") is False  # a bucket with nothing under the prefix
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    with pytest.raises(TracelakeError, match=rf"^cannot use s3://{bucket}/lake: its endpoint {s3_server.endpoint} is plain http, "
                                             "which needs AWS_ALLOW_HTTP=true$"):
        objectstore.check_reachable(f"s3://{bucket}/lake")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    with pytest.raises(TracelakeError, match=r"^cannot use s3://b/lake: the endpoint does not answer"):
        objectstore.check_reachable("s3://b/lake")
    with pytest.raises(TracelakeError, match=r"^lake s4://b/lake: unknown scheme 's4://'"):
        load_config(overrides={"lake_root": "s4://b/lake"})
    with pytest.raises(TracelakeError, match=r"^raw_roots.itp s4://b/raw: unknown scheme 's4://'"):
        load_config(conf_pairs=["raw_roots.itp=s4://b/raw"])


def test_refused_credentials(tmp_path):
    """Every key is unknown to a server that checks signatures: the message names the URL, never the secret."""
    with server_refusing_keys() as keys, pytest.MonkeyPatch.context() as patch:
        for key, value in keys.items():
            patch.setenv(key, value)
        with pytest.raises(TracelakeError) as refused:
            objectstore.check_reachable("s3://some-bucket/lake")
    assert str(refused.value).startswith("cannot use s3://some-bucket/lake: access denied: check the credentials")
    assert WRONG_SECRET not in str(refused.value)


def test_an_endpoint_that_takes_the_connection_and_never_answers_is_refused_within_the_deadline(monkeypatch):
    """A listener on 127.0.0.1 that accepts and says nothing: the look at the store ends with
    the deadline named (the client's own timeouts and retries took 31 s)."""
    import socket
    import threading

    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.2)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                try:
                    held.append(listener.accept()[0])  # kept open, never answered
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
        monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
        monkeypatch.setattr(objectstore, "CHECK_DEADLINE_S", 2.0)
        try:
            with pytest.raises(TracelakeError, match=r"^cannot use s3://b/lake: the endpoint took the connection but "
                                                     r"did not answer within 2 s \(AWS_ENDPOINT_URL"):
                objectstore.check_reachable("s3://b/lake")
        finally:
            stop.set()
            thread.join()
            for conn in held:
                conn.close()
    assert held  # the client did connect
