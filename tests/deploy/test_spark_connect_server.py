"""The `connect` profile against Apache Spark's own Spark Connect server with delta-spark (what a
Databricks workspace serves): the real ITP archives ingested equal a local-profile ingest row for
row; a second ingest commits nothing; `tables`, `query` (time travel included) and `maintain`
answer through Delta's own SQL; a client without the token is refused."""

from __future__ import annotations

import csv
import io
import re

import pytest
from conftest import shared
from deploykit import delta_versions, engine_rows, tracelake
from sparkconnect import spark_connect_server

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

TABLES = ("bronze.itp_jobs", "bronze.elasticflow_jobs", "quarantine.itp_jobs", "silver.jobs",
          "gold.jobs_duration_quantiles", "gold.jobs_gpu_count_cdf")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    raw = shared("elasticflow")
    base = tmp_path_factory.mktemp("spark-connect")
    local, remote = base / "local", base / "remote"
    done = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(local))
    assert done.returncode == 0, done.stderr[-3000:]
    with spark_connect_server(base / "server") as url:
        env = {"TRACELAKE_CONNECT_URL": url}

        def connect(*args: str):
            return tracelake(*args, "--lake", str(remote), "--profile", "connect", env=env, timeout=900)

        first = connect("ingest", "itp", "--raw", str(raw))
        versions = delta_versions(remote)
        second = connect("ingest", "itp", "--raw", str(raw))
        # the token never shows in what tracelake prints, even when a command fails with the URL in its message
        leaked = tracelake("query", "SELECT 1", "--lake", str(remote), "--profile", "connect",
                           env={"TRACELAKE_CONNECT_URL": re.sub(r"localhost:\d+", "127.0.0.1:1", url)},
                           timeout=120)
        yield {"leaked": leaked, "token": url.split("token=")[1], "local": local, "remote": remote, "first": first, "second": second, "versions": versions,
               "again": delta_versions(remote), "connect": connect,
               "no_token": tracelake("query", "SELECT 1", "--lake", str(remote), "--profile", "connect",
                                     env={"TRACELAKE_CONNECT_URL": url.split("/;")[0]}, timeout=300)}


def test_the_ingest_equals_the_local_profile_row_for_row(served):
    assert served["first"].returncode == 0, served["first"].stderr[-3000:]
    for name in TABLES:
        assert engine_rows(served["remote"], name) == engine_rows(served["local"], name), name


def test_a_second_ingest_makes_no_new_commit(served):
    assert served["second"].returncode == 0, served["second"].stderr[-3000:]
    before, after = served["versions"], served["again"]
    # every table keeps its version; the run's rule results are one more commit of ops.quality_results
    assert {t: v for t, v in after.items() if t != "ops.quality_results"} == \
        {t: v for t, v in before.items() if t != "ops.quality_results"}
    assert after["ops.quality_results"] == before["ops.quality_results"] + 1


def test_tables_query_time_travel_and_maintain_answer(served):
    connect = served["connect"]
    real = len(engine_rows(served["local"], "bronze.itp_jobs"))
    listed = connect("tables")
    assert listed.returncode == 0, listed.stderr[-3000:]
    rows = {r["table"]: r for r in csv.DictReader(io.StringIO(listed.stdout))}
    assert int(rows["bronze.itp_jobs"]["rows"]) == real
    version = served["versions"]["bronze.itp_jobs"]
    counted = connect("query", "SELECT count(*) AS n FROM bronze.itp_jobs VERSION AS OF 0")
    assert counted.returncode == 0 and counted.stdout.split() == ["n", "0"], counted.stderr[-3000:]
    maintained = connect("maintain", "bronze.itp_jobs", "--optimize")
    assert maintained.returncode == 0, maintained.stderr[-3000:]
    [header, row] = list(csv.reader(io.StringIO(maintained.stdout)))[:2]
    assert row[0] == "bronze.itp_jobs" and int(row[1]) >= version and row[4] == "1", maintained.stdout


def test_a_client_without_the_token_is_refused(served):
    refused = served["no_token"]
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "refused this client (UNAUTHENTICATED): give its token in the URL" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_failing_command_never_prints_the_token(served):
    leaked = served["leaked"]
    assert leaked.returncode == 2, leaked.stderr[-2000:]
    assert "cannot reach Spark Connect at sc://127.0.0.1:1" in leaked.stderr and "token=***" in leaked.stderr
    assert served["token"] not in leaked.stdout + leaked.stderr
