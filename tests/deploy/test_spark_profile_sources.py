"""Every source the standalone-cluster test does not cover, ingested on the `spark` profile
(classic Spark with delta-spark, `local[2]`) by the CLI as a user runs it, equals the local
profile's ingest table for table, row for row: the real Zeus CSVs, generated AcmeTrace jobs and
utilization, and a generated Zhejiang hour after another hour (the second hour's rates carried
from the first). Aggregates are exact where engines could differ: an approximate percentile is
each engine's own approximation (Spark's and Sail's p90 of one task differed by 0.16 %)."""

from __future__ import annotations

import pytest
from conftest import shared
from deploykit import delta_versions, engine_rows, fingerprint, tracelake

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

SPARK = ("--profile", "spark", "--conf", "master=local[2]", "--conf", "spark_conf.spark.sql.shuffle.partitions=2")
PORTS = ("bronze.zj_port_counters", "silver.zj_port_rates")


def _ingest(lake, *args, spark: bool) -> None:
    done = tracelake("ingest", *args, "--lake", str(lake), *(SPARK if spark else ()), timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]


def _same_lakes(local, on_spark, by_fingerprint=()) -> None:
    names = sorted(t for t in delta_versions(local) if not t.startswith("ops."))
    assert sorted(t for t in delta_versions(on_spark) if not t.startswith("ops.")) == names
    for name in names:
        if name in by_fingerprint:
            got, expected = fingerprint(on_spark, [name])[name], fingerprint(local, [name])[name]
            assert got[0] == expected[0] and got[1] == pytest.approx(expected[1], rel=1e-9), name
        else:
            assert engine_rows(on_spark, name) == engine_rows(local, name), name


@pytest.mark.parametrize("source", ["zeus", "acme"])
def test_a_source_on_spark_equals_the_local_ingest(source, tmp_path):
    if source == "zeus":
        raw = shared("zeus")
    else:
        raw = tmp_path / "acme"
        made = tracelake("generate", "acme", "--out", str(raw), "--scale", "0.002")
        assert made.returncode == 0, made.stderr[-2000:]
    for lake, spark in ((tmp_path / "local", False), (tmp_path / "spark", True)):
        _ingest(lake, source, "--raw", str(raw), spark=spark)
    _same_lakes(tmp_path / "local", tmp_path / "spark")


def test_a_zhejiang_hour_after_an_hour_on_spark_equals_the_local_ingest(tmp_path):
    """Two hourly runs, as a scheduler makes them: the second hour's first rates come from the
    state the first run stored. The workbook and task logs (and what is derived from them) are
    the standalone-cluster test's, on the real sample."""
    raw = tmp_path / "zj"
    made = tracelake("generate", "zhejiang", "--out", str(raw), "--hours", "2", "--tasks", "1", "--scale", "0.05")
    assert made.returncode == 0, made.stderr[-2000:]
    for lake, spark in ((tmp_path / "local", False), (tmp_path / "spark", True)):
        for hour in ("2024052400", "2024052401"):
            _ingest(lake, "zhejiang", "--raw", str(raw), "--hours", hour, spark=spark)
    _same_lakes(tmp_path / "local", tmp_path / "spark", by_fingerprint=PORTS)
