"""Inputs this process makes (archive members, transcoded hourly CSVs), put where an engine on
other machines reads them: `<lake>/_staging/<run id>/` in the lake's store (io/storestage.py),
with copies of raw objects planned at those objects' URLs, the workbook this process reads kept
on its disk, and the prefix removed after the run. Against the S3 server on 127.0.0.1 (s3kit)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import rows
from s3kit import real

from tracelake.config import load_config
from tracelake.engine import Engine
from tracelake.io import objectstore, storestage
from tracelake.io.staging import Scratch
from tracelake.run.pipeline import _placed, _plan, store_staging
from tracelake.run.registry import generate, get_source

RUN_ID = "20240101T000000Z-0123abcd"


def in_bucket(s3_server, raw: Path, name: str) -> tuple[str, str]:
    """(raw URL, lake URL) in a new bucket holding `raw` under raw/."""
    bucket = s3_server.new_bucket(name)
    s3_server.upload(raw, bucket, "raw")
    return f"s3://{bucket}/raw", f"s3://{bucket}/lake"


# ---------------------------------------------------------------- where a run's inputs go

def _config(lake: str, profile: str = "connect", **more: str):
    conf = [f"{key}={value}" for key, value in more.items()]
    return load_config(profile, {"lake_root": lake, "connect_url": "sc://127.0.0.1:15002"}, conf, environ={})


def test_only_an_engine_whose_tasks_may_run_elsewhere_gets_a_store_prefix(tmp_path):
    run = SimpleNamespace(run_id=RUN_ID)
    connect = Engine("connect", spark=None)
    assert store_staging(connect, _config("s3://b/lake"), run) == f"s3://b/lake/_staging/{RUN_ID}"
    assert store_staging(connect, _config(str(tmp_path / "lake")), run) is None  # a local lake
    assert store_staging(connect, _config("s3://b/lake", staging_dir=str(tmp_path / "s")), run) is None  # set: wins
    assert store_staging(Engine("local", spark=None), _config("s3://b/lake", "local"), run) is None
    cluster = SimpleNamespace(sparkContext=SimpleNamespace(master="spark://head:7077"))
    assert store_staging(Engine("spark", spark=cluster), _config("s3://b/lake", "spark"), run) is not None
    on_one_machine = SimpleNamespace(sparkContext=SimpleNamespace(master="local[*]"))
    assert store_staging(Engine("spark", spark=on_one_machine), _config("s3://b/lake", "spark"), run) is None


def test_a_remote_engines_run_stages_here_and_its_scratch_is_a_url_kept_whole(s3_server, s3_env, tmp_path):
    """A lake at a URL with a Spark Connect engine elsewhere needs no staging_dir: this process's
    staging folder is on this disk, and the engine's scratch (Run.scratch, moved under the run's
    prefix by run_ingest) is joined as text, `s3://` intact, and listed and removed through the store."""
    from tracelake.run.context import Run

    config = load_config("connect", {"lake_root": "s3://b/lake", "connect_url": "sc://10.0.0.5:15002"}, [], environ={})
    run = Run.new(config)
    assert "://" not in str(run.staging) and Path(str(run.scratch)) == run.staging
    bucket = s3_server.new_bucket("scratch")
    scratch = Scratch(f"s3://{bucket}/lake/_staging/{RUN_ID}/scratch")
    staged = scratch / "bronze.t.parquet"
    assert str(staged) == f"s3://{bucket}/lake/_staging/{RUN_ID}/scratch/bronze.t.parquet"
    assert str(staged.beside("-exact")) == f"{staged}-exact"
    assert not staged.exists()
    s3_server.client().put_object(Bucket=bucket, Key=f"lake/_staging/{RUN_ID}/scratch/bronze.t.parquet/part-0.parquet",
                                  Body=b"x")
    assert staged.exists() and not staged.beside("-exact").exists()
    staged.remove()
    assert not staged.exists() and not s3_server.client().list_objects_v2(Bucket=bucket).get("Contents")


def test_archive_members_are_uploaded_under_the_run_prefix(s3_server, s3_env, tmp_path):
    raw = tmp_path / "raw"
    generate("itp", raw, scale=0.01, seed=7)
    raw_url, lake = in_bucket(s3_server, raw, "stage-itp")
    prefix = storestage.prefix_for(lake, RUN_ID)
    run = tmp_path / "run"
    planned = _plan(get_source("itp"), raw_url, run, None, in_place=True)
    placed = _placed(planned, prefix, run, raw_url)
    assert [[f.name for f in i.files] for i in placed] == [[f.name for f in i.files] for i in planned]
    members = [f for item in placed for f in item.files]
    assert len(members) == sum(len(i.files) for i in planned) > 2
    for before, after in zip((f for i in planned for f in i.files), members):
        local = Path(before.path)
        assert after.path == f"{prefix}/{local.relative_to(run).as_posix()}"  # e.g. raw-traces/cluster01.csv
        assert after.size == local.stat().st_size and after.constants == before.constants
    stored = objectstore.list_files(prefix)
    assert sorted(f"{prefix}/{rel}" for rel, _ in stored) == sorted(f.path for f in members)
    with objectstore.open_input(members[0].path) as got:
        assert got.read() == Path(planned[0].files[0].path).read_bytes()
    storestage.remove(prefix)
    bucket = lake.split("/")[2]
    assert s3_server.client().list_objects_v2(Bucket=bucket, Prefix="lake/").get("Contents", []) == []  # no marker left


def test_a_transcoded_hourly_file_is_uploaded_and_copies_of_raw_objects_keep_their_urls(s3_server, s3_env, tmp_path):
    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=11, hours=1, tasks=1)
    [flow] = raw.glob("trafficinfo/*/*_flow.csv")
    text = flow.read_text(encoding="utf-8")
    assert not text.isascii()  # 上午/下午 times: GB18030 differs from UTF-8 here
    flow.write_bytes(text.encode("gb18030"))  # a Chinese Excel export: this process transcodes it
    raw_url, lake = in_bucket(s3_server, raw, "stage-zj")
    prefix = storestage.prefix_for(lake, RUN_ID)
    run = tmp_path / "run"
    placed = {i.table: i for i in _placed(_plan(get_source("zhejiang"), raw_url, run, None, in_place=True),
                                          prefix, run, raw_url)}
    # the one pass stages its own scratch (a file that fails a check is parsed again beside it) in
    # the run's, which the kernel hands a parser that says it needs one (run.parsing.call_parser):
    # under the prefix here (run.pipeline.run_ingest)
    assert placed["bronze.zj_port_counters"].parser.needs_scratch
    rel = flow.relative_to(raw).as_posix()
    [transcoded] = placed["bronze.zj_flow"].files
    assert (transcoded.name, transcoded.path) == (rel, f"{prefix}/zj_hourly/{rel.replace('/', '__')}")
    with objectstore.open_input(transcoded.path) as got:
        assert got.read().decode("utf-8") == text
    for table in ("bronze.zj_nic", "bronze.zj_link", "bronze.zj_port_minute", "bronze.zj_task_pods",
                  "bronze.zj_task_log_events", "bronze.zj_port_counters"):
        assert [f.path for f in placed[table].files] == [f"{raw_url}/{f.name}" for f in placed[table].files]
    for table in ("bronze.zj_topology", "bronze.zj_gpu_nic"):  # this process reads the workbook itself
        [book] = placed[table].files
        assert book.path == str(run / "raw" / "cluster_2000_A100.xlsx")
    assert objectstore.list_files(prefix) == [(f"zj_hourly/{rel.replace('/', '__')}", len(text.encode()))]


def test_a_crashed_runs_prefix_is_removed_by_the_next_run(s3_server, s3_env):
    bucket = s3_server.new_bucket("stale")
    client = s3_server.client()
    older, ours = "20240101T000000Z-00000001", "20240102T000000Z-00000002"
    for key in (f"lake/_staging/{older}/raw-traces/cluster01.csv", f"lake/_staging/{ours}/a.csv",
                "lake/_staging/heal-0a1b2c3d/part-00000.parquet",  # a duplicate-key heal killed midway
                "lake/_staging/notes/keep.txt", "lake/bronze/itp_jobs/_delta_log/0.json"):
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
    lake = f"s3://{bucket}/lake"
    assert sorted(storestage.remove_stale(lake, keep=ours)) == [older, "heal-0a1b2c3d"]
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
    assert keys == ["lake/_staging/20240102T000000Z-00000002/a.csv", "lake/_staging/notes/keep.txt",
                    "lake/bronze/itp_jobs/_delta_log/0.json"]


# ---------------------------------------------------------------- through a Sail local-cluster

# the CLI, recording what the run planned at URLs, what its prefix held before removal and what
# its local staging folder held before its cleanup, and deleting this disk's copy of every file it
# moved to a URL: the engine can only read the store's
RECORDING = """
import json, os, sys
from tracelake.io import objectstore, storestage
from tracelake.run.context import Run
cleanup = Run.cleanup
def cleaning(run):
    held = sorted(os.path.relpath(os.path.join(d, f), run.staging) for d, _, fs in os.walk(run.staging) for f in fs)
    out.write(json.dumps({"local": held}) + "\\n")
    out.flush()
    cleanup(run)
Run.cleanup = cleaning
place, remove, out = storestage.place, storestage.remove, open(os.environ["STAGE_RECORD"], "a")
def placing(files, prefix, roots):
    placed = place(files, prefix, roots)
    for before, after in zip(files, placed):
        if before.path != after.path and os.path.exists(before.path):
            os.remove(before.path)
        out.write(json.dumps({"name": after.name, "path": after.path}) + "\\n")
    out.flush()
    return placed
def removing(prefix):
    out.write(json.dumps({"prefix": prefix, "held": [rel for rel, _ in objectstore.list_files(prefix)]}) + "\\n")
    out.flush()
    remove(prefix)
storestage.place, storestage.remove = placing, removing
from tracelake.__main__ import run
sys.argv[0] = "tracelake"
run()
"""


def ingest_recording(env: dict, record: Path, *args: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", RECORDING, "ingest", *args], capture_output=True, text=True,
                          env={**env, "RUST_LOG": "error", "STAGE_RECORD": str(record)}, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in record.read_text().splitlines()]


@contextmanager
def on_local_cluster(s3_server, tmp_path: Path, monkeypatch, name: str, uploads: dict[str, Path]):
    """A new bucket holding `uploads` (key prefix -> local folder), its settings in this process's
    environment, and a Sail local-cluster server (2 workers) on 127.0.0.1 for the test's length:
    yields (environment, bucket, lake URL, the CLI's flags for that lake on that server)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
    from deploykit import sail_server

    bucket = s3_server.new_bucket(name)
    for prefix, folder in uploads.items():
        s3_server.upload(folder, bucket, prefix)
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    lake = f"s3://{bucket}/lake"
    with sail_server(tmp_path / "sail-cluster.log", workers=2) as url:
        yield dict(os.environ), bucket, lake, ("--lake", lake, "--profile", "connect", "--connect-url", url)


def scratch_folders(held: list[str]) -> set[str]:
    """The folders a run's scratch Parquet made under `<prefix>/scratch/` (from the prefix's listing)."""
    return {rel.split("/")[1] for rel in held if rel.startswith("scratch/") and rel.count("/") >= 2}


def counts(env: dict, lake: str, *flags: str) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-m", "tracelake", "tables", "--lake", lake, *flags],
                          capture_output=True, text=True, env={**env, "RUST_LOG": "error"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = rows(done.stdout)
    assert lines[0] == ["table", "rows", "version", "last_operation"]
    return {r[0]: int(r[1]) for r in lines[1:]}


@pytest.mark.e2e
def test_itp_and_zhejiang_through_a_local_cluster_read_the_driver_made_files_from_the_store(
        s3_server, tmp_path, monkeypatch):
    """The connect profile against Sail in local-cluster mode (2 workers), raw and lake in the
    bucket, no staging_dir: ITP's archive members go to the run's prefix and the engine reads
    them there (this disk's copies are deleted first), the Zhejiang task logs at their raw URLs;
    the counts are the local run's, and no prefix is left."""
    uploads = {"raw/elasticflow": real("elasticflow"), "raw/cluster_2000_A100": real("zhejiang")}
    with on_local_cluster(s3_server, tmp_path, monkeypatch, "remote", uploads) as (env, bucket, lake, connect):
        itp_record = ingest_recording(env, tmp_path / "itp.jsonl", "itp", "--raw", f"s3://{bucket}/raw/elasticflow",
                                      *connect)
        zj_record = ingest_recording(env, tmp_path / "zj.jsonl", "zhejiang", "--raw",
                                     f"s3://{bucket}/raw/cluster_2000_A100", *connect)
        tables = counts(env, lake, *connect[2:])
    assert tables["bronze.itp_jobs"] == 69351 and tables["bronze.elasticflow_jobs"] == 69546
    assert tables["silver.jobs"] == 138702
    assert tables["bronze.zj_port_counters"] == 1861310 and tables["gold.zj_iteration_network"] == 2436
    assert tables["silver.zj_task_paths"] == 376 and tables["silver.zj_nic_map"] > 0

    [itp_prefix] = [r for r in itp_record if "prefix" in r]
    assert re.fullmatch(rf"s3://{bucket}/lake/_staging/\d{{8}}T\d{{6}}Z-[0-9a-f]{{8}}", itp_prefix["prefix"])
    members = [r for r in itp_record if "name" in r]
    assert len(members) == 10 + 11  # raw-traces: cluster01..10; elasticflow-traces: the same and 195job.csv
    assert all(r["name"].startswith(("raw-traces.tar.gz!", "elasticflow-traces.tar.gz!")) for r in members)
    inputs = [rel for rel in itp_prefix["held"] if not rel.startswith("scratch/")]
    assert sorted(f"{itp_prefix['prefix']}/{rel}" for rel in inputs) == sorted(r["path"] for r in members)
    # the engine's scratch Parquet was in the prefix too, and none of it on this disk
    assert {"bronze.elasticflow_jobs.parquet", "bronze.itp_jobs.parquet", "silver.jobs.parquet",
            "gold.jobs_characterization.parquet"} <= scratch_folders(itp_prefix["held"])
    [itp_local] = [r["local"] for r in itp_record if "local" in r]
    assert not [rel for rel in itp_local if ".parquet" in rel], itp_local

    [zj_prefix] = [r for r in zj_record if "prefix" in r]
    # every input file it made here is a copy of a raw object, read at that URL: only scratch was put there
    assert {"bronze.zj_port_counters.parquet", "silver.zj_port_rates.parquet", "bronze.zj_task_log_events.parquet"} <= \
        scratch_folders(zj_prefix["held"])
    assert all(rel.startswith("scratch/") for rel in zj_prefix["held"])
    [zj_local] = [r["local"] for r in zj_record if "local" in r]
    assert not [rel for rel in zj_local if ".parquet" in rel], zj_local
    logs = [r for r in zj_record if "name" in r and r["name"].startswith("taskinfo/")]
    assert len(logs) == 5 and all(r["path"] == f"s3://{bucket}/raw/cluster_2000_A100/{r['name']}" for r in logs)
    left = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="lake/_staging/").get("Contents", [])
    assert left == []  # both runs' prefixes are gone


@pytest.mark.e2e
def test_acme_through_a_local_cluster_stages_its_scratch_in_the_store_and_equals_local(s3_server, tmp_path, monkeypatch):
    """AcmeTrace from a bucket into a bucket on Sail's local-cluster (2 workers), no staging_dir:
    every raw file is read at its URL (nothing uploaded), the engine's scratch Parquet (the staged
    parses, the exact cells of repeated lines) is under the run's prefix and none on this disk, and
    the tables equal a local run's."""
    import gzip

    from tracelake.run.registry import generate

    raw = tmp_path / "raw"
    generate("acme", raw, scale=0.01, seed=7)
    plain = raw / "utilization" / "seren" / "GPU_UTIL-2023-07.csv"  # one series gzipped, as test_s3_lake's
    plain.with_name(plain.name + ".gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    with on_local_cluster(s3_server, tmp_path, monkeypatch, "remote-acme", {"raw": raw}) as (env, bucket, lake, connect):
        record = ingest_recording(env, tmp_path / "acme.jsonl", "acme", "--raw", f"s3://{bucket}/raw", *connect)
        on_cluster = counts(env, lake, *connect[2:])
    local = tmp_path / "lake"
    done = subprocess.run([sys.executable, "-m", "tracelake", "ingest", "acme", "--raw", str(raw), "--lake", str(local)],
                          capture_output=True, text=True, env={**env, "RUST_LOG": "error"}, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert on_cluster == counts(env, str(local))
    assert {t: on_cluster[t] for t in ("bronze.acme_jobs", "bronze.acme_utilization", "bronze.acme_power",
                                       "quarantine.acme_utilization", "quarantine.acme_power")} == \
        {"bronze.acme_jobs": 8807, "bronze.acme_utilization": 1068, "bronze.acme_power": 28,
         "quarantine.acme_utilization": 527, "quarantine.acme_power": 11}
    files = [r for r in record if "name" in r]
    assert files and all(r["path"] == f"s3://{bucket}/raw/{r['name']}" for r in files)  # each at its own URL
    [prefix] = [r for r in record if "prefix" in r]
    assert prefix["held"] and all(rel.startswith("scratch/") for rel in prefix["held"])
    folders = scratch_folders(prefix["held"])
    assert {"bronze.acme_jobs.parquet", "bronze.acme_utilization.parquet", "bronze.acme_power.parquet"} <= folders
    assert any(name.startswith("acme-raw-") for name in folders), folders  # repeated Times' exact cells
    [local_held] = [r["local"] for r in record if "local" in r]
    assert not [rel for rel in local_held if ".parquet" in rel], local_held
    assert not s3_server.client().list_objects_v2(Bucket=bucket, Prefix="lake/_staging/").get("Contents")
