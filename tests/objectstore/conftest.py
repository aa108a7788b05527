"""Fixtures of the object-store tests: an S3 server (moto, s3kit.py) on 127.0.0.1 for the session."""

from __future__ import annotations

import os

import pytest
from s3kit import moto_server_command, start_s3_server


@pytest.fixture(scope="session")
def s3_server():
    """An S3 server on 127.0.0.1 for the test session (import this fixture into a test module)."""
    if moto_server_command() is None:
        pytest.skip("moto_server not installed (pip install -e '.[test]' brings moto[server])")
    server = start_s3_server()
    yield server
    server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The server's AWS_* variables set in this process too (pyarrow.fs, obstore, deltalake)."""
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **s3_server.env}
