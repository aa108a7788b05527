"""deploy/spark-submit.sh in remote mode against Apache Spark's own Spark Connect server with
delta-spark, the server in local-cluster mode (a driver and two executor JVMs on 127.0.0.1, as a
Databricks workspace spreads a job over its workers): generated ITP and Zeus submitted equal the
local profile's ingest row for row, a second submit commits nothing, and the server's token
never reaches a command line."""

from __future__ import annotations

import sys

import pytest
from deploykit import REPO, delta_versions, engine_rows, run, tracelake
from sparkconnect import SPARK_SUBMIT, spark_connect_server

from tracelake.run.registry import generate

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

SUBMIT = REPO / "deploy" / "spark-submit.sh"
TABLES = {"itp": ("bronze.itp_jobs", "bronze.elasticflow_jobs", "silver.jobs", "gold.jobs_gpu_count_cdf"),
          "zeus": ("bronze.zeus_train", "bronze.zeus_power", "gold.zeus_time_energy_to_accuracy")}


@pytest.fixture(scope="module")
def submitted(tmp_path_factory):
    base = tmp_path_factory.mktemp("connect-cluster")
    raws = {source: base / source for source in TABLES}
    for source, raw in raws.items():
        generate(source, raw, scale=0.01, seed=7)
    local, remote = base / "local", base / "remote"
    for source, raw in raws.items():
        done = tracelake("ingest", source, "--raw", str(raw), "--lake", str(local))
        assert done.returncode == 0, done.stderr[-3000:]
    with spark_connect_server(base / "server", master="local-cluster[2,1,1024]") as url:
        env = {"SPARK_REMOTE": url, "PYSPARK_PYTHON": sys.executable}
        first = {s: run(["bash", str(SUBMIT), s, str(raw), str(remote)], env=env, timeout=900) for s, raw in raws.items()}
        versions = delta_versions(remote)
        # the second submit through a spark-submit that records its command line, then runs the real one
        recorder, argv = base / "spark-submit", base / "argv"
        recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{argv}"\nexec "{SPARK_SUBMIT}" "$@"\n')
        recorder.chmod(0o755)
        again = run(["bash", str(SUBMIT), "itp", str(raws["itp"]), str(remote)],
                    env={**env, "SPARK_SUBMIT": str(recorder)}, timeout=900)
        yield {"local": local, "remote": remote, "first": first, "versions": versions, "again": again,
               "after": delta_versions(remote), "token": url.split("token=")[1], "argv": argv.read_text(),
               "log": base / "server" / "connect-server.log"}


def test_each_submit_equals_the_local_profile_row_for_row(submitted):
    for source, done in submitted["first"].items():
        assert done.returncode == 0, done.stderr[-3000:]
        assert "ingest summary" in done.stdout
        for name in TABLES[source]:
            assert engine_rows(submitted["remote"], name) == engine_rows(submitted["local"], name), name
    assert len(engine_rows(submitted["remote"], "bronze.itp_jobs")) > 0


def test_the_server_ran_tasks_on_two_executors(submitted):
    log = submitted["log"].read_text(errors="replace")
    assert "local-cluster" in log or "StandaloneSchedulerBackend" in log
    executors = {line.split("Granted executor ID ")[1].split()[0] for line in log.splitlines()
                 if "Granted executor ID " in line}
    assert len(executors) >= 2, log[-3000:]


def test_a_second_submit_commits_nothing_and_the_token_stays_off_command_lines(submitted):
    again = submitted["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    before, after = submitted["versions"], submitted["after"]
    assert {t: v for t, v in after.items() if t != "ops.quality_results"} == \
        {t: v for t, v in before.items() if t != "ops.quality_results"}
    for done in (*submitted["first"].values(), again):
        assert submitted["token"] not in done.stdout + done.stderr
    argv = submitted["argv"].splitlines()
    assert argv[:2] == ["--remote", argv[1]] and argv[1].startswith("sc://localhost:") and "token" not in argv[1]
    assert submitted["token"] not in submitted["argv"]
