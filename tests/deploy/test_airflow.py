"""The Airflow 3 DAGs (deploy/airflow/dags) in a real Airflow, in its own virtualenv as a user
installs it: DagBag without import errors or deprecation warnings, then `airflow dags test` of
the ITP ingest DAG and of one Zhejiang hour on small generated data, checked in the lake.

The Airflow virtualenv is cached under ~/.cache/tracelake (key: deploy/airflow/requirements.txt),
so only the first run installs it (~40 s); the metadata DB is SQLite in a temp AIRFLOW_HOME."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from airflowkit import DAGS, PROJECT_VENV, airflow_env
from airflowkit import airflow_venv as installed_airflow
from deltalake import DeltaTable

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

DAG_IDS = ["tracelake_ingest_acme", "tracelake_ingest_itp", "tracelake_ingest_zeus", "tracelake_ingest_zhejiang",
           "tracelake_report", "tracelake_zhejiang_hourly"]


@pytest.fixture(scope="module")
def airflow_venv() -> Path:
    return installed_airflow()


@pytest.fixture(scope="module")
def airflow(airflow_venv, tmp_path_factory):
    """A function running the `airflow` CLI against a fresh SQLite AIRFLOW_HOME."""
    home = tmp_path_factory.mktemp("airflow_home")
    base_env = airflow_env(home)

    def run(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(airflow_venv / "bin" / "airflow"), *args], capture_output=True, text=True,
                              env={**base_env, **(env or {})}, timeout=timeout)

    migrated = run("db", "migrate")
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    pool = run("pools", "set", "tracelake_lake", "1", "one writer per lake")
    assert pool.returncode == 0, pool.stderr[-2000:]
    run.home = home
    run.env = base_env
    return run


def test_dagbag_has_every_dag_no_import_error_and_no_deprecation(airflow, airflow_venv):
    script = (
        "import json, warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    from airflow.dag_processing.dagbag import DagBag\n"
        f"    bag = DagBag({str(DAGS)!r})\n"
        "print(json.dumps({'errors': {k: str(v) for k, v in bag.import_errors.items()}, 'dags': sorted(bag.dag_ids),"
        " 'warnings': sorted({f'{w.category.__name__}: {w.message}' for w in seen})}))\n"
    )
    done = subprocess.run([str(airflow_venv / "bin" / "python"), "-c", script], capture_output=True, text=True,
                          env=airflow.env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"errors": {}, "dags": DAG_IDS, "warnings": []}


def _data_lines_in_archive(archive: Path, member: str) -> int:
    with tarfile.open(archive) as tar:
        text = tar.extractfile(member).read().decode()
    return len(text.strip("\n").splitlines()) - 1


def _tracelake(*args: str) -> None:
    done = subprocess.run([str(PROJECT_VENV / "bin" / "tracelake"), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_itp_ingest_dag_runs_end_to_end(airflow, tmp_path):
    raw, lake = tmp_path / "itp", tmp_path / "lake"
    _tracelake("generate", "itp", "--out", str(raw), "--scale", "0.01")
    done = airflow("dags", "test", "tracelake_ingest_itp", "2025-06-01",
                   env={"AIRFLOW_VAR_TRACELAKE_RAW_ITP": str(raw), "AIRFLOW_VAR_TRACELAKE_LAKE": str(lake)})
    assert done.returncode == 0 and "state=success" in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    with tarfile.open(raw / "raw-traces.tar.gz") as tar:
        members = [m.name for m in tar.getmembers() if m.name.endswith(".csv")]
    expected = sum(_data_lines_in_archive(raw / "raw-traces.tar.gz", m) for m in members)
    assert DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows == expected


def test_zhejiang_hourly_dag_ingests_exactly_its_hour(airflow, tmp_path):
    raw, lake = tmp_path / "zj", tmp_path / "lake"
    _tracelake("generate", "zhejiang", "--out", str(raw), "--hours", "2", "--tasks", "1", "--scale", "0.1")
    done = airflow("dags", "test", "tracelake_zhejiang_hourly", "2024-05-23T18:00:00+00:00",
                   env={"AIRFLOW_VAR_TRACELAKE_RAW_ZHEJIANG": str(raw), "AIRFLOW_VAR_TRACELAKE_LAKE": str(lake)})
    assert done.returncode == 0 and "state=success" in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    counters = DeltaTable(str(lake / "bronze" / "zj_port_counters")).to_pyarrow_table()
    # the run at 18:00 UTC ingests the hour that ended then: 17:00-18:00 UTC, 01:00-02:00 CST
    assert set(counters.column("hour_cst").to_pylist()) == {"2024052401"}
    hour = raw / "trafficinfo" / "2024052401"
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) - 1 for p in hour.glob("*/*.csv"))
    assert counters.num_rows == lines


def test_bad_input_fails_the_task_without_retry(airflow, tmp_path):
    done = airflow("dags", "test", "tracelake_ingest_itp", "2025-06-02",
                   env={"AIRFLOW_VAR_TRACELAKE_RAW_ITP": str(tmp_path / "missing"),
                        "AIRFLOW_VAR_TRACELAKE_LAKE": str(tmp_path / "lake")})
    log = done.stdout + done.stderr
    assert "AirflowFailException" in log and "bad input or configuration" in log, log[-3000:]
    assert "state=failed" in log


def test_zhejiang_hour_through_spark_submit_on_a_standalone_cluster(airflow, tmp_path):
    """The DAG's spark-submit variant: the same hour, through deploy/spark-submit.sh with
    delta-spark against a standalone master (one worker), equals the CLI's ingest of it."""
    from deploykit import REPO, fingerprint
    from standalone import standalone_cluster

    raw, lake, local = tmp_path / "zj", tmp_path / "lake", tmp_path / "local"
    _tracelake("generate", "zhejiang", "--out", str(raw), "--hours", "2", "--tasks", "1", "--scale", "0.1")
    _tracelake("ingest", "zhejiang", "--raw", str(raw), "--lake", str(local), "--hours", "2024052401")
    with standalone_cluster(tmp_path / "cluster", workers=1) as cluster:
        done = airflow("dags", "test", "tracelake_zhejiang_hourly", "2024-05-23T18:00:00+00:00", timeout=900,
                       env={**cluster.env, "AIRFLOW_VAR_TRACELAKE_RAW_ZHEJIANG": str(raw),
                            "AIRFLOW_VAR_TRACELAKE_LAKE": str(lake), "AIRFLOW_VAR_TRACELAKE_SPARK_MASTER": cluster.master,
                            "AIRFLOW_VAR_TRACELAKE_SPARK_SUBMIT": str(REPO / "deploy" / "spark-submit.sh")})
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "state=success" in log, log[-3000:]
    assert "spark-submit.sh zhejiang" in log  # the command line the task log starts with
    names = ["bronze.zj_port_counters", "silver.zj_port_rates"]
    got, expected = fingerprint(lake, names), fingerprint(local, names)
    for name in names:  # row counts, and numeric sums to 1e-9 (engines differ in the last bits)
        assert got[name][0] == expected[name][0] > 0 and got[name][1] == pytest.approx(expected[name][1], rel=1e-9)
