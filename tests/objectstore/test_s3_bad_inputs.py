"""Bad object-store input through the CLI, each command a process of its own: a missing bucket,
refused credentials and an endpoint that does not answer each end in exit 2 within 30 s (the
processes' time limit here) with one line naming the URL, never the secret; a raw archive cut
short in the bucket is refused as it is on local disk, and nothing is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from s3kit import WRONG_SECRET, free_port, server_refusing_keys

from tracelake.io import objectstore
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


# files read in place by the tasks: every check the parse makes of a file, through the store.
# Zhejiang's port files; AcmeTrace's job and utilization CSVs (a .gz too) and Zeus's plain CSVs,
# their headers from ranged reads; Zeus's .xz, streamed from its URL and unpacked, beside them
IN_PLACE_CASES = ("zj_port_file_cut_short_in_its_last_line", "zj_port_file_bad_byte_deep_in_the_file",
                  "zj_rows_traded_between_port_files", "zj_save_time_in_seconds",
                  "acme_utilization_file_cut_short_in_its_last_line", "acme_utilization_bad_byte_deep_in_the_file",
                  "acme_utilization_header_without_time", "acme_truncated_gzip_utilization",
                  "acme_latin1_byte_late_in_the_file", "acme_bad_timestamp",
                  "zeus_latin1_bytes", "zeus_header_with_nul_and_escape_bytes", "zeus_bad_file_found_late_writes_nothing",
                  "zeus_extra_column", "zeus_truncated_xz")


@pytest.mark.e2e  # starts an engine per case: the end-to-end set
@pytest.mark.parametrize("name", IN_PLACE_CASES)
def test_cases_read_in_place_end_as_on_local_disk(s3_server, s3_env, tmp_path, name):
    """The bad-input corpus's cases of files read in place (tests/bad_inputs/cases.py) with the raw
    folder in a bucket and the lake there too (so the engine reaches the store and reads those
    files at their URLs): the same exit code, message, rows, quarantine reasons and rows read as
    the corpus's local run."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bad_inputs"))
    from cases import CASES
    from deltalake import DeltaTable

    [case] = [c for c in CASES if c.name == name]
    raw = tmp_path / "raw"
    raw.mkdir()
    [args] = case.write(raw)
    bucket = s3_server.new_bucket("badport")
    s3_server.upload(raw, bucket, "raw")
    lake = f"s3://{bucket}/lake"
    args = [a.replace(str(raw), f"s3://{bucket}/raw") for a in args]
    done = tracelake(s3_env, *args, "--lake", lake, timeout=300)
    assert done.returncode == case.rc, done.stderr[-2000:]
    if case.message is not None:
        assert case.message in done.stderr.strip().splitlines()[-1], done.stderr[-2000:]
    for table, expected in case.rows.items():
        url = f"{lake}/{table}"
        stored = DeltaTable(url).to_pyarrow_table().num_rows if objectstore.check_reachable(f"{url}/_delta_log") else 0
        assert stored == expected, table
    for table, expected in case.reasons.items():
        got = DeltaTable(f"{lake}/{table}").to_pyarrow_table().column("reasons").to_pylist()
        assert sorted(got) == sorted(expected), table
    for table, written in case.read.items():  # no row is silently dropped
        assert sum(DeltaTable(f"{lake}/{layer}/{table}").to_pyarrow_table().num_rows
                   for layer in ("bronze", "quarantine")) == written, table
