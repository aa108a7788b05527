"""`tracelake.open(lake)`: the read-only Python API, run as a notebook runs it (a fresh process):
answers, refusals with the rows unchanged, no engine log lines, nothing left in the working
folder, and the served engine used when `tracelake serve` runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from helpers import child_environ, itp_csv, job_id, tracelake_in_process, write_archive

SCRIPT = """
import json, sys
import tracelake

with tracelake.open(sys.argv[1]) as lake:
    said = {"tables": lake.tables()}
    said["total"] = lake.sql("SELECT count(*) AS n, sum(num_gpu) AS gpus FROM bronze.itp_jobs").rows()
    said["pandas"] = lake.table("bronze.itp_jobs").to_pandas()["num_gpu"].tolist()
    said["arrow"] = lake.sql("SELECT 1 AS a, 2 AS a").to_arrow().column_names
    said["history"] = lake.sql("DESCRIBE HISTORY bronze.itp_jobs").rows()[-1][0::2]
    for attempt in ("DELETE FROM bronze.itp_jobs WHERE num_gpu > 1", "SELECT * FROM csv.`/etc/passwd`"):
        try:
            lake.sql(attempt)
        except tracelake.errors.TracelakeError as exc:
            said.setdefault("refused", []).append(str(exc))
    try:
        lake.table("bronze.itp_job")
    except tracelake.errors.TracelakeError as exc:
        said["nearest"] = str(exc)
    said["after"] = lake.sql("SELECT count(*) FROM bronze.itp_jobs").rows()
print(json.dumps(said))
"""


def _lake(engine, tmp_path):
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1", f"{job_id(2)},2,600,2"])})
    assert tracelake_in_process(engine, "ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    return lake


def _notebook(lake, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in child_environ().items() if k != "RUST_LOG"}  # the API quiets the engine itself
    return subprocess.run([sys.executable, "-c", SCRIPT, str(lake)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_open_answers_refuses_writes_and_leaves_nothing_behind(engine, tmp_path):
    lake, work = _lake(engine, tmp_path), tmp_path / "notebook"
    work.mkdir()
    done = _notebook(lake, work)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)
    assert said["total"] == [[2, 3]] and sorted(said["pandas"]) == [1, 2] and said["arrow"] == ["a", "a"]
    assert said["history"] == [0, "CREATE TABLE"]
    assert "bronze.itp_jobs" in said["tables"] and "ops.quality_results" in said["tables"]
    assert said["refused"] == [
        "query is read-only: DELETE statements are refused (tables change only through `tracelake ingest` and "
        "`tracelake maintain`)",
        "query reads the lake's tables (layer.table) only: csv.`/etc/passwd` is refused (files and other lakes are "
        "not read through query)"]
    assert said["nearest"].startswith("no table bronze.itp_job in the lake; did you mean bronze.itp_jobs?")
    assert said["after"] == [[2]]  # the DELETE never ran
    assert done.stderr == ""  # no engine log lines
    assert os.listdir(work) == []  # no spark-warehouse/, no metastore_db/


@pytest.mark.e2e  # a serve of its own: in `bash dev e2e`
def test_open_uses_the_engine_tracelake_serve_runs(engine, tmp_path):
    from test_serve import SERVED, _serve

    lake = _lake(engine, tmp_path)
    process, record = _serve(lake)
    try:
        done = _notebook(lake, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout)["total"] == [[2, 3]]
        assert done.stderr.strip() == SERVED.format(pid=record["pid"])
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
