"""Airflow 3 DAGs for tracelake: one ingest DAG per source, an hourly Zhejiang DAG that ingests
each closed traffic hour of the release, and a report DAG scheduled by the tables it reads.

How a worker runs tracelake: the CLI of a separate virtualenv, named by the Airflow Variable
`tracelake_venv` (default /opt/tracelake/.venv); or, with `tracelake_spark_submit` set, the
checkout's deploy/spark-submit.sh against the Spark master `tracelake_spark_master`. Airflow and
tracelake never share an environment: Airflow's Spark provider pins another pyspark.

Variables, read when a task runs (all optional but the raw folders of the sources you schedule):
  tracelake_venv          virtualenv holding tracelake (its bin/tracelake is run)
  tracelake_lake          lake root (default /data/tracelake/lake)
  tracelake_raw_<source>  raw folder of itp, zeus, acme, zhejiang
  tracelake_profile       local (default), spark or connect
  tracelake_spark_submit  path of deploy/spark-submit.sh: ingests go through spark-submit
  tracelake_spark_master  its master, e.g. spark://head:7077 (default local[*])
With profile `connect`, the Spark Connect URL comes from the Airflow connection
`tracelake_spark_connect` (host and port: sc://host:port).

The hourly DAG's span, read where DAGs are parsed (the dag-processor's environment), as Zhejiang
hour folder names (YYYYMMDDHH, China time):
  TRACELAKE_ZJ_FIRST_HOUR  first hour of the release (default 2024050100)
  TRACELAKE_ZJ_LAST_HOUR   last hour (default 2024053123: May 2024, 744 hourly runs); `live` for a
                           feed that goes on: no end, and an hour not there yet is retried

Exit codes decide what a task does: 2 (bad input or configuration) and 3 (a critical quality
rule) fail at once, since a retry reads the same files; 4 (the hour has no folder) skips the
hour when the release is finished and retries it on a live feed; anything else is retried.
Every ingest task uses the pool `tracelake_lake` (create it with one slot) and tracelake's own
lake lock, so one lake has one writer at a time. An ingest is idempotent, so retries, backfills
and manual re-runs are safe: a re-run of an ingested hour commits nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from airflow.sdk import DAG, Asset, BaseHook, CronDataIntervalTimetable, Variable, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

DEFAULT_VENV = "/opt/tracelake/.venv"
DEFAULT_LAKE = "/data/tracelake/lake"
POOL = "tracelake_lake"
CONNECTION = "tracelake_spark_connect"
NO_RETRY_EXITS = {2: "bad input or configuration", 3: "a critical quality rule failed"}
NO_HOUR_FOLDER = 4
CST = timezone(timedelta(hours=8))  # Zhejiang hour folders are China time
HOUR = timedelta(hours=1)
DEFAULTS = {"retries": 2, "retry_delay": timedelta(minutes=5), "execution_timeout": timedelta(hours=2), "pool": POOL}

# what each source's ingest writes, as Assets the report DAG is scheduled by
WRITES = {
    "itp": ["bronze.itp_jobs", "bronze.elasticflow_jobs", "silver.jobs"],
    "zeus": ["bronze.zeus_train", "bronze.zeus_power", "gold.zeus_time_energy_to_accuracy"],
    "acme": ["bronze.acme_jobs", "bronze.acme_utilization", "silver.jobs"],
    "zhejiang": ["bronze.zj_port_counters", "silver.zj_port_rates", "gold.zj_iteration_network"],
    "zhejiang_tasks": ["bronze.zj_topology", "bronze.zj_task_log_events", "gold.zj_iteration_network"],
}


def table_asset(table: str) -> Asset:
    return Asset(name=f"tracelake.{table}", uri=f"tracelake://lake/{table.replace('.', '/')}")


def folder_hour(name: str) -> datetime:
    """The UTC start of the Zhejiang hour folder `name` (YYYYMMDDHH, China time)."""
    return datetime.strptime(name, "%Y%m%d%H").replace(tzinfo=CST).astimezone(UTC)


def closed_hour(data_interval_end: datetime) -> str:
    """The hour folder of the hour that ended at (or last before) a run's interval end: a run
    ingests an hour only once every poll of it can have been written, never the hour beginning."""
    end = data_interval_end.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return (end - HOUR).astimezone(CST).strftime("%Y%m%d%H")


def _engine_args() -> list[str]:
    profile = Variable.get("tracelake_profile", default="local")
    args = ["--lake", Variable.get("tracelake_lake", default=DEFAULT_LAKE), "--profile", profile]
    if profile == "connect":
        conn = BaseHook.get_connection(CONNECTION)
        args += ["--connect-url", f"sc://{conn.host}:{conn.port or 15002}"]
    return args


def _ingest_command(source: str, *flags: str) -> tuple[list[str], dict[str, str]]:
    """The ingest's command line and extra environment: the CLI of the virtualenv, or spark-submit."""
    venv = Path(Variable.get("tracelake_venv", default=DEFAULT_VENV))
    raw = Variable.get(f"tracelake_raw_{source}")
    env = {"PYSPARK_PYTHON": str(venv / "bin" / "python")}
    submit = Variable.get("tracelake_spark_submit", default="")
    if submit:
        lake = Variable.get("tracelake_lake", default=DEFAULT_LAKE)
        env["SPARK_MASTER"] = Variable.get("tracelake_spark_master", default="local[*]")
        return ["bash", submit, source, raw, lake, *flags], env
    exe = venv / "bin" / "tracelake"
    if not exe.is_file():
        raise AirflowFailException(f"no tracelake at {exe}: set the Airflow Variable tracelake_venv to its virtualenv")
    return [str(exe), "ingest", source, "--raw", raw, *flags, *_engine_args()], env


def run_tracelake(command: list[str], extra_env: dict[str, str], skip_absent_hour: bool = False) -> str:
    """Run tracelake with its progress lines (stderr) in the task log as they come; returns its
    stdout. Exits 2 and 3 fail without retry; 4 (no hour folder) skips when `skip_absent_hour`."""
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "error"), **extra_env}
    last = ""
    print("running", shlex.join(command), flush=True)
    with tempfile.TemporaryFile(mode="w+") as out:
        with subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True, env=env) as proc:
            for line in proc.stderr:
                print(line, end="", flush=True)
                last = line.strip() or last
        out.seek(0)
        stdout = out.read()
    code = proc.returncode
    if code == NO_HOUR_FOLDER and skip_absent_hour:
        raise AirflowSkipException(f"the release has no such hour: {last}")
    if code in NO_RETRY_EXITS:
        raise AirflowFailException(f"{NO_RETRY_EXITS[code]}: {last}")
    if code != 0:
        raise AirflowException(f"tracelake exited {code}: {last or 'no message'}")
    return stdout


def ingest_result(stdout: str) -> dict:
    """The XCom of an ingest: its rows and each table's Delta version, from `--json`."""
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise AirflowException("tracelake printed no JSON summary")
    run = json.loads(lines[-1])
    return {**{key: run[key] for key in ("hours", "read", "kept", "quarantined")},
            "versions": {t["table"]: t["version"] for t in run["tables"]}}


def ingest(source: str, *flags: str, skip_absent_hour: bool = False) -> dict:
    command, env = _ingest_command(source, *flags, "--json")
    return ingest_result(run_tracelake(command, env, skip_absent_hour))


for source in ("itp", "zeus", "acme"):
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
        @task(task_id="ingest", multiple_outputs=False, outlets=[table_asset(t) for t in WRITES[source]])
        def ingest_source(source: str = source) -> dict:
            return ingest(source)

        ingest_source()


with DAG(
    dag_id="tracelake_ingest_zhejiang",
    description="Ingest the Zhejiang workbook and task logs (taskinfo/); traffic hours are the hourly DAG's",
    schedule="@daily",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["tracelake", "zhejiang"],
):
    @task(task_id="ingest_workbook_and_tasks", multiple_outputs=False, outlets=[table_asset(t) for t in WRITES["zhejiang_tasks"]])
    def ingest_workbook_and_tasks() -> dict:
        return ingest("zhejiang", "--hours", "none")  # unchanged files: no commit

    ingest_workbook_and_tasks()


FIRST_HOUR = os.environ.get("TRACELAKE_ZJ_FIRST_HOUR", "2024050100")
LAST_HOUR = os.environ.get("TRACELAKE_ZJ_LAST_HOUR", "2024053123")
LIVE = LAST_HOUR == "live"

with DAG(
    dag_id="tracelake_zhejiang_hourly",
    description="Ingest each closed Zhejiang traffic hour (tracelake ingest zhejiang --hours H)",
    # each run's data interval is one clock hour, and the run starts once that hour has ended:
    # Airflow 3 reads a plain cron ("@hourly") as a CronTriggerTimetable, whose run has an empty
    # interval at its own time, the hour that is only beginning
    schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
    start_date=folder_hour(FIRST_HOUR),
    end_date=None if LIVE else folder_hour(LAST_HOUR),  # the last interval starts at the last hour
    catchup=True,  # every hour of the span, in order, one run at a time
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["tracelake", "zhejiang"],
):
    @task(task_id="ingest_hour", multiple_outputs=False, outlets=[table_asset(t) for t in WRITES["zhejiang"]])
    def ingest_hour(data_interval_end: datetime | None = None) -> dict:
        return ingest("zhejiang", "--hours", closed_hour(data_interval_end), skip_absent_hour=not LIVE)

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
    def report() -> None:
        venv = Path(Variable.get("tracelake_venv", default=DEFAULT_VENV))
        lake = Variable.get("tracelake_lake", default=DEFAULT_LAKE)
        run_tracelake([str(venv / "bin" / "tracelake"), "report", "--out", f"{lake}/_report", *_engine_args()],
                      {"PYSPARK_PYTHON": str(venv / "bin" / "python")})

    report()
