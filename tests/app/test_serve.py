"""`tracelake serve`: commands on a served lake use its engine, and start their own once it is gone."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest
from helpers import itp_csv, job_id, rows, tracelake, tracelake_in_process, write_archive

SERVED = "tracelake: using the engine `tracelake serve` runs for this lake (pid {pid})"


def _serve(lake) -> tuple[subprocess.Popen, dict]:
    """`tracelake serve` as a process of its own, once its record is written."""
    process = subprocess.Popen([sys.executable, "-m", "tracelake", "serve", "--lake", str(lake)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "RUST_LOG": "error"})
    record = lake / "_serve" / "engine.json"
    deadline = time.monotonic() + 120
    while not record.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "serve wrote no record in 120 s"
        time.sleep(0.1)
    return process, json.loads(record.read_text())


def _lake(engine, tmp_path):
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1", f"{job_id(2)},2,600,2"])})
    assert tracelake_in_process(engine, "ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    return lake


QUERY = "SELECT count(*) AS n, sum(num_gpu) AS gpus FROM bronze.itp_jobs"


@pytest.mark.e2e  # a quarter of a minute or more: in `bash dev e2e`, so `bash dev test` stays within 12 minutes
def test_a_query_uses_the_served_engine_and_falls_back_once_it_is_killed(engine, tmp_path):
    lake = _lake(engine, tmp_path)
    process, record = _serve(lake)
    try:
        assert record["pid"] == process.pid and record["lake"] == str(lake)
        folder, file = os.stat(lake / "_serve"), os.stat(lake / "_serve" / "engine.json")
        assert (stat.S_IMODE(folder.st_mode), stat.S_IMODE(file.st_mode)) == (0o700, 0o600)
        assert stat.S_IMODE(os.stat(os.path.dirname(record["socket"])).st_mode) == 0o700

        used = tracelake("query", QUERY, "--lake", str(lake))
        assert (used.returncode, rows(used.stdout)) == (0, [["n", "gpus"], ["2", "3"]])
        assert used.stderr.strip() == SERVED.format(pid=process.pid)
        tables = tracelake("tables", "--lake", str(lake))
        assert tables.returncode == 0 and SERVED.format(pid=process.pid) in tables.stderr
        again = tracelake("serve", "--lake", str(lake))  # one serve per lake
        assert (again.returncode, again.stderr.strip().splitlines()[-1]) == (
            2, f"tracelake: error: {lake} is already served (pid {process.pid}); stop that one first")
    finally:
        process.kill()  # -9: no chance to remove its record
        process.wait()
    assert (lake / "_serve" / "engine.json").exists()
    alone = tracelake("query", QUERY, "--lake", str(lake))
    assert (alone.returncode, rows(alone.stdout)) == (0, [["n", "gpus"], ["2", "3"]])
    assert alone.stderr.strip() == (f"tracelake: the engine recorded in {lake / '_serve' / 'engine.json'} is gone: "
                                    "record removed; starting one")
    assert not (lake / "_serve").exists()
    quiet = tracelake("query", QUERY, "--lake", str(lake))
    assert (quiet.returncode, quiet.stderr) == (0, "")


def test_sigterm_stops_serve_and_removes_its_record(engine, tmp_path):
    lake = _lake(engine, tmp_path)
    process, record = _serve(lake)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert err.strip().splitlines()[-1] == f"tracelake: stopped serving {lake}"
    assert not (lake / "_serve").exists()
    assert not os.path.exists(record["socket"])


def test_a_record_that_is_not_private_is_not_used(engine, tmp_path):
    lake = _lake(engine, tmp_path)
    (lake / "_serve").mkdir(mode=0o755)
    os.chmod(lake / "_serve", 0o755)
    (lake / "_serve" / "engine.json").write_text(json.dumps({"pid": os.getpid(), "socket": "/nowhere", "lake": str(lake)}))
    done = tracelake("query", QUERY, "--lake", str(lake))
    assert (done.returncode, done.stderr) == (0, "")  # ignored, not removed: it may be someone else's
    assert (lake / "_serve" / "engine.json").exists()


@pytest.mark.e2e  # a serve of its own: in `bash dev e2e`
def test_a_query_the_serve_answers_loads_no_engine_library_in_the_client(engine, tmp_path):
    lake = _lake(engine, tmp_path)
    process, record = _serve(lake)
    try:
        assert stat.S_IMODE(os.stat(record["answers"]).st_mode) == 0o600
        asked = subprocess.run([sys.executable, "-X", "importtime", "-m", "tracelake", "query", QUERY, "--lake",
                                str(lake)], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "RUST_LOG": "error"})
        assert (asked.returncode, rows(asked.stdout)) == (0, [["n", "gpus"], ["2", "3"]])
        imported = {line.split("|")[-1].strip().split(".")[0] for line in asked.stderr.splitlines()
                    if line.startswith("import time:")}
        assert {"pyspark", "pandas", "pyarrow", "grpc"}.isdisjoint(imported), sorted(imported)
        said = [line for line in asked.stderr.splitlines() if not line.startswith("import time:")]
        assert said == [SERVED.format(pid=process.pid)]
        refused = tracelake("query", "DELETE FROM bronze.itp_jobs", "--lake", str(lake))
        assert (refused.returncode, refused.stderr.strip().splitlines()[-1]) == (
            2, "tracelake: error: query is read-only: DELETE statements are refused (tables change only through "
               "`tracelake ingest` and `tracelake maintain`)")
        wide = tracelake("query", "SELECT id FROM range(100)", "--lake", str(lake), "--format", "table", "--limit", "2")
        assert wide.returncode == 0 and wide.stdout.splitlines()[-1] == "(100 rows, 2 shown (--limit / .maxrows for more))"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert not os.path.exists(record["answers"])


SLOW = "SELECT sum(id % 13) AS s FROM range(50000000000)"  # minutes of work on 2 cores


@pytest.mark.e2e  # a serve of its own per case: in `bash dev e2e`
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_command_whose_serve_stops_mid_query_exits_2_naming_it(engine, tmp_path, stop):
    """The client of a serve that stops (SIGTERM as documented, or -9) under a running query
    sees it within seconds, exit 2 naming the serve's pid; it used to wait on the client's
    retries until something killed it."""
    lake = _lake(engine, tmp_path)
    process, _record = _serve(lake)
    client = subprocess.Popen([sys.executable, "-m", "tracelake", "sql", "--lake", str(lake)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RUST_LOG": "error"})
    try:
        client.stdin.write(SLOW + ";\n")
        client.stdin.flush()
        time.sleep(3)  # the query is under way
        assert client.poll() is None
        process.send_signal(stop)
        process.wait(timeout=60)
        stopped = time.monotonic()
        out, err = client.communicate(timeout=60)
        waited = time.monotonic() - stopped
    finally:
        for proc in (client, process):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert client.returncode == 2, err
    assert err.strip().splitlines()[-1] == (
        f"tracelake: error: the served engine (pid {process.pid}) stopped while this command used it; "
        "run the command again (it starts an engine of its own)")
    print(f"\nclient ended {waited:.1f} s after its serve")  # seconds, not minutes: the bound is the test's timeout


NOTEBOOK = """
import sys, tracelake
lake = tracelake.open(sys.argv[1])
print("opened", flush=True)
for _ in range(2):  # the query in flight when the serve stops, then one after
    try:
        lake.sql(sys.argv[2]).rows()
    except tracelake.errors.TracelakeError as exc:
        print(exc, flush=True)
print("still running", flush=True)
"""


@pytest.mark.e2e  # a serve of its own: in `bash dev e2e`
def test_a_notebook_whose_serve_stops_mid_query_gets_an_error_and_keeps_running(engine, tmp_path):
    """tracelake.open attached to a serve that stops: the query in flight and the next one end
    in a TracelakeError naming the serve within seconds, and the notebook's process goes on (a
    command exits 2; a notebook's kernel must not)."""
    lake = _lake(engine, tmp_path)
    process, _record = _serve(lake)
    client = subprocess.Popen([sys.executable, "-c", NOTEBOOK, str(lake), SLOW], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "RUST_LOG": "error"})
    try:
        assert client.stdout.readline() == "opened\n"
        time.sleep(3)  # the query is under way
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        out, err = client.communicate(timeout=60)
    finally:
        for proc in (client, process):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    said = (f"the served engine (pid {process.pid}) stopped while this lake used it; open the lake again "
            "(it starts an engine of its own)")
    assert (client.returncode, out.splitlines()) == (0, [said, said, "still running"]), err[-3000:]
