"""Python workers on another minor version than the driver (a cluster's workers installed
apart): Spark says so only inside a task's trace; tracelake says it in one line, exit 2."""

from __future__ import annotations

import sys

import pytest
from helpers import tracelake

SEREN_HEADER = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time"
SEREN_ROW = ("5778432,u5907,1,8,128,Other,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,"
             "2023-03-01 00:20:51+08:00,117,32,936.0")
# a worker that says it is Python 3.<minor + 1>: PySpark's worker compares its own version with the driver's
SAYS_ANOTHER = ("import collections, sys, runpy; "
                "sys.version_info = collections.namedtuple('v', 'major minor micro releaselevel serial')"
                "(3, {minor}, 0, 'final', 0); module = sys.argv[2]; sys.argv = sys.argv[:1]; "
                "runpy.run_module(module, run_name='__main__', alter_sys=True)")


@pytest.mark.e2e  # a classic Spark JVM of its own: in `bash dev e2e`
def test_workers_on_another_python_are_named_in_one_line(tmp_path):
    other = sys.version_info.minor + 1
    worker = tmp_path / "python"
    worker.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{SAYS_ANOTHER.format(minor=other)}" "$@"\n')
    worker.chmod(0o755)
    raw = tmp_path / "raw" / "data"
    (raw / "job_trace").mkdir(parents=True)
    (raw / "job_trace" / "trace_seren.csv").write_text(f"{SEREN_HEADER}\n{SEREN_ROW}\n")
    (raw / "utilization" / "seren").mkdir(parents=True)
    (raw / "utilization" / "seren" / "NODE_CPU_UTILIZATION.csv").write_text(
        "Time,10.0.0.2,10.0.0.3\n1689379200,0.5,0.4\n1689379215,0.6,0.3\n")
    done = tracelake("ingest", "acme", "--raw", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"),
                     env={"TRACELAKE_PROFILE": "spark", "PYSPARK_PYTHON": str(worker)})
    assert done.returncode == 2, done.stderr[-3000:]
    driver = f"3.{sys.version_info.minor}"
    assert done.stderr.splitlines()[-1] == (
        f"tracelake: error: the engine's Python workers run Python 3.{other}, this driver Python {driver}; "
        f"PySpark needs the same minor version on both: point PYSPARK_PYTHON (spark.pyspark.python under "
        f"spark-submit) at a Python {driver} with tracelake's packages on every worker")
