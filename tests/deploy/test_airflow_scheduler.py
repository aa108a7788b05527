"""The hourly Zhejiang DAG under a real Airflow scheduler, not `dags test`: the api-server (its
execution API only, which task processes report to), the dag-processor and the scheduler with
the LocalExecutor, each in its own process group on 127.0.0.1, stopped by PID.

The metadata database is SQLite in the test's AIRFLOW_HOME: Airflow 3 runs the LocalExecutor on
it, and with one writer per lake (max_active_runs=1, a one-slot pool) no two tasks write at once,
so SQLite's single writer costs nothing here; production wants PostgreSQL (deploy/README.md).
The execution API answers only requests signed with this test's random JWT secret.

The release is a generated one of three hours; the DAG's span is four, so its last hour has no
folder and is skipped as the release's missing hour."""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from airflowkit import airflow_env, airflow_venv
from deltalake import DeltaTable
from deploykit import free_port, stop_process_group, tracelake, wait_listening

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

DAG_ID = "tracelake_zhejiang_hourly"
HOURS = ["2024052400", "2024052401", "2024052402"]  # generated; the span's 2024052403 has none
LOGICAL = ["2024-05-23T16:00:00", "2024-05-23T17:00:00", "2024-05-23T18:00:00",
           "2024-05-23T19:00:00"]  # each run's logical date (UTC): the start of its hour, which it runs after
WAIT_S = 900


@contextlib.contextmanager
def airflow_running(venv: Path, env: dict[str, str], logs: Path) -> Iterator[None]:
    airflow = str(venv / "bin" / "airflow")
    port = int(env["TEST_API_PORT"])
    procs: list[subprocess.Popen] = []
    try:
        for name, args in (("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(port), "--apps",
                                           "execution", "--workers", "1"]),
                           ("dag-processor", ["dag-processor"]), ("scheduler", ["scheduler"])):
            with (logs / f"{name}.log").open("wb") as out:
                procs.append(subprocess.Popen([airflow, *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))
            if name == "api-server":
                wait_listening(procs[-1], port, logs / f"{name}.log", name, 120)
        yield
    finally:
        for proc in reversed(procs):
            stop_process_group(proc, timeout=30)


def _rows(db: Path, sql: str, *args) -> list[tuple]:
    for _ in range(20):  # the scheduler may hold the write lock for a moment
        try:
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
                return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError:
            time.sleep(0.5)
    raise AssertionError(f"the metadata DB stayed locked: {sql}")


def _wait_runs(db: Path, logs: Path, count: int, where: str = "1=1") -> list[tuple]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        runs = _rows(db, f"SELECT run_id, logical_date, state FROM dag_run WHERE dag_id = ? AND {where} "
                     "ORDER BY logical_date", DAG_ID)
        if len(runs) >= count and all(state in ("success", "failed") for _, _, state in runs):
            return runs
        time.sleep(3)
    tail = "\n".join((logs / f"{n}.log").read_text(errors="replace")[-1500:] for n in ("scheduler", "dag-processor"))
    raise AssertionError(f"{count} runs did not end within {WAIT_S} s: {runs}\n{tail}")


def _tasks(db: Path, where: str = "1=1") -> list[tuple]:
    return _rows(db, "SELECT r.logical_date, t.state, t.start_date, t.end_date, t.try_number FROM task_instance t "
                 f"JOIN dag_run r ON r.run_id = t.run_id AND r.dag_id = t.dag_id WHERE t.dag_id = ? AND {where} "
                 "ORDER BY r.logical_date", DAG_ID)


def _iso(text: str) -> str:
    return datetime.fromisoformat(text).replace(tzinfo=None).isoformat()


def _versions(lake: Path) -> dict[str, int]:
    return {f"{layer.name}.{t.name}": DeltaTable(str(t)).version()
            for layer in sorted(lake.iterdir()) if layer.is_dir() and not layer.name.startswith("_")
            for t in sorted(layer.iterdir()) if (t / "_delta_log").is_dir()}


def test_scheduler_ingests_each_closed_hour_once_in_order_and_a_backfill_commits_nothing(tmp_path):
    venv = airflow_venv()
    raw, lake, home, logs = tmp_path / "zj", tmp_path / "lake", tmp_path / "airflow", tmp_path / "logs"
    (home / "config").mkdir(parents=True)
    logs.mkdir()
    # SQLite has one writer: each connection waits for the lock up to a minute (pysqlite's default
    # is 5 s, which a CLI command meeting the scheduler's writes outlasts); Airflow puts
    # AIRFLOW_HOME/config on sys.path before it connects
    (home / "config" / "sqlite_wait.py").write_text('CONNECT_ARGS = {"timeout": 60}\n')
    made = tracelake("generate", "zhejiang", "--out", str(raw), "--hours", "3", "--tasks", "1", "--scale", "0.1",
                     "--start", HOURS[0])
    assert made.returncode == 0, made.stderr[-2000:]
    port = free_port()
    env = airflow_env(
        home, TEST_API_PORT=str(port),
        AIRFLOW__CORE__EXECUTOR="LocalExecutor", AIRFLOW__CORE__PARALLELISM="2",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__API__BASE_URL=f"http://127.0.0.1:{port}", AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
        AIRFLOW__API__SECRET_KEY=secrets.token_hex(32), AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS="sqlite_wait.CONNECT_ARGS",
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5", AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
        AIRFLOW_VAR_TRACELAKE_RAW_ZHEJIANG=str(raw), AIRFLOW_VAR_TRACELAKE_LAKE=str(lake),
        TRACELAKE_ZJ_FIRST_HOUR=HOURS[0], TRACELAKE_ZJ_LAST_HOUR="2024052403",
    )
    airflow = str(venv / "bin" / "airflow")

    def cli(*args: str) -> str:
        done = subprocess.run([airflow, *args], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        return done.stdout

    cli("db", "migrate")
    cli("pools", "set", "tracelake_lake", "1", "one writer per lake")
    db = home / "airflow.db"
    with airflow_running(venv, env, logs):
        deadline = time.monotonic() + 300
        while not _rows(db, "SELECT dag_id FROM dag WHERE dag_id = ?", DAG_ID):
            assert time.monotonic() < deadline, (logs / "dag-processor.log").read_text(errors="replace")[-3000:]
            time.sleep(2)
        cli("dags", "unpause", DAG_ID)
        runs = _wait_runs(db, logs, 4)
        # the bounded span: exactly its four hours, no run after the release's end
        assert [_iso(r[1]) for r in runs] == LOGICAL and {r[2] for r in runs} == {"success"}
        tasks = _tasks(db)
        assert [t[1] for t in tasks] == ["success", "success", "success", "skipped"]
        assert all(earlier[3] <= later[2] for earlier, later in zip(tasks, tasks[1:]))  # one hour at a time
        assert {t[4] for t in tasks} == {1}  # no retry

        counters = DeltaTable(str(lake / "bronze" / "zj_port_counters"))
        # each hour landed once, in order: one commit per hour, each adding only its own partition
        hours_by_version = [sorted(set(DeltaTable(str(lake / "bronze" / "zj_port_counters"), version=v)
                                       .to_pyarrow_table(columns=["hour_cst"]).column("hour_cst").to_pylist()))
                            for v in range(1, counters.version() + 1)]
        assert hours_by_version == [HOURS[:1], HOURS[:2], HOURS]
        for hour in HOURS:
            lines = sum(len(p.read_text(encoding="utf-8").splitlines()) - 1
                        for p in (raw / "trafficinfo" / hour).glob("*/*.csv"))
            stored = counters.to_pyarrow_table(columns=["hour_cst"], filters=[("hour_cst", "=", hour)]).num_rows
            assert stored == lines

        # XCom holds the run in a few numbers, not the summary's text
        values = [json.loads(v) for (v,) in _rows(db, "SELECT value FROM xcom WHERE dag_id = ? AND "
                                                  "task_id = 'ingest_hour' AND key = 'return_value' ORDER BY dag_run_id", DAG_ID)]
        assert [v["hours"] for v in values] == HOURS
        assert all(v["quarantined"] == 0 and v["read"] == v["kept"] > 0 for v in values)
        assert values[-1]["versions"]["bronze.zj_port_counters"] == counters.version()

        # the progress lines reached the task log while the ingest ran, not all when it ended
        logs_by_hour = {}
        for path in (home / "logs").glob(f"dag_id={DAG_ID}/*/task_id=ingest_hour/attempt=1.log"):
            text = path.read_text()
            logs_by_hour[next(h for h in [*HOURS, "2024052403"] if f"--hours {h}" in text or f"folder {h}" in text)] = text
        stamps = [datetime.fromisoformat(json.loads(line)["timestamp"].replace("Z", "+00:00"))
                  for line in logs_by_hour[HOURS[0]].splitlines() if "tracelake: " in line and line.startswith("{")]
        assert len(stamps) >= 5 and (stamps[-1] - stamps[0]).total_seconds() >= 1, stamps
        assert "the release has no such hour" in logs_by_hour["2024052403"]
        assert "no hour folder 2024052403" in logs_by_hour["2024052403"]

    # a backfill over two ingested hours runs them again, one at a time, and commits nothing. It is
    # created while the scheduler is stopped: SQLite's one writer made the CLI's transaction fail
    # now and then beside a running scheduler, whatever the busy timeout
    before = _versions(lake)
    cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", LOGICAL[1], "--to-date", LOGICAL[2],
        "--reprocess-behavior", "completed", "--max-active-runs", "1")
    with airflow_running(venv, env, logs):
        again = _wait_runs(db, logs, 2, "backfill_id IS NOT NULL")
        assert [_iso(r[1]) for r in again] == LOGICAL[1:3] and {r[2] for r in again} == {"success"}
        after = _versions(lake)
        # every table as it was; the rules' log alone records each run (one commit per run)
        assert after["ops.quality_results"] == before.pop("ops.quality_results") + 2
        assert {k: v for k, v in after.items() if k != "ops.quality_results"} == before
