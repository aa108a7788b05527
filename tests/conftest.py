"""One Spark session for the whole run, on the profile named by TRACELAKE_TEST_PROFILE.

`local` (default): the embedded Sail engine, every test. `spark`: classic PySpark with
delta-spark (the jars `bash dev` fetched once into .jars/): the tests marked `portable`
(readers, transforms, rules) and `delta_io` (every write mode, the no-op re-run, quarantine,
maintenance, time travel, the CLI's reads).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import child_environ

from tracelake.config import Config, load_config
from tracelake.engine import start_engine

os.environ.setdefault("RUST_LOG", "error")
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
PROFILE = os.environ.get("TRACELAKE_TEST_PROFILE", "local")
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if (SHARED_DATA / "zhejiang" / "cluster_2000_A100.xlsx").is_file():  # generate on the real topology when we have it
    os.environ.setdefault("TRACELAKE_ZJ_TOPOLOGY", str(SHARED_DATA / "zhejiang" / "cluster_2000_A100.xlsx"))


def pytest_collection_modifyitems(config, items):
    if PROFILE == "local":
        return
    skip = pytest.mark.skip(reason=f"the '{PROFILE}' test set runs the tests marked portable or delta_io")
    for item in items:
        if "portable" not in item.keywords and "delta_io" not in item.keywords:
            item.add_marker(skip)


def make_config(lake_root: Path, profile: str = PROFILE) -> Config:
    overrides = {"lake_root": str(lake_root)}
    pairs = ["spark_conf.spark.sql.shuffle.partitions=2"]
    if profile == "spark":
        overrides |= {"master": "local[2]"}
    return load_config(profile=profile, overrides=overrides, conf_pairs=pairs)


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    eng = start_engine(make_config(tmp_path_factory.mktemp("session-lake")))
    yield eng
    eng.stop()


@pytest.fixture(scope="session")
def spark(engine):
    return engine.spark


@pytest.fixture
def config(tmp_path) -> Config:
    return make_config(tmp_path / "lake")


def shared(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real trace files not available: {path} is absent (a user's checkout has no ../shared)")
    return path


@pytest.fixture(scope="session")
def s3_server():
    """An S3 server (moto) on 127.0.0.1 for the session, stopped by its PID (tests/objectstore/s3kit.py)."""
    from objectstore.s3kit import moto_server_command, start_s3_server

    if moto_server_command() is None:
        pytest.skip("moto_server not installed (pip install -e '.[test]' brings moto[server])")
    server = start_s3_server()
    yield server
    server.stop()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """The S3 server's AWS_* variables set in this process too (pyarrow.fs, obstore, deltalake)."""
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    return {**child_environ(), **s3_server.env}
