"""The distributed engine, exercised: every source's ingest and the Zhejiang correlation through
`tracelake ingest --profile connect` against Sail in local-cluster mode (a driver and 2 workers on
127.0.0.1, the execution path of Sail's Kubernetes cluster mode), compared table by table with
the same ingest on the local profile."""

from __future__ import annotations

import re

import pytest
from deploykit import delta_versions, fingerprint, sail_server, table_rows, tracelake

from tracelake.run.registry import generate

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

SOURCES = ("itp", "zeus", "acme", "zhejiang")


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster-raw")
    for source in SOURCES:
        options = {"hours": 1, "tasks": 1} if source == "zhejiang" else {}
        generate(source, base / source, scale=0.01 if source != "zeus" else 0.02, seed=11, **options)
    return base


def _ingest_all(raw, lake, *flags):
    for source in SOURCES:
        done = tracelake("ingest", source, "--raw", str(raw / source), "--lake", str(lake), *flags,
                         "--conf", "spark_conf.spark.sql.shuffle.partitions=4", timeout=600)
        assert done.returncode == 0, f"{source}: {done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def lakes(raw, tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster-lakes")
    _ingest_all(raw, base / "local")
    log = base / "sail-cluster.log"
    with sail_server(log, workers=2) as url:
        _ingest_all(raw, base / "cluster", "--profile", "connect", "--connect-url", url)
    return base / "local", base / "cluster", log.read_text(errors="replace")


def test_the_cluster_really_had_two_workers(lakes):
    *_, log = lakes
    ready = set(re.findall(r"worker (\d+) is available at 127\.0\.0\.1:\d+", log))
    assert len(ready) >= 2, log[-2000:]


def test_every_table_matches_the_local_run(lakes):
    local, cluster, _ = lakes
    names = sorted(t for t in delta_versions(local) if not t.startswith("ops."))
    assert sorted(t for t in delta_versions(cluster) if not t.startswith("ops.")) == names
    expected = fingerprint(local, names)
    got = fingerprint(cluster, names)
    for name in names:
        rows, total = expected[name]
        assert got[name][0] == rows, name
        assert got[name][1] == pytest.approx(total, rel=1e-9, abs=1e-6), name
    # every source and the correlation produced rows
    for name in ("bronze.itp_jobs", "bronze.zeus_train", "bronze.acme_jobs", "bronze.zj_port_counters",
                 "silver.zj_task_iterations", "gold.zj_iteration_network", "gold.zj_task_network_summary"):
        assert expected[name][0] > 0, name


def _rounded(rows: list[tuple]) -> list[tuple]:
    """Floats to 9 significant digits: a sum's last bits depend on how the workers split it."""
    return [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in rows]


def test_correlation_rows_are_identical(lakes):
    local, cluster, _ = lakes
    for name in ("gold.zj_iteration_network", "gold.zj_task_network_summary"):
        assert _rounded(table_rows(cluster, name)) == _rounded(table_rows(local, name))
