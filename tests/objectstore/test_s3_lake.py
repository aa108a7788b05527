"""Every command on a lake in an S3 bucket, with the raw releases in the bucket too, against an
S3 server on 127.0.0.1 (moto, s3kit.py): the CLI as a user runs it, each command a process of
its own with the endpoint and credentials in the standard AWS_* variables. The counts equal
those of the same ingest from and into local folders."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import rows
from s3kit import real

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`


def tracelake(env: dict, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True,
                          env={**env, "RUST_LOG": "error"}, timeout=timeout)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stderr[-3000:]
    return done


# the CLI with its run's cleanup left out, so a test can look into what the run staged
KEEP_STAGING = ("import sys; import tracelake.run.context as context; context.Run.cleanup = lambda self: None; "
                "from tracelake.__main__ import run; sys.argv[0] = 'tracelake'; run()")


def ingest_keeping_staging(env: dict, staging: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", KEEP_STAGING, "ingest", *args, "--conf", f"staging_dir={staging}"],
                          capture_output=True, text=True, env={**env, "RUST_LOG": "error"}, timeout=900)


def staged_raw(staging: Path) -> list[str]:
    """The raw files the run copied to its staging folder (<staging>/<run id>/raw/…)."""
    [run] = [p for p in staging.iterdir() if p.is_dir()]
    return sorted(p.relative_to(run / "raw").as_posix() for p in (run / "raw").rglob("*") if p.is_file())


def table_counts(env: dict, lake: str, *flags: str) -> dict[str, int]:
    listed = rows(ok(tracelake(env, "tables", "--lake", lake, *flags)).stdout)
    assert listed[0] == ["table", "rows", "version", "last_operation"]
    return {name: int(count) for name, count, _version, _op in listed[1:]}


@pytest.fixture(scope="module")
def itp_lakes(s3_server, tmp_path_factory):
    """The real ITP/ElasticFlow archives ingested twice: from s3:// into s3://, and from the
    local folder into a local lake."""
    release = real("elasticflow")
    bucket = s3_server.new_bucket("itp")
    s3_server.upload(release, bucket, "raw/elasticflow")
    env = {**os.environ, **s3_server.env}
    lake = f"s3://{bucket}/lake"
    ingest = ok(tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw/elasticflow", "--lake", lake))
    local = tmp_path_factory.mktemp("itp-local") / "lake"
    ok(tracelake(env, "ingest", "itp", "--raw", str(release), "--lake", str(local)))
    return env, bucket, lake, local, ingest


def test_itp_from_s3_into_s3_equals_local_disk(itp_lakes, s3_server):
    env, bucket, lake, local, ingest = itp_lakes
    assert "local_engine" not in ingest.stderr  # the engine stayed private: it reached the bucket through us
    on_s3, on_disk = table_counts(env, lake), table_counts(env, str(local))
    assert on_s3 == on_disk
    assert on_s3["bronze.itp_jobs"] == 69351 and on_s3["bronze.elasticflow_jobs"] == 69546
    assert on_s3["silver.jobs"] == 138702
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket, Prefix="lake/")["Contents"]]
    assert not [k for k in keys if k.startswith(("lake/_staging", "lake/_locks"))]  # no scratch, lock released


def test_an_identical_rerun_from_s3_commits_nothing(itp_lakes):
    """Lineage names are relative to the raw folder, not to the run's copy of it: the same files
    again change no table."""
    env, bucket, lake, _local, _ingest = itp_lakes
    before = rows(ok(tracelake(env, "tables", "--lake", lake)).stdout)
    ok(tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw/elasticflow", "--lake", lake))
    after = rows(ok(tracelake(env, "tables", "--lake", lake)).stdout)
    unchanged = [r for r in before if not r[0].startswith("ops.")]
    assert [r for r in after if not r[0].startswith("ops.")] == unchanged


def test_itp_from_s3_into_a_local_lake_keeps_the_engine_private(itp_lakes, tmp_path):
    """Raw files at a URL are copied by tracelake's own process: the engine reads the local copy,
    so it stays in its private network."""
    env, bucket, _lake, local, _ingest = itp_lakes
    done = ok(tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw/elasticflow", "--lake", str(tmp_path / "lake")))
    assert "local_engine: tcp" not in done.stderr
    assert table_counts(env, str(tmp_path / "lake")) == table_counts(env, str(local))


def test_query_describe_report_and_maintain_on_s3(itp_lakes, tmp_path):
    env, _bucket, lake, _local, _ingest = itp_lakes
    answer = rows(ok(tracelake(env, "query", "--lake", lake,
                                "SELECT count(*), round(sum(duration * num_gpu) / 3600, 1) FROM bronze.itp_jobs")).stdout)
    assert answer[1] == ["69351", "1632719.7"]
    described = rows(ok(tracelake(env, "query", "--lake", lake, "DESCRIBE TABLE bronze.itp_jobs")).stdout)
    assert ["job_id", "string"] in [r[:2] for r in described]  # answered from the schema file, as on a local lake
    assert "job_id" in ok(tracelake(env, "describe", "bronze.itp_jobs")).stdout
    report = ok(tracelake(env, "report", "--lake", lake, "--out", str(tmp_path / "report"))).stdout.split()
    assert str(tmp_path / "report" / "index.html") in report and (tmp_path / "report" / "index.html").is_file()
    maintained = rows(ok(tracelake(env, "maintain", "--lake", lake, "--optimize", "--vacuum", "--retain-hours", "0")).stdout)
    assert maintained[0] == ["table", "version", "last_operation", "files_before", "files_after"]
    by_table = {r[0]: r for r in maintained[1:]}
    assert set(by_table) == set(table_counts(env, lake))
    assert all(int(r[4]) <= max(int(r[3]), 1) for r in maintained[1:])
    assert table_counts(env, lake)["bronze.itp_jobs"] == 69351  # compaction keeps every row


def test_zhejiang_real_sample_from_s3_into_s3_equals_local_disk(s3_server, tmp_path):
    release = real("zhejiang")
    bucket = s3_server.new_bucket("zj")
    s3_server.upload(release, bucket, "raw/cluster_2000_A100")
    env = {**os.environ, **s3_server.env}
    lake = f"s3://{bucket}/lake"
    staging = tmp_path / "staging"
    ok(ingest_keeping_staging(env, staging, "zhejiang", "--raw", f"s3://{bucket}/raw/cluster_2000_A100", "--lake", lake))
    ok(tracelake(env, "ingest", "zhejiang", "--raw", str(release), "--lake", str(tmp_path / "lake")))
    on_s3 = table_counts(env, lake)
    assert on_s3 == table_counts(env, str(tmp_path / "lake"))
    assert on_s3["bronze.zj_port_counters"] == 1861310
    # the port files were read from the bucket by the engine's tasks: the run copied only the
    # workbook and the task logs, which this process opens itself
    assert staged_raw(staging) == sorted(
        p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file() and "trafficinfo" not in p.parts)
    assert len(staged_raw(staging)) == 6


def test_zhejiang_hours_from_s3_copy_only_those_hours(s3_server, tmp_path):
    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=5, hours=2, tasks=1)
    bucket = s3_server.new_bucket("zjh")
    s3_server.upload(raw, bucket, "raw")
    env = {**os.environ, **s3_server.env}
    hours = sorted(p.name for p in (raw / "trafficinfo").iterdir())
    lake = f"s3://{bucket}/lake"
    ok(tracelake(env, "ingest", "zhejiang", "--raw", f"s3://{bucket}/raw", "--lake", lake, "--hours", hours[1]))
    ok(tracelake(env, "ingest", "zhejiang", "--raw", str(raw), "--lake", str(tmp_path / "lake"), "--hours", hours[1]))
    assert table_counts(env, lake) == table_counts(env, str(tmp_path / "lake"))
    stored = rows(ok(tracelake(env, "query", "--lake", lake, "SELECT DISTINCT hour_cst FROM bronze.zj_port_counters")).stdout)
    assert stored[1:] == [[hours[1]]]
    missing = tracelake(env, "ingest", "zhejiang", "--raw", f"s3://{bucket}/raw", "--lake", lake, "--hours", "2030010100")
    assert missing.returncode == 4  # an hour not there (yet): a scheduler's skip or retry
    assert missing.stderr.strip().splitlines()[-1] == (
        f"tracelake: error: s3://{bucket}/raw/trafficinfo: no hour folder 2030010100")


def test_two_concurrent_ingests_into_one_s3_lake(s3_server, s3_env, tmp_path):
    """While a run holds the lake, an ingest and a maintain are refused, naming it. Two ingests at
    once: each ends with 0 (it ran, before or after the other) or 2 naming the run that holds the
    lake; never a key twice."""
    from tracelake.config import load_config
    from tracelake.delta.lock import lake_write_lock
    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate("itp", raw, scale=0.02, seed=3)
    bucket = s3_server.new_bucket("two")
    s3_server.upload(raw, bucket, "raw")
    env = {**os.environ, **s3_server.env}
    lake = f"s3://{bucket}/lake"
    refusal = f"tracelake: error: another run (ingest or maintain) is writing the lake at {lake} (pid {os.getpid()} on "
    with lake_write_lock(load_config(overrides={"lake_root": lake})):
        held = tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw", "--lake", lake)
        assert held.returncode == 2 and held.stderr.strip().splitlines()[-1].startswith(refusal), held.stderr
    ok(tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw", "--lake", lake))  # released: it runs
    with lake_write_lock(load_config(overrides={"lake_root": lake})):
        held = tracelake(env, "maintain", "--optimize", "--lake", lake)
        assert held.returncode == 2 and held.stderr.strip().splitlines()[-1].startswith(refusal), held.stderr
    command = [sys.executable, "-m", "tracelake", "ingest", "itp", "--raw", f"s3://{bucket}/raw", "--lake", lake]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**env, "RUST_LOG": "error"}) for _ in range(2)]
    outcomes = [(run.wait(timeout=900), run.stderr.read()) for run in runs]
    for run in runs:
        run.stdout.close()
        run.stderr.close()
    assert sorted(code for code, _ in outcomes) in ([0, 0], [0, 2]), outcomes
    for code, err in outcomes:
        if code == 2:
            assert err.strip().splitlines()[-1].startswith(
                f"tracelake: error: another run (ingest or maintain) is writing the lake at {lake} (pid "), err
    count, distinct = rows(ok(tracelake(env, "query", "--lake", lake,
                                         "SELECT count(*), count(DISTINCT job_id) FROM bronze.itp_jobs")).stdout)[1]
    assert count == distinct and int(count) > 0
    local = tmp_path / "lake"
    ok(tracelake(env, "ingest", "itp", "--raw", str(raw), "--lake", str(local)))
    assert table_counts(env, lake)["bronze.itp_jobs"] == table_counts(env, str(local))["bronze.itp_jobs"]



def test_zhejiang_through_a_sail_local_cluster_on_s3_equals_local(s3_server, tmp_path, monkeypatch):
    """The connect profile against Sail in local-cluster mode (a driver and 2 workers, which read
    and write the bucket themselves), raw and lake in the bucket, equal to the local profile on
    local folders. The server gets the AWS_* variables as a deployment would (a Secret's env)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
    from deploykit import sail_server

    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=11, hours=1, tasks=1)
    bucket = s3_server.new_bucket("cluster")
    s3_server.upload(raw, bucket, "raw")
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    env = dict(os.environ)
    lake = f"s3://{bucket}/lake"
    log = tmp_path / "sail-cluster.log"
    staging = tmp_path / "staging"
    with sail_server(log, workers=2) as url:
        ok(ingest_keeping_staging(env, staging, "zhejiang", "--raw", f"s3://{bucket}/raw", "--lake", lake,
                                  "--profile", "connect", "--connect-url", url))
        # the workers read the port files from the bucket: none was copied to the driver's staging
        port_files = sorted(p.relative_to(raw).as_posix() for p in raw.glob("trafficinfo/*/*/*.csv"))
        assert len(port_files) == 44 and not set(port_files) & set(staged_raw(staging))
        assert [rel for rel in staged_raw(staging) if rel.startswith("trafficinfo/")] == sorted(
            p.relative_to(raw).as_posix() for p in raw.glob("trafficinfo/*/*") if p.is_file())  # the hourly files
        connect = ("--profile", "connect", "--connect-url", url)
        on_cluster = table_counts(env, lake, *connect)
        # the other commands through the same server (maintenance: deltalake here, Sail has no Delta SQL)
        summary = rows(ok(tracelake(env, "query", "--lake", lake, *connect,
                                    "SELECT count(*) FROM gold.zj_task_network_summary")).stdout)
        assert int(summary[1][0]) > 0
        maintained = rows(ok(tracelake(env, "maintain", "--lake", lake, *connect, "--optimize", "--vacuum")).stdout)
        assert {r[0] for r in maintained[1:]} == set(on_cluster)
        report = ok(tracelake(env, "report", "--lake", lake, *connect, "--out", str(tmp_path / "report"))).stdout
        assert str(tmp_path / "report" / "index.html") in report.split()
    assert len(set(re.findall(r"worker (\d+) is available at 127\.0\.0\.1:\d+", log.read_text(errors="replace")))) >= 2
    ok(tracelake(env, "ingest", "zhejiang", "--raw", str(raw), "--lake", str(tmp_path / "lake")))
    assert on_cluster == table_counts(env, str(tmp_path / "lake"))
    assert on_cluster["bronze.zj_port_counters"] > 0 and on_cluster["gold.zj_iteration_network"] > 0


# what each generated release ingests to (the same from the bucket and from local disk), and the
# raw files the run copies to its staging: none (Zeus's .xz groups file is unpacked from its URL)
OTHER_SOURCES = {
    "zeus": ({"bronze.zeus_train": 111, "bronze.zeus_power": 240, "bronze.zeus_alibaba_groups": 763,
              "gold.zeus_time_energy_to_accuracy": 1776, "quarantine.zeus_power": 0}, []),
    "acme": ({"bronze.acme_jobs": 8807, "bronze.acme_utilization": 1068, "bronze.acme_power": 28,
              "quarantine.acme_utilization": 527, "quarantine.acme_power": 11, "silver.jobs": 8807}, []),
}


@pytest.mark.parametrize("source", sorted(OTHER_SOURCES))
def test_zeus_and_acme_from_s3_into_s3_equal_local(s3_server, tmp_path, source):
    """The other sources' layouts from a bucket: Zeus's plain CSVs and xz-compressed group trace,
    AcmeTrace's job CSVs and utilization/<cluster>/ folders (one series gzipped). The engine's
    tasks read every plain CSV and the .gz at their URLs: nothing of them is in the run's staging."""
    import gzip

    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate(source, raw, scale=0.01 if source == "acme" else 0.02, seed=7)
    if source == "acme":  # a gzipped series, with repeated Times parsed line by line from the bucket too
        plain = raw / "utilization" / "seren" / "GPU_UTIL-2023-07.csv"
        plain.with_name(plain.name + ".gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    bucket = s3_server.new_bucket(source)
    s3_server.upload(raw, bucket, "raw")
    env = {**os.environ, **s3_server.env}
    lake = f"s3://{bucket}/lake"
    staging = tmp_path / "staging"
    ok(ingest_keeping_staging(env, staging, source, "--raw", f"s3://{bucket}/raw", "--lake", lake))
    ok(tracelake(env, "ingest", source, "--raw", str(raw), "--lake", str(tmp_path / "lake")))
    on_s3 = table_counts(env, lake)
    assert on_s3 == table_counts(env, str(tmp_path / "lake"))
    counts, copied = OTHER_SOURCES[source]
    assert {table: on_s3[table] for table in counts} == counts
    assert staged_raw(staging) == copied
    if source == "acme":
        gz = rows(ok(tracelake(env, "query", "--lake", lake, "SELECT count(*) FROM quarantine.acme_utilization "
                                "WHERE source_file = 'utilization/seren/GPU_UTIL-2023-07.csv.gz'")).stdout)
        assert gz[1] == ["16"]  # its duplicate Time rows, from the exact parse of the .gz at its URL


def test_a_run_killed_with_9_leaves_a_lock_the_next_run_takes_over(s3_server, tmp_path):
    """kill -9 while the lock object exists: it stays in the bucket; the next run on this machine
    sees its holder is gone, takes the lock over and ingests; the lake ends as a clean run leaves it."""
    import signal
    import time

    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate("itp", raw, scale=0.02, seed=4)
    bucket = s3_server.new_bucket("killed")
    s3_server.upload(raw, bucket, "raw")
    env = {**os.environ, **s3_server.env, "RUST_LOG": "error"}
    lake = f"s3://{bucket}/lake"
    command = [sys.executable, "-m", "tracelake", "ingest", "itp", "--raw", f"s3://{bucket}/raw", "--lake", lake]
    victim = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    client = s3_server.client()
    while victim.poll() is None:
        if client.list_objects_v2(Bucket=bucket, Prefix="lake/_locks/write.lock").get("KeyCount"):
            os.kill(victim.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    victim.wait(timeout=60)
    if victim.returncode != -signal.SIGKILL:
        pytest.skip("the run ended before the kill (too fast to catch here)")
    assert client.list_objects_v2(Bucket=bucket, Prefix="lake/_locks/write.lock")["KeyCount"] == 1
    done = ok(tracelake(env, "ingest", "itp", "--raw", f"s3://{bucket}/raw", "--lake", lake))
    assert f"took over the lake's lock from a run that no longer runs (pid {victim.pid} on " in done.stderr
    ok(tracelake(env, "ingest", "itp", "--raw", str(raw), "--lake", str(tmp_path / "lake")))
    assert table_counts(env, lake) == table_counts(env, str(tmp_path / "lake"))
    assert not client.list_objects_v2(Bucket=bucket, Prefix="lake/_locks/").get("KeyCount")
