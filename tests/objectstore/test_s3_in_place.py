"""Raw files read where they are stored: a Zhejiang raw folder in a bucket is planned from one
listing of the store; its port files (trafficinfo/<hour>/<switch>/…) are planned at their URLs,
read by the port pass's tasks and never copied, and only what this process opens itself (the
workbook, the task logs, the hourly CSVs it checks for their encoding) is copied to the run's
staging. The plan equals the plan of the same folder on local disk, file for file."""

from __future__ import annotations

import lzma
from pathlib import Path

from s3kit import real

from tracelake.run.pipeline import _plan
from tracelake.run.registry import generate, get_source


def staged_files(staging: Path) -> list[str]:
    return sorted(p.relative_to(staging / "raw").as_posix() for p in (staging / "raw").rglob("*") if p.is_file())


def by_table(inputs) -> dict[str, list[tuple[str, dict]]]:
    return {item.table: [(f.name, f.constants) for f in item.files] for item in inputs}


def uploaded(s3_server, raw: Path, prefix: str) -> str:
    bucket = s3_server.new_bucket("inplace")
    s3_server.upload(raw, bucket, prefix)
    return f"s3://{bucket}/{prefix}"


def test_port_files_are_planned_at_their_urls_and_never_copied(s3_server, s3_env, tmp_path):
    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=11, hours=2, tasks=1)
    url = uploaded(s3_server, raw, "raw")
    source = get_source("zhejiang")
    inputs = _plan(source, url, tmp_path / "run", None, in_place=True)
    local = _plan(source, raw, tmp_path / "local-run", None)
    assert by_table(inputs) == by_table(local)  # the same files, names and constants, in the same order
    [ports] = [item for item in inputs if item.table == "bronze.zj_port_counters"]
    port_files = sorted(p.relative_to(raw).as_posix() for p in (raw / "trafficinfo").glob("*/*/*.csv"))
    assert len(ports.files) == len(port_files) == 92
    assert sorted(f.path for f in ports.files) == [f"{url}/{rel}" for rel in port_files]
    # their sizes from the listing (the step's ETA weighs by them, io.progress), as on disk
    assert {f.name: f.size for f in ports.files} == {rel: (raw / rel).stat().st_size for rel in port_files}
    copied = staged_files(tmp_path / "run")
    assert not [rel for rel in copied if rel.count("/") == 3]  # no port file copied
    every = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())
    assert copied == [rel for rel in every if rel not in port_files]  # the workbook, task logs, hourly CSVs
    others = [f.path for item in inputs if item.table != "bronze.zj_port_counters" for f in item.files]
    assert others and all(p.startswith(str(tmp_path / "run")) for p in others)


def test_an_engine_that_cannot_reach_the_store_gets_the_whole_copy(s3_server, s3_env, tmp_path):
    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=11, hours=1, tasks=1)
    url = uploaded(s3_server, raw, "raw")
    inputs = _plan(get_source("zhejiang"), url, tmp_path / "run", None, in_place=False)
    every = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file())
    assert staged_files(tmp_path / "run") == every
    assert all(f.path.startswith(str(tmp_path / "run")) for item in inputs for f in item.files)


def test_hours_read_in_place_copy_only_the_other_files_of_those_hours(s3_server, s3_env, tmp_path):
    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=5, hours=2, tasks=1)
    url = uploaded(s3_server, raw, "raw")
    hours = sorted(p.name for p in (raw / "trafficinfo").iterdir())
    inputs = _plan(get_source("zhejiang"), url, tmp_path / "run", hours[1], in_place=True)
    assert {f.constants["hour_cst"] for item in inputs for f in item.files} == {hours[1]}
    hourly = sorted(p.relative_to(raw).as_posix() for p in (raw / "trafficinfo" / hours[1]).iterdir() if p.is_file())
    assert staged_files(tmp_path / "run") == hourly and len(hourly) == 5  # flow, link, nic, port; .DS_Store


def test_real_sample_planned_from_the_store_copies_only_the_workbook_and_task_logs(s3_server, s3_env, tmp_path):
    release = real("zhejiang")
    url = uploaded(s3_server, release, "raw/cluster_2000_A100")
    inputs = _plan(get_source("zhejiang"), url, tmp_path / "run", None, in_place=True)
    [ports] = [item for item in inputs if item.table == "bronze.zj_port_counters"]
    on_disk = sorted(release.glob("trafficinfo/*/*/*.csv"))
    assert len(ports.files) == len(on_disk) and all(f.path.startswith(f"{url}/trafficinfo/") for f in ports.files)
    assert staged_files(tmp_path / "run") == sorted(
        p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file() and "trafficinfo" not in p.parts)


def test_which_engines_read_the_store_themselves(tmp_path):
    from tracelake.engine import Engine
    from tracelake.private_engine import PrivateServer

    assert Engine("connect", None).reaches_stores(str(tmp_path))
    assert Engine("spark", None).reaches_stores("s3://bucket/lake")
    assert not Engine("spark", None).reaches_stores(str(tmp_path))  # its file system may know no store
    assert not Engine("local", None).reaches_stores("s3://bucket/lake")  # attached to a served engine
    assert Engine("local", None, _server=PrivateServer(None, tmp_path / "s", egress=object())).reaches_stores("s3://b/l")
    assert not Engine("local", None, _server=PrivateServer(None, tmp_path / "s")).reaches_stores(str(tmp_path))


def test_tasks_open_the_store_through_the_proxy_the_engine_is_given(monkeypatch):
    """pyarrow's S3 client reads no HTTP(S)_PROXY; the private engine's tasks reach a store only
    through one, so it is handed over, unless NO_PROXY names the host."""
    from tracelake.io.objectstore import _proxy

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "example.com, .internal")
    assert _proxy("http", "127.0.0.1:9000") == "http://127.0.0.1:3128"
    assert _proxy("http", "s3.example.com") is None and _proxy("http", "store.internal:9000") is None
    assert _proxy("https", "bucket.s3.amazonaws.com") is None


def _gzip_one(raw: Path, rel: str) -> str:
    """`rel` replaced by its gzipped form, as the release may ship a series."""
    import gzip

    path = raw / rel
    gz = path.with_name(path.name + ".gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return f"{rel}.gz"


def test_acme_release_is_planned_at_its_urls_and_nothing_is_copied(s3_server, s3_env, tmp_path):
    """Every AcmeTrace file is read by the engine's tasks (the job CSVs by the text reader, the
    utilization CSVs by the one pass, a `.gz` inflated as it streams): the run copies nothing,
    the plan's sizes come from the listing, and each file's header read from the store equals
    the one read on disk."""
    import os

    from tracelake.sources.acme.utilization import read_header

    raw = tmp_path / "raw"
    generate("acme", raw, scale=0.01, seed=7)
    gz = _gzip_one(raw, "utilization/seren/GPU_UTIL-2023-07.csv")
    url = uploaded(s3_server, raw, "raw")
    source = get_source("acme")
    inputs = _plan(source, url, tmp_path / "run", None, in_place=True)
    local = _plan(source, raw, tmp_path / "local-run", None)
    assert by_table(inputs) == by_table(local)
    assert staged_files(tmp_path / "run") == []
    files = [f for item in inputs for f in item.files]
    every = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*.csv*"))
    assert sorted(f.name for f in files) == every and len(every) == 33  # 2 job CSVs, 28 metric files, 3 IPMI files
    assert all(f.path == f"{url}/{f.name}" for f in files)
    [util] = [item for item in inputs if item.table == "bronze.acme_utilization"]
    assert [f.size for f in util.files] == [os.path.getsize(raw / f.name) for f in util.files]
    assert f"{url}/{gz}" in [f.path for f in util.files]
    for f in util.files:
        assert read_header(f.path, f.name) == read_header(str(raw / f.name), f.name)


def test_zeus_plain_csvs_are_read_in_place_and_the_xz_file_is_unpacked_from_the_store(s3_server, s3_env, tmp_path):
    raw = tmp_path / "raw"
    generate("zeus", raw, scale=0.02, seed=7)
    url = uploaded(s3_server, raw, "raw")
    source = get_source("zeus")
    inputs = _plan(source, url, tmp_path / "run", None, in_place=True)
    local = _plan(source, raw, tmp_path / "local-run", None)
    assert by_table(inputs) == by_table(local)
    assert staged_files(tmp_path / "run") == []  # nothing raw copied: the .xz is streamed from its URL
    unpacked = tmp_path / "run" / "zeus" / "alibaba_groups.csv"
    assert unpacked.read_bytes() == lzma.decompress((raw / "alibaba_groups.csv.xz").read_bytes())
    paths = {item.table: [f.path for f in item.files] for item in inputs}
    assert paths["bronze.zeus_train"] == [f"{url}/summary_train.csv"]
    assert paths["bronze.zeus_power"] == [f"{url}/summary_power_{gpu}.csv" for gpu in ("a40", "v100")]
    [groups] = paths["bronze.zeus_alibaba_groups"]
    assert groups.startswith(str(tmp_path / "run")) and groups.endswith("/alibaba_groups.csv")
