"""Airflow 2.x DAG: daily `tracelake ingest` for the itp and zeus sources.

Each task shells out to the `tracelake` CLI, so the worker needs the package installed
(pip install -e <checkout>, or the wheel plus TRACELAKE_HOME pointing at a copy of conf/,
schemas/ and expectations/). Paths and profile come from Airflow Variables: tracelake_raw_itp,
tracelake_raw_zeus, tracelake_lake and optionally tracelake_profile (default `local`).

Ingest is idempotent: each table changes by one Delta MERGE on its natural key, so re-running
a day leaves the data tables as they were (ops.quality_results only gains the new run's rows).
That makes retries and manual re-runs safe. The two sources run one after the other because
both write ops.quality_results, and serial commits avoid Delta write conflicts there.

Only Airflow's scheduler loads this file; the project's code and tests never import it.
"""

from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

SOURCES = ("itp", "zeus")

COMMAND = (
    "tracelake ingest {source}"
    " --raw {{{{ var.value.tracelake_raw_{source} }}}}"
    " --lake {{{{ var.value.tracelake_lake }}}}"
    " --profile {{{{ var.value.get('tracelake_profile', 'local') }}}}"
)

with DAG(
    dag_id="tracelake_ingest",
    description="Ingest GPU-cluster traces into the tracelake Delta lake",
    schedule="@daily",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    tags=["tracelake"],
) as dag:
    previous = None
    for source in SOURCES:
        task = BashOperator(task_id=f"ingest_{source}", bash_command=COMMAND.format(source=source))
        if previous is not None:
            previous >> task
        previous = task
