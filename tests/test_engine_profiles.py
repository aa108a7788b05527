"""The `connect` profile against a separate Spark Connect server, and the maintenance adapter."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest
from helpers import itp_csv, job_id, rows, tracelake, write_archive

from tracelake.delta.maintenance import history, optimize, vacuum
from tracelake.run.pipeline import run_ingest

SERVER = """
import sys, time
from pysail.spark import SparkConnectServer
server = SparkConnectServer(ip="127.0.0.1", port=0)
server.start(background=True)
print("%s:%d" % server.listening_address, flush=True)
sys.stdin.read()  # serve until the test closes our stdin
server.stop()
"""


@pytest.fixture
def connect_server():
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "RUST_LOG": "error"})
    address = proc.stdout.readline().strip()
    yield f"sc://{address}"
    proc.stdin.close()
    proc.wait(timeout=30)


def test_connect_profile_runs_the_same_job(connect_server, tmp_path):
    assert connect_server.startswith("sc://127.0.0.1:")
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(i)},{i},{600 + i},2" for i in range(1, 4)])})
    common = ["--profile", "connect", "--connect-url", connect_server, "--lake", str(lake)]
    ingest = tracelake("ingest", "itp", "--raw", str(raw), *common)
    assert ingest.returncode == 0, ingest.stderr
    q = tracelake("query", "SELECT count(*) AS n, sum(duration * num_gpu) AS gpu_s FROM bronze.itp_jobs", *common)
    assert rows(q.stdout) == [["n", "gpu_s"], ["3", str(2 * (601 + 602 + 603))]]


def test_maintenance_adapter_compacts_and_vacuums(engine, spark, config, tmp_path):
    raw = tmp_path / "raw"
    for n in range(3):  # three changing runs leave a first append, two MERGE commits and small files
        write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(i)},{i},{600 + n},1" for i in range(1, 5)])})
        run_ingest(engine, config, "itp", str(raw))
    path = config.table_path("bronze", "itp_jobs")
    assert [c.operation for c in history(engine, path)] == ["MERGE", "MERGE", "WRITE", "CREATE TABLE"]
    optimize(engine, path)
    vacuum(engine, path, retention_hours=0, enforce_retention=False)
    commits = history(engine, path)
    assert commits[0].operation in ("VACUUM END", "OPTIMIZE")
    assert "OPTIMIZE" in [c.operation for c in commits]
    table = spark.read.format("delta").load(path)
    assert sorted(r.duration for r in table.collect()) == [602, 602, 602, 602]


def test_an_engine_beside_an_active_session_opens_its_own_and_leaves_that_one_open(spark, connect_server, tmp_path):
    """A connect engine, and a local one on a TCP port, started while this process already has an
    active session (the test run's; a notebook's, for a user): each gets a session of its own on
    its own server, and stopping it leaves the other session answering. getOrCreate() used to hand
    back the active session, whatever its server, and the engine's stop() then closed it."""
    from conftest import make_config

    from tracelake.config import load_config
    from tracelake.engine import start_engine

    local = make_config(tmp_path / "lake")
    for config in (replace(local, local_engine="tcp"),
                   load_config(profile="connect", overrides={"lake_root": str(tmp_path / "lake"),
                                                              "connect_url": connect_server})):
        engine = start_engine(config)
        try:
            assert engine.spark is not spark
            assert engine.spark.range(4).count() == 4
        finally:
            engine.stop()
        assert engine.spark.is_stopped and spark.range(3).count() == 3, config.profile
