"""Faults around the inputs: concurrent writers, re-runs, odd lake paths, leftovers of killed
runs, Ctrl-C and kill -9. All through the CLI in its own processes, as a user meets them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus import good_itp
from deltalake import DeltaTable
from helpers import ITP_HEADER, child_environ, tracelake, write_archive
from test_corpus import lake_tables

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

CLI = [sys.executable, "-m", "tracelake"]
ENV = {**child_environ(), "RUST_LOG": "error"}


def _itp_raw(folder: Path, n: int) -> Path:
    write_archive(folder / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(n)])})
    return folder


def _versions(lake: Path) -> dict[str, int]:
    return {name: table.version() for name, table in lake_tables(lake).items()}


def test_two_concurrent_ingests_of_one_source_never_duplicate(tmp_path):
    raw, lake = _itp_raw(tmp_path / "raw", 60), tmp_path / "lake"
    args = [*CLI, "ingest", "itp", "--raw", str(raw), "--lake", str(lake)]
    both = [subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in both]
    # on failure, each run's last lines in full (a repr of the pair would be cut before its error)
    assert [rc for rc, _ in outcomes] == [0, 0], "\n\n".join("\n".join(err.splitlines()[-12:]) for _, err in outcomes)
    jobs = DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table()
    assert (jobs.num_rows, len(set(jobs.column("job_id").to_pylist()))) == (60, 60)
    again = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert again.returncode == 0, again.stderr


def test_maintain_queues_behind_a_run_writing_the_lake(tmp_path):
    """optimize/vacuum take the write lock an ingest holds: their commits no longer win a race
    that stopped the ingest between its bronze and silver commits."""
    import fcntl

    raw, lake = _itp_raw(tmp_path / "raw", 5), tmp_path / "lake"
    assert tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    with open(lake / "_locks" / "write.lock", "a+") as held:  # as a running ingest holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("pid 4242")
        held.flush()
        maintain = subprocess.Popen([*CLI, "maintain", "bronze.itp_jobs", "--optimize", "--lake", str(lake)],
                                    env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        waited = maintain.stderr.readline()
        assert waited == "tracelake: waiting for another run (ingest or maintain) writing this lake (pid 4242)\n"
        assert maintain.poll() is None  # still queued while the lock is held
        fcntl.flock(held, fcntl.LOCK_UN)
    assert maintain.wait(timeout=120) == 0, maintain.stderr.read()
    assert maintain.stdout.read().splitlines()[0] == "table,version,last_operation,files_before,files_after"


def test_an_identical_rerun_writes_no_new_version_of_any_table(tmp_path):
    raw, lake = _itp_raw(tmp_path / "raw", 5), tmp_path / "lake"
    (raw / "raw-traces.tar.gz").write_bytes((raw / "raw-traces.tar.gz").read_bytes())
    first = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert first.returncode == 0, first.stderr
    before = _versions(lake)
    second = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert second.returncode == 0, second.stderr
    after = _versions(lake)
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {"ops/quality_results"}  # the run's own record is the only new version


@pytest.mark.parametrize("folder", ["a lake", "100%lake", "lake#1", "湖 lake"])
def test_lake_paths_with_spaces_percent_hash_and_non_ascii(tmp_path, folder):
    raw, lake = _itp_raw(tmp_path / "raw", 4), tmp_path / folder
    done = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["raw", folder])  # no encoded sibling folders
    assert DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows == 4
    counted = tracelake("query", "SELECT count(*) AS n FROM bronze.itp_jobs", "--lake", str(lake))
    assert counted.stdout.split() == ["n", "4"], counted.stderr


def test_stale_staging_of_a_killed_run_is_removed(tmp_path):
    raw, lake = _itp_raw(tmp_path / "raw", 2), tmp_path / "lake"
    stale = lake / "_staging" / "20240101T000000Z-deadbeef"
    (stale / "leftover").mkdir(parents=True)
    healing = lake / "_staging" / "heal-0a1b2c3d"  # a duplicate-key heal killed midway
    healing.mkdir()
    (healing / "part-00000.parquet").write_bytes(b"PAR1")
    other = lake / "_staging" / "keep-me.txt"  # not a run folder: left alone
    other.write_text("x")
    done = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (lake / "_staging").iterdir()) == ["keep-me.txt"]


def test_a_table_folder_with_an_empty_delta_log_is_named_and_skipped(tmp_path):
    raw, lake = _itp_raw(tmp_path / "raw", 3), tmp_path / "lake"
    assert tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    (lake / "bronze" / "broken" / "_delta_log").mkdir(parents=True)
    listed = tracelake("tables", "--lake", str(lake))
    assert listed.returncode == 0, listed.stderr
    assert "bronze.broken is not a table" in listed.stderr
    names = [line.split(",")[0] for line in listed.stdout.splitlines()[1:]]
    assert "bronze.itp_jobs" in names and "bronze.broken" not in names
    counted = tracelake("query", "SELECT count(*) AS n FROM bronze.itp_jobs", "--lake", str(lake))
    assert counted.stdout.split() == ["n", "3"]


def _start_ingest(raw: Path, lake: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "ingest", "itp", "--raw", str(raw), "--lake", str(lake)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_first_table(lake: Path, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if list((lake / "bronze").glob("*/_delta_log/*.json")):
            return
        time.sleep(0.05)


def test_ctrl_c_ends_a_run_within_seconds_leaving_committed_versions(tmp_path):
    raw, lake = _itp_raw(tmp_path / "raw", 3000), tmp_path / "lake"
    process = _start_ingest(raw, lake)
    _wait_for_first_table(lake, process)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    rc = process.wait(timeout=30)
    assert time.monotonic() - started < 10
    stderr = process.stderr.read()
    assert rc in (0, 130), stderr  # 0 only if the run had just finished
    assert rc == 0 or stderr.rstrip().endswith("tracelake: interrupted; tables keep their last committed versions")
    for table in lake_tables(lake).values():
        table.to_pyarrow_table()
    rerun = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert rerun.returncode == 0, rerun.stderr
    assert DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows == 3000


def _handlers_installed(process: subprocess.Popen, timeout_s: float = 60) -> None:
    """Wait until the CLI caught SIGTERM (its first line: Python catches SIGINT by itself, never
    SIGTERM), so a signal sent now meets our handler, not the interpreter's start-up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        status = Path(f"/proc/{process.pid}/status").read_text()
        caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("delay_s", [0.0, 0.1, 0.3, 0.6, 1.2])
def test_a_signal_at_any_moment_is_one_line(tmp_path, signum, delay_s):
    """From the CLI's first line on (imports, parsing, engine start, the query), Ctrl-C and
    SIGTERM print one line and exit 130 / 143; or the query had already answered."""
    from tracelake.app.signals import CODES, LINES

    process = subprocess.Popen([*CLI, "query", "SELECT 40 + 2 AS answer", "--lake", str(tmp_path / "lake")],
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _handlers_installed(process)
    time.sleep(delay_s)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    if process.returncode == 0:
        assert (out, err) == ("answer\n42\n", "")
    else:
        assert (process.returncode, err) == (CODES[signum], LINES[signum] + "\n")


def test_sigterm_mid_ingest_is_ctrl_c_one_line_and_staging_removed(tmp_path):
    raw, lake = _itp_raw(tmp_path / "raw", 3000), tmp_path / "lake"
    process = _start_ingest(raw, lake)
    _wait_for_first_table(lake, process)
    process.send_signal(signal.SIGTERM)
    rc = process.wait(timeout=30)
    stderr = process.stderr.read()
    assert rc in (0, 143), stderr  # 0 only if the run had just finished
    assert "Traceback" not in stderr
    if rc == 143:
        assert stderr.rstrip().splitlines()[-1] == "tracelake: terminated; tables keep their last committed versions"
    assert [p.name for p in (lake / "_staging").iterdir()] == []  # the run's staging folder went with it
    for table in lake_tables(lake).values():
        table.to_pyarrow_table()
    rerun = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert rerun.returncode == 0, rerun.stderr
    assert DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows == 3000


@pytest.mark.parametrize("delay_s", [0.0, 0.5, 1.5])
def test_kill_9_mid_ingest_leaves_readable_tables_and_a_rerun_converges(tmp_path, delay_s):
    raw, lake, clean = _itp_raw(tmp_path / "raw", 3000), tmp_path / "lake", tmp_path / "clean"
    process = _start_ingest(raw, lake)
    _wait_for_first_table(lake, process)
    time.sleep(delay_s)
    process.kill()
    process.wait(timeout=30)
    for table in lake_tables(lake).values():
        table.to_pyarrow_table()  # every table is all-old or all-new
    assert tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    assert tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(clean)).returncode == 0
    for name in ("bronze/itp_jobs", "silver/jobs", "gold/jobs_duration_comparison"):
        got = DeltaTable(str(lake / name)).to_pyarrow_table().drop_columns(
            [c for c in ("ingest_run_id", "ingest_ts") if c in DeltaTable(str(lake / name)).schema().to_arrow().names])
        want = DeltaTable(str(clean / name)).to_pyarrow_table().drop_columns(
            [c for c in ("ingest_run_id", "ingest_ts") if c in DeltaTable(str(clean / name)).schema().to_arrow().names])
        assert got.sort_by([(c, "ascending") for c in got.column_names[:3]]).equals(
            want.sort_by([(c, "ascending") for c in want.column_names[:3]])), name


def test_duplicate_keys_left_by_an_old_race_are_healed_by_the_next_ingest(tmp_path):
    from deltalake import write_deltalake

    raw, lake = _itp_raw(tmp_path / "raw", 5), tmp_path / "lake"
    assert tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    bronze = lake / "bronze" / "itp_jobs"
    write_deltalake(str(bronze), DeltaTable(str(bronze)).to_pyarrow_table(), mode="append")  # every key twice
    assert DeltaTable(str(bronze)).to_pyarrow_table().num_rows == 10
    again = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert again.returncode == 0, again.stderr
    assert "bronze.itp_jobs holds keys more than once; keeping one row per key" in again.stderr
    jobs = DeltaTable(str(bronze)).to_pyarrow_table()
    assert (jobs.num_rows, len(set(jobs.column("job_id").to_pylist()))) == (5, 5)


def test_the_losing_side_of_a_commit_race_says_to_retry():
    from tracelake.app.cli import _one_line

    message = _one_line(RuntimeError("Delta error: Failed to commit transaction: 0"))
    assert message == ("another writer committed to a table of this run first (Delta commit conflict); "
                       "this run's write of it was not committed: retry")


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB file system, mounted for the test (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_exit_2_whoever_writes(tmp_path, tiny_disk):
    """The lake on a full disk: the engine's Parquet writer (staging elsewhere) and Python's
    unpacking (staging on that disk too) both end in exit 2 and one line naming the reason."""
    raw = _itp_raw(tmp_path / "raw", 20000)  # 0.6 MB of CSV
    engine_writes = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(tiny_disk / "a"),
                              "--conf", f"staging_dir={tmp_path / 'staging'}")
    python_writes = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(tiny_disk / "b"))
    assert engine_writes.returncode == python_writes.returncode == 2, engine_writes.stderr + python_writes.stderr
    assert engine_writes.stderr.splitlines()[-1].startswith(
        "tracelake: error: cannot write or read a file: No space left on device (the engine: ")
    assert python_writes.stderr.splitlines()[-1] == "tracelake: error: cannot write or read a file: No space left on device"
    assert "Traceback" not in engine_writes.stderr + python_writes.stderr


def test_classic_spark_starts_in_a_child_of_a_process_on_the_local_profile(tmp_path):
    """pyspark marks a process holding a Spark Connect session in its environment; a child of
    one (spark-submit's driver, an Airflow task, `--profile spark` from a notebook on the local
    profile) inherited the mark and failed with CONNECT_URL_NOT_SET (exit 1)."""
    lake = tmp_path / "lake"
    lake.mkdir()
    env = {**ENV, "SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_LOCAL_REMOTE": "1"}
    done = subprocess.run([*CLI, "query", "SELECT 6 * 7 AS n", "--profile", "spark", "--conf", "master=local[1]",
                           "--lake", str(lake)], env=env, capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (0, "n\n42\n"), done.stderr[-2000:]
