"""Bad object-store input through the CLI, each command a process of its own: a missing bucket,
refused credentials and an endpoint that does not answer each end in exit 2 within 30 s (the
processes' time limit here) with one line naming the URL, never the secret; a raw archive cut
short in the bucket is refused as it is on local disk, and nothing is written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from s3kit import WRONG_SECRET, free_port, server_refusing_keys

from tracelake.run.registry import generate

LIMIT_S = 30  # the bound for a store that cannot be used


def tracelake(env: dict, *args: str, timeout: float = LIMIT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True,
                          env={**env, "RUST_LOG": "error"}, timeout=timeout)


def one_line(done: subprocess.CompletedProcess, secret: str) -> str:
    assert done.returncode == 2, done.stderr[-2000:]
    assert secret not in done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def itp_raw(tmp_path):
    generate("itp", tmp_path / "itp", scale=0.005, seed=1)
    return tmp_path / "itp"


def test_missing_bucket(s3_server, itp_raw):
    env = {**os.environ, **s3_server.env}
    secret = env["AWS_SECRET_ACCESS_KEY"]
    for args in (["tables", "--lake", "s3://no-such-bucket-1/lake"],
                 ["query", "--lake", "s3://no-such-bucket-1/lake", "SELECT 1"],
                 ["ingest", "itp", "--raw", str(itp_raw), "--lake", "s3://no-such-bucket-1/lake"]):
        assert one_line(tracelake(env, *args), secret) == "tracelake: error: cannot use s3://no-such-bucket-1/lake: no such bucket"
    done = tracelake(env, "ingest", "itp", "--raw", "s3://no-such-bucket-2/raw", "--lake", str(itp_raw.parent / "lake"))
    assert one_line(done, secret) == "tracelake: error: cannot use s3://no-such-bucket-2/raw: no such bucket"
    bucket = s3_server.new_bucket()
    done = tracelake(env, "tables", "--lake", f"s3://{bucket}/nothing-here")
    assert one_line(done, secret) == (f"tracelake: error: no lake at s3://{bucket}/nothing-here "
                                      "(run `tracelake ingest` first, or check --lake)")


def test_endpoint_that_does_not_answer(s3_server, itp_raw):
    env = {**os.environ, **s3_server.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
    secret = env["AWS_SECRET_ACCESS_KEY"]
    expected = "the endpoint does not answer (AWS_ENDPOINT_URL or the store's address)"
    assert one_line(tracelake(env, "tables", "--lake", "s3://bucket/lake"), secret) == (
        f"tracelake: error: cannot use s3://bucket/lake: {expected}")
    done = tracelake(env, "ingest", "itp", "--raw", "s3://bucket/raw/itp", "--lake", str(itp_raw.parent / "lake"))
    assert one_line(done, secret) == f"tracelake: error: cannot use s3://bucket/raw/itp: {expected}"


def test_refused_credentials():
    """Every key is unknown to a server that checks signatures, as a wrong key is to S3."""
    with server_refusing_keys() as keys:
        env = {**os.environ, **keys}
        for command in (["tables"], ["maintain", "--optimize"], ["report", "--out", "/nonexistent/report"]):
            assert one_line(tracelake(env, *command, "--lake", "s3://some-bucket/lake"), WRONG_SECRET) == (
                "tracelake: error: cannot use s3://some-bucket/lake: access denied: check the credentials "
                "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, an instance role, or AZURE_STORAGE_*)")


@pytest.mark.e2e  # starts an engine: the end-to-end set
def test_raw_archive_cut_short_in_the_bucket_is_refused(s3_server, itp_raw):
    archive = itp_raw / "raw-traces.tar.gz"
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])  # a partial upload
    bucket = s3_server.new_bucket()
    s3_server.upload(itp_raw, bucket, "raw")
    env = {**os.environ, **s3_server.env}
    done = tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw", "--lake", f"s3://{bucket}/lake", timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tracelake: error: s3://{bucket}/raw/raw-traces.tar.gz: truncated or corrupt archive ("), last
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="lake/")
    assert listed.get("KeyCount", 0) == 0  # nothing written, the lock object removed
