"""Apache Spark with delta-spark on a real standalone cluster (a master and 2 workers from
pyspark's jars, on 127.0.0.1): `deploy/spark-submit.sh` ingests the real ITP archives and the real
Zhejiang sample; its tables equal a local-profile ingest of the same files, a second submit
commits nothing, and each profile reads the other's lake."""

from __future__ import annotations

import csv
import io
import sys

import pytest
from conftest import shared
from deploykit import REPO, delta_versions, engine_rows, fingerprint, run, tracelake
from standalone import standalone_cluster

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

SUBMIT = str(REPO / "deploy" / "spark-submit.sh")
# (source, raw folder under ../shared/data)
INPUTS = (("itp", "elasticflow"), ("zhejiang", "zhejiang"))


def _submit(cluster, source: str, raw, lake):
    return run(["bash", SUBMIT, source, str(raw), str(lake), "--conf", "spark_conf.spark.sql.shuffle.partitions=4"],
               env={**cluster.env, "SPARK_MASTER": cluster.master, "PYSPARK_PYTHON": sys.executable}, timeout=1500)


@pytest.fixture(scope="module")
def lakes(tmp_path_factory):
    raws = {source: shared(folder) for source, folder in INPUTS}
    base = tmp_path_factory.mktemp("standalone")
    local, on_spark = base / "local", base / "spark"
    for source, raw in raws.items():
        done = tracelake("ingest", source, "--raw", str(raw), "--lake", str(local), timeout=900)
        assert done.returncode == 0, f"{source}: {done.stderr[-3000:]}"
    with standalone_cluster(base / "cluster", workers=2) as cluster:
        for source, raw in raws.items():
            done = _submit(cluster, source, raw, on_spark)
            assert done.returncode == 0, f"{source}: {done.stderr[-4000:]}"
        versions = delta_versions(on_spark)
        again = _submit(cluster, "itp", raws["itp"], on_spark)
        assert again.returncode == 0, again.stderr[-4000:]
        master_log = (cluster.logs / "master.log").read_text(errors="replace")
        yield {"local": local, "spark": on_spark, "versions": versions, "again": delta_versions(on_spark),
               "master_log": master_log, "cluster": cluster}


def test_the_submits_ran_on_the_two_workers(lakes):
    log = lakes["master_log"]
    assert log.count("Registering worker 127.0.0.1") == 2
    assert log.count("Registering app ") == 3  # itp, zhejiang, itp again
    assert log.count("Launching executor") >= 6  # each app on both workers


BIG = ("bronze.zj_port_counters", "silver.zj_port_rates")  # 1.86 M rows each: compared by fingerprint


def test_every_table_equals_the_local_ingest_row_for_row(lakes):
    local, on_spark = lakes["local"], lakes["spark"]
    names = sorted(t for t in delta_versions(local) if not t.startswith("ops."))
    assert sorted(t for t in delta_versions(on_spark) if not t.startswith("ops.")) == names
    for name in names:
        if name not in BIG:
            assert engine_rows(on_spark, name) == engine_rows(local, name), name


def test_the_port_tables_fingerprints_equal_the_local_ones(lakes):
    """Row counts, and the sums of every numeric column (octets, intervals, rates) to 1e-9."""
    got, expected = fingerprint(lakes["spark"], list(BIG)), fingerprint(lakes["local"], list(BIG))
    for name in BIG:
        assert got[name][0] == expected[name][0] == 1_861_310, name
        assert got[name][1] == pytest.approx(expected[name][1], rel=1e-9), name


def test_a_second_submit_makes_no_new_commit(lakes):
    before, after = lakes["versions"], lakes["again"]
    # every table keeps its version; the run's rule results are one more commit of ops.quality_results
    assert {t: v for t, v in after.items() if t != "ops.quality_results"} == \
        {t: v for t, v in before.items() if t != "ops.quality_results"}
    assert after["ops.quality_results"] == before["ops.quality_results"] + 1


def _count(lake, profile: str, table: str) -> int:
    done = tracelake("query", f"SELECT count(*) AS n FROM {table}", "--lake", str(lake), "--profile", profile,
                     "--format", "csv", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [header, row] = list(csv.reader(io.StringIO(done.stdout)))[:2]
    return int(row[0])


def test_each_profile_reads_the_other_ones_lake(lakes):
    local, on_spark = lakes["local"], lakes["spark"]
    expected = fingerprint(local, ["bronze.itp_jobs", "bronze.zj_port_counters"])
    assert _count(local, "spark", "bronze.itp_jobs") == expected["bronze.itp_jobs"][0]
    assert _count(on_spark, "local", "bronze.zj_port_counters") == expected["bronze.zj_port_counters"][0]


def _ingest(lake, profile: str, source: str, raw) -> None:
    done = tracelake("ingest", source, "--raw", str(raw), "--lake", str(lake), "--profile", profile, timeout=900)
    assert done.returncode == 0, f"{profile} into {lake}: {done.stderr[-3000:]}"


def test_each_profile_merges_into_maintains_and_time_travels_the_other_ones_lake(lakes, tmp_path):
    """Last in this module: it changes both lakes. The same generated ITP archives (the real
    ones' file names, other rows: a MERGE that updates, inserts and deletes) go into the local
    profile's lake through Spark and into Spark's lake through the local profile; the two lakes
    then hold the same rows, each compacts the other's table, and the version before the
    merge still reads as the real trace."""
    local, on_spark = lakes["local"], lakes["spark"]
    real = _count(local, "local", "bronze.itp_jobs")
    before = {lake: delta_versions(lake)["bronze.itp_jobs"] for lake in (local, on_spark)}
    generated = tmp_path / "itp"
    done = tracelake("generate", "itp", "--out", str(generated), "--scale", "0.02", "--seed", "5")
    assert done.returncode == 0, done.stderr[-2000:]
    _ingest(local, "spark", "itp", generated)
    _ingest(on_spark, "local", "itp", generated)
    for name in ("bronze.itp_jobs", "bronze.elasticflow_jobs", "silver.jobs", "gold.jobs_duration_quantiles"):
        assert engine_rows(local, name) == engine_rows(on_spark, name), name
    merged = _count(local, "local", "bronze.itp_jobs")
    assert merged != real and merged == _count(on_spark, "spark", "bronze.itp_jobs")
    for lake, profile in ((local, "spark"), (on_spark, "local")):
        done = tracelake("maintain", "bronze.itp_jobs", "--optimize", "--lake", str(lake), "--profile", profile,
                         timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        [header, row] = list(csv.reader(io.StringIO(done.stdout)))[:2]
        # one file after; a table already in one file has nothing to compact and keeps its last version
        assert row[0] == "bronze.itp_jobs" and row[4] == "1", done.stdout
        assert row[2] == "OPTIMIZE" or (row[2] == "MERGE" and row[3] == "1"), done.stdout
        travelled = tracelake("query", f"SELECT count(*) AS n FROM bronze.itp_jobs VERSION AS OF {before[lake]}",
                              "--lake", str(lake), "--profile", profile, "--format", "csv", timeout=600)
        assert travelled.returncode == 0, travelled.stderr[-3000:]
        assert travelled.stdout.split() == ["n", str(real)]
    assert _count(local, "local", "bronze.itp_jobs") == merged
