"""deploy/spark-submit.sh in remote mode against a Sail Spark Connect server (started here on
127.0.0.1, stopped by PID), and the errors spark-submit users see."""

from __future__ import annotations

import csv
import io
import json
import lzma
import sys
import tarfile

import pytest
from deploykit import REPO, VENV_BIN, delta_versions, run, sail_server, table_rows, tracelake

from tracelake.engine import explain_engine_error
from tracelake.run.registry import generate

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

SUBMIT = REPO / "deploy" / "spark-submit.sh"


def _data_lines(text: str) -> int:
    return sum(1 for line in text.splitlines()[1:] if line.strip())


def _itp_raw_rows(raw) -> int:
    with tarfile.open(raw / "raw-traces.tar.gz") as tar:
        return sum(_data_lines(tar.extractfile(m).read().decode()) for m in tar.getmembers()
                   if m.isfile() and m.name.endswith(".csv"))


@pytest.fixture(scope="module")
def submitted(tmp_path_factory):
    """Both sources ingested twice through spark-submit --remote; yields what each run left."""
    base = tmp_path_factory.mktemp("submit")
    raw_itp, raw_zeus, lake = base / "itp", base / "zeus", base / "lake"
    generate("itp", raw_itp, scale=0.01, seed=4)
    generate("zeus", raw_zeus, scale=0.01, seed=4)
    with sail_server(base / "sail.log") as url:
        env = {"SPARK_REMOTE": url, "PYSPARK_PYTHON": sys.executable}
        runs = []
        for _attempt in range(2):
            for source, raw in (("itp", raw_itp), ("zeus", raw_zeus)):
                done = run(["bash", str(SUBMIT), source, str(raw), str(lake)], env=env)
                assert done.returncode == 0, done.stderr[-3000:]
                assert "ingest summary" in done.stdout
            runs.append({
                "versions": delta_versions(lake),
                "rows": {t: table_rows(lake, t) for t in ("bronze.itp_jobs", "bronze.zeus_train",
                                                           "bronze.zeus_alibaba_groups",
                                                           "gold.zeus_time_energy_to_accuracy")},
            })
        # tables: URL from SPARK_REMOTE (no --connect-url); history through the detection
        tables = tracelake("tables", "--profile", "connect", "--lake", str(lake), env={"SPARK_REMOTE": url})
        maint = run([sys.executable, "-c", MAINTAIN, str(lake / "bronze" / "itp_jobs"), str(lake)],
                    env={"TRACELAKE_CONNECT_URL": url})
        query = tracelake("query", "SELECT count(*) AS n FROM bronze.itp_jobs", "--profile", "connect",
                          "--lake", str(lake), env={"SPARK_REMOTE": url})
        maintain = tracelake("maintain", "bronze.zeus_train", "--profile", "connect", "--lake", str(lake),
                             env={"SPARK_REMOTE": url})
    yield {"raw_itp": raw_itp, "raw_zeus": raw_zeus, "lake": lake, "runs": runs, "tables": tables,
           "maint": maint, "query": query, "maintain": maintain}


MAINTAIN = """
import json, sys
from tracelake.config import load_config
from tracelake.engine import start_engine
from tracelake.delta.maintenance import history, optimize, vacuum
path, lake = sys.argv[1], sys.argv[2]
with start_engine(load_config(profile="connect", overrides={"lake_root": lake})) as engine:
    before = [c.operation for c in history(engine, path)]
    optimize(engine, path)
    vacuum(engine, path, retention_hours=0, enforce_retention=False)
    after = [c.operation for c in history(engine, path)]
    rows = engine.spark.read.format("delta").load(path).count()
    print(json.dumps({"sql": engine._delta_sql, "before": before, "after": after, "rows": rows}))
"""


def test_remote_ingest_writes_every_raw_row(submitted):
    lake, first = submitted["lake"], submitted["runs"][0]
    itp_raw = _itp_raw_rows(submitted["raw_itp"])
    kept = len(first["rows"]["bronze.itp_jobs"])
    quarantined = len(table_rows(lake, "quarantine.itp_jobs"))
    assert itp_raw > 100 and kept + quarantined == itp_raw
    train_raw = _data_lines((submitted["raw_zeus"] / "summary_train.csv").read_text())
    assert len(first["rows"]["bronze.zeus_train"]) == train_raw > 50
    groups_raw = _data_lines(lzma.open(submitted["raw_zeus"] / "alibaba_groups.csv.xz", "rt").read())
    assert len(first["rows"]["bronze.zeus_alibaba_groups"]) == groups_raw > 10
    assert first["versions"]["gold.zeus_time_energy_to_accuracy"] >= 0


def test_second_submit_is_a_no_op(submitted):
    first, second = submitted["runs"]
    assert second["rows"] == first["rows"]
    # bronze and quarantine: no new Delta version (one MERGE per table that found nothing to do)
    data = {t: v for t, v in first["versions"].items() if t.split(".")[0] in ("bronze", "quarantine")}
    assert len(data) >= 8
    assert {t: second["versions"][t] for t in data} == data
    assert second["versions"]["ops.quality_results"] > first["versions"]["ops.quality_results"]


def test_tables_on_a_sail_server_falls_back_to_deltalake(submitted):
    done = submitted["tables"]
    assert done.returncode == 0, done.stderr
    listed = {r[0]: r for r in csv.reader(io.StringIO(done.stdout)) if r[0] != "table"}
    versions = submitted["runs"][1]["versions"]
    assert set(listed) == set(versions)
    for name, (_, rows, version, operation) in listed.items():
        assert int(version) == versions[name]
        assert int(rows) == len(table_rows(submitted["lake"], name))
        assert operation  # e.g. WRITE, MERGE, CREATE TABLE


def test_maintenance_against_a_sail_server(submitted):
    done = submitted["maint"]
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["sql"] is False  # probed once: Sail has no DESCRIBE HISTORY
    assert out["before"][-1] == "CREATE TABLE"
    assert "OPTIMIZE" in out["after"] and out["after"][0] in ("VACUUM END", "OPTIMIZE")
    assert out["rows"] == len(submitted["runs"][1]["rows"]["bronze.itp_jobs"])


def test_master_with_a_connect_only_profile_names_the_profile(tmp_path):
    done = run([str(VENV_BIN / "spark-submit"), "--master", "local[1]", str(REPO / "jobs" / "ingest.py"),
                "itp", "--raw", str(tmp_path), "--lake", str(tmp_path / "lake")],
               env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", "PYSPARK_PYTHON": sys.executable}, timeout=120)
    # spark-submit's PythonRunner hands the script's stderr on through its own stdout
    errors = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("tracelake:")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert errors == [
        "tracelake: error: spark-submit --master local[1] starts classic Spark, which profile 'local' "
        "cannot use: pass --profile spark (with --packages io.delta:delta-spark_4.1_2.13:4.4.0), or submit "
        "with --remote sc://HOST:PORT and --profile connect"
    ]


def test_script_refuses_both_remote_and_master(tmp_path):
    done = run(["bash", str(SUBMIT), "itp", str(tmp_path)],
               env={"SPARK_REMOTE": "sc://127.0.0.1:1", "SPARK_MASTER": "local[1]"})
    assert done.returncode == 2
    assert "not both" in done.stderr


class _Java:
    def __init__(self, name, message, cause=None):
        self._name, self._message, self._cause = name, message, cause

    def getClass(self):
        outer = self

        class _Class:
            def getName(self):
                return outer._name
        return _Class()

    def getMessage(self):
        return self._message

    def getCause(self):
        return self._cause


class Py4JJavaError(Exception):  # same name as py4j's: what explain_engine_error keys on
    def __init__(self, java_exception):
        super().__init__("An error occurred while calling o1199.save.")
        self.java_exception = java_exception


def test_jvm_write_failure_shows_root_cause_and_fix():
    exc = Py4JJavaError(_Java(
        "org.apache.spark.SparkClassNotFoundException",
        "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: delta. SQLSTATE: 42K02",
        _Java("java.lang.ClassNotFoundException", "delta.DefaultSource")))
    assert explain_engine_error(exc) == (
        "org.apache.spark.SparkClassNotFoundException: [DATA_SOURCE_NOT_FOUND] Failed to find the data "
        "source: delta. SQLSTATE: 42K02 -- the Delta Lake jars are not on the classpath: run with "
        "`spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0` (deploy/spark-submit.sh adds it)")
    other = Py4JJavaError(_Java("org.apache.spark.SparkException", "Job aborted",
                                _Java("java.io.IOException", "No space left on device")))
    assert explain_engine_error(other) == "java.io.IOException: No space left on device"
    assert explain_engine_error(ValueError("x")) is None


def test_query_and_maintain_commands_on_a_sail_server(submitted):
    query, maintain = submitted["query"], submitted["maintain"]
    assert query.returncode == 0, query.stderr[-2000:]
    assert query.stdout.split() == ["n", str(len(submitted["runs"][1]["rows"]["bronze.itp_jobs"]))]
    assert maintain.returncode == 0, maintain.stderr[-2000:]
    header, row = list(csv.reader(io.StringIO(maintain.stdout)))[:2]
    assert header == ["table", "version", "last_operation", "files_before", "files_after"]
    assert row[0] == "bronze.zeus_train" and row[3] == row[4]  # history only: nothing compacted
