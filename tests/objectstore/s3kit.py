"""An S3 server on 127.0.0.1 for tests (the fixtures `s3_server`, `s3_env` in tests/conftest.py): moto's server mode (`moto[server]`, the `test` extra),
started as a process of its own on a free port and stopped by its PID. Credentials are test
values moto accepts; the endpoint is plain http, which the object_store clients (Sail,
deltalake, obstore) take only with AWS_ALLOW_HTTP=true."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def moto_server_command() -> str | None:
    beside = Path(sys.executable).parent / "moto_server"
    return str(beside) if beside.exists() else shutil.which("moto_server")


@dataclass
class S3Server:
    """A running moto server: its endpoint, the environment a client needs, its process."""

    process: subprocess.Popen
    endpoint: str
    env: dict[str, str] = field(default_factory=dict)

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.env["AWS_REGION"],
                            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"])

    def new_bucket(self, prefix: str = "lake") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.client().create_bucket(Bucket=name)
        return name

    def upload(self, local: Path, bucket: str, prefix: str) -> list[str]:
        """Every file under `local` (or the file itself) to s3://bucket/prefix/<relative path>."""
        client, keys = self.client(), []
        files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
        for path in files:
            rel = path.name if local.is_file() else path.relative_to(local).as_posix()
            key = f"{prefix.strip('/')}/{rel}"
            client.upload_file(str(path), bucket, key)
            keys.append(key)
        return keys

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()


def wait_for_port(process: subprocess.Popen, port: int) -> None:
    """Until the server accepts connections on 127.0.0.1:port (or has ended: then an error)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto_server did not start on port {port}") from None
            time.sleep(0.1)


WRONG_SECRET = "wrong-secret-value-42"


@contextlib.contextmanager
def server_refusing_keys() -> Iterator[dict[str, str]]:
    """A moto server that checks signatures (INITIAL_NO_AUTH_ACTION_COUNT=0: every key is then
    unknown to it, as a wrong key is to S3), stopped by PID; yields the AWS_* settings of a
    client with a wrong key (WRONG_SECRET)."""
    if moto_server_command() is None:
        pytest.skip("moto_server not installed (pip install -e '.[test]' brings moto[server])")
    port = free_port()
    server = subprocess.Popen([moto_server_command(), "-H", "127.0.0.1", "-p", str(port)],
                              env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(server, port)
        yield {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG",
               "AWS_SECRET_ACCESS_KEY": WRONG_SECRET, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait()


def start_s3_server() -> S3Server:
    command = moto_server_command()
    if command is None:
        raise RuntimeError("moto_server not found: pip install 'moto[server]' (the test extra)")
    port = free_port()
    process = subprocess.Popen([command, "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    wait_for_port(process, port)
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
           "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_EC2_METADATA_DISABLED": "true"}
    return S3Server(process, endpoint, env)


SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def real(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real trace files not available: {path} is absent (a user's checkout has no ../shared)")
    return path
