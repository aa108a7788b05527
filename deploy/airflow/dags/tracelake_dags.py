"""Airflow 3 DAGs for tracelake: one ingest DAG per source, an hourly Zhejiang DAG that ingests
the traffic of the run's own hour (the daily zhejiang DAG brings the workbook and task logs), and
a report DAG scheduled by the tables it reads.

How a worker runs tracelake: the CLI of a separate virtualenv, named by the Airflow Variable
`tracelake_venv` (default /opt/tracelake/.venv). Airflow and tracelake never share an
environment: Airflow's Spark provider pins another pyspark.

Variables (all optional but the raw folders of the sources you schedule):
  tracelake_venv         virtualenv holding tracelake (its bin/tracelake is run)
  tracelake_lake         lake root (default /data/tracelake/lake)
  tracelake_raw_<source> raw folder of itp, zeus, acme, zhejiang
  tracelake_profile      local (default), spark or connect
With profile `connect`, the Spark Connect URL comes from the Airflow connection
`tracelake_spark_connect` (host and port: sc://host:port).

Exit codes decide retries: 2 (bad input or configuration) and 3 (a critical quality rule) fail
at once, since a retry reads the same files; anything else is retried. Every ingest task uses the
pool `tracelake_lake` (create it with one slot) and tracelake's own lake lock, so one lake has one
writer at a time. An ingest is idempotent, so retries, backfills and manual re-runs are safe.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, BaseHook, Variable, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

DEFAULT_VENV = "/opt/tracelake/.venv"
DEFAULT_LAKE = "/data/tracelake/lake"
POOL = "tracelake_lake"
CONNECTION = "tracelake_spark_connect"
NO_RETRY_EXITS = {2: "bad input or configuration", 3: "a critical quality rule failed"}
CST = timedelta(hours=8)  # Zhejiang hour folders are China time
DEFAULTS = {"retries": 2, "retry_delay": timedelta(minutes=5), "execution_timeout": timedelta(hours=2), "pool": POOL}
START = datetime(2024, 5, 23, 16)  # 2024052400 CST, the first public Zhejiang hour

# what each source's ingest writes, as Assets the report DAG is scheduled by
WRITES = {
    "itp": ["bronze.itp_jobs", "bronze.elasticflow_jobs", "silver.jobs"],
    "zeus": ["bronze.zeus_train", "bronze.zeus_power", "gold.zeus_time_energy_to_accuracy"],
    "acme": ["bronze.acme_jobs", "bronze.acme_utilization", "silver.jobs"],
    "zhejiang": ["bronze.zj_port_counters", "silver.zj_port_rates", "gold.zj_iteration_network"],
}


def table_asset(table: str) -> Asset:
    return Asset(name=f"tracelake.{table}", uri=f"tracelake://lake/{table.replace('.', '/')}")


def _engine_args() -> list[str]:
    profile = Variable.get("tracelake_profile", default="local")
    args = ["--lake", Variable.get("tracelake_lake", default=DEFAULT_LAKE), "--profile", profile]
    if profile == "connect":
        conn = BaseHook.get_connection(CONNECTION)
        args += ["--connect-url", f"sc://{conn.host}:{conn.port or 15002}"]
    return args


def run_tracelake(*args: str) -> str:
    """Run the tracelake CLI of the configured virtualenv; exits 2 and 3 fail without retry."""
    venv = Path(Variable.get("tracelake_venv", default=DEFAULT_VENV))
    exe = venv / "bin" / "tracelake"
    if not exe.is_file():
        raise AirflowFailException(f"no tracelake at {exe}: set the Airflow Variable tracelake_venv to its virtualenv")
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "error"), "PYSPARK_PYTHON": str(venv / "bin" / "python")}
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env)
    print(done.stdout)
    print(done.stderr)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    if done.returncode in NO_RETRY_EXITS:
        raise AirflowFailException(f"{NO_RETRY_EXITS[done.returncode]}: {last}")
    if done.returncode != 0:
        raise AirflowException(f"tracelake exited {done.returncode}: {last}")
    return done.stdout


def cst_hour(data_interval_start: datetime) -> str:
    """The Zhejiang hour folder (YYYYMMDDHH, China time) of a run's UTC data interval."""
    return (data_interval_start + CST).strftime("%Y%m%d%H")


for source in ("itp", "zeus", "acme", "zhejiang"):
    with DAG(
        dag_id=f"tracelake_ingest_{source}",
        description=f"Ingest the {source} release folder into the tracelake lake",
        schedule="@daily",
        start_date=datetime(2025, 1, 1),
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULTS,
        tags=["tracelake"],
    ):
        @task(task_id="ingest", outlets=[table_asset(t) for t in WRITES[source]])
        def ingest(source: str = source) -> str:
            return run_tracelake("ingest", source, "--raw", Variable.get(f"tracelake_raw_{source}"), *_engine_args())

        ingest()


with DAG(
    dag_id="tracelake_zhejiang_hourly",
    description="Ingest the Zhejiang traffic hour of each run (tracelake ingest zhejiang --hours H)",
    schedule="@hourly",
    start_date=START,
    catchup=True,  # a backfill ingests one hour per run
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["tracelake", "zhejiang"],
):
    @task(task_id="ingest_hour", outlets=[table_asset(t) for t in WRITES["zhejiang"]])
    def ingest_hour(data_interval_start: datetime | None = None) -> str:
        hour = cst_hour(data_interval_start)
        return run_tracelake("ingest", "zhejiang", "--raw", Variable.get("tracelake_raw_zhejiang"),
                             "--hours", hour, *_engine_args())

    ingest_hour()


with DAG(
    dag_id="tracelake_report",
    description="Rebuild the HTML report when a table it reads changed",
    schedule=(table_asset("silver.jobs") | table_asset("gold.zeus_time_energy_to_accuracy")
              | table_asset("gold.zj_iteration_network")),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    default_args={**DEFAULTS, "pool": "default_pool"},  # reads only
    tags=["tracelake"],
):
    @task(task_id="report")
    def report() -> str:
        lake = Variable.get("tracelake_lake", default=DEFAULT_LAKE)
        return run_tracelake("report", "--out", f"{lake}/_report", *_engine_args())

    report()
