"""Ingest on the embedded engine with Delta: quarantine, idempotency, the critical gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PROFILE
from helpers import itp_csv, job_id, write_archive
from lake_schema import lake_tables, schema_drift
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.delta.catalog import register_all
from tracelake.delta.maintenance import history
from tracelake.errors import QualityGateFailed
from tracelake.run.pipeline import run_ingest

pytestmark = pytest.mark.delta_io

GOOD = [f"{job_id(i)},{i * 100},{600 + i},1" for i in range(1, 6)]
BROKEN = [
    f"{job_id(10)},1000,abc,2",   # wrong type
    f"{job_id(11)},1100",         # missing fields
    f"{job_id(12)},1200,900,3",   # unknown GPU count
    f"{job_id(1)},1300,900,2",    # duplicate of a cluster01 job id
]


def _itp_stats(stats):
    """The bronze.itp_jobs entry (an ITP ingest also rebuilds derived tables)."""
    [itp] = [s for s in stats if s.table == "bronze.itp_jobs"]
    return itp


def _raw(tmp_path, cluster02_rows):
    write_archive(tmp_path / "raw" / "raw-traces.tar.gz", {
        "cluster01.csv": itp_csv(GOOD), "cluster02.csv": itp_csv(cluster02_rows), "LICENSE": "MIT"})
    return str(tmp_path / "raw")


def _table(spark, config, layer, table):
    return spark.read.format("delta").load(config.table_path(layer, table))


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_broken_rows_go_to_quarantine_with_reasons(engine, spark, config, tmp_path):
    raw = _raw(tmp_path, [f"{job_id(6)},600,700,8", *BROKEN])
    stats = _itp_stats(run_ingest(engine, config, "itp", raw))
    # the duplicate id quarantines both of its rows: 5 kept, 5 set aside of 10 read
    assert (stats.rows_read, stats.rows_kept, stats.rows_quarantined) == (10, 5, 5)
    assert stats.rows_read == stats.rows_kept + stats.rows_quarantined
    kept = _table(spark, config, "bronze", "itp_jobs")
    assert sorted(r.job_id for r in kept.select("job_id").collect()) == [job_id(i) for i in range(2, 7)]
    # every table as its schema file says, NOT NULL included (delta-spark keeps it only for tables made by DDL)
    tables = lake_tables(Path(config.lake_root))
    assert len(tables) == 9 and {name: schema_drift(name, t) for name, t in tables.items() if schema_drift(name, t)} == {}
    quarantine = _table(spark, config, "quarantine", "itp_jobs").select("raw_line", "reasons", "source_file")
    m = "raw-traces.tar.gz!cluster"
    expected = spark.createDataFrame([
        (f"{job_id(10)},1000,abc,2", ["duration: 'abc' is not a valid bigint"], f"{m}02.csv"),
        (f"{job_id(11)},1100", ["expected 4 fields, found 2"], f"{m}02.csv"),
        (f"{job_id(12)},1200,900,3", ["column_values_to_be_in_set(num_gpu)"], f"{m}02.csv"),
        (f"{job_id(1)},1300,900,2", ["column_values_to_be_unique(job_id)"], f"{m}02.csv"),
        (f"{job_id(1)},100,601,1", ["column_values_to_be_unique(job_id)"], f"{m}01.csv"),
    ], "raw_line string, reasons array<string>, source_file string")
    assert_same_rows(quarantine, expected)


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_raw_rows_equal_kept_plus_quarantined_in_the_tables(engine, spark, config, tmp_path):
    raw = _raw(tmp_path, BROKEN[:3])
    stats = _itp_stats(run_ingest(engine, config, "itp", raw))
    kept = _table(spark, config, "bronze", "itp_jobs").count()
    quarantined = _table(spark, config, "quarantine", "itp_jobs").count()
    assert (stats.rows_read, kept, quarantined) == (8, 5, 3)
    assert stats.rows_read == kept + quarantined == stats.rows_kept + stats.rows_quarantined
    results = _table(spark, config, "ops", "quality_results")
    parse = results.filter(F.col("expectation_id") == "tracelake_parse").first()
    assert (parse.element_count, parse.unexpected_count, parse.success) == (8, 2, False)
    gpu = results.filter(F.col("expectation_id") == "column_values_to_be_in_set(num_gpu)").first()
    assert (gpu.element_count, gpu.unexpected_count, gpu.severity) == (6, 1, "quarantine")


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_rerun_is_a_no_op_and_a_changed_file_changes_only_its_rows(engine, spark, config, tmp_path):
    raw = _raw(tmp_path, [f"{job_id(6)},600,700,8", f"{job_id(7)},700,800,2"])
    run_ingest(engine, config, "itp", raw)
    path = config.table_path("bronze", "itp_jobs")
    first = _table(spark, config, "bronze", "itp_jobs").drop("ingest_ts")
    first_rows = sorted(first.collect())
    version = history(engine, path, 1)[0].version

    run_ingest(engine, config, "itp", raw)  # identical inputs
    again = _table(spark, config, "bronze", "itp_jobs").drop("ingest_ts")
    assert_same_rows(again, first)
    assert sorted(again.collect()) == first_rows  # same run ids too: no row was rewritten
    assert history(engine, path, 1)[0].version == version

    # cluster02 changes: job 6 gets another duration, job 7 disappears, job 8 appears
    raw = _raw(tmp_path, [f"{job_id(6)},600,999,8", f"{job_id(8)},800,800,4"])
    run_ingest(engine, config, "itp", raw)
    table = _table(spark, config, "bronze", "itp_jobs")
    assert table.count() == 7
    runs = {r.job_id: r.ingest_run_id for r in table.select("job_id", "ingest_run_id").collect()}
    old_run = first_rows[0].ingest_run_id
    assert {j for j, r in runs.items() if r != old_run} == {job_id(6), job_id(8)}
    assert job_id(7) not in runs
    assert table.filter(F.col("job_id") == job_id(6)).first().duration == 999
    assert table.filter(F.col("cluster") == "cluster01").count() == 5


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_critical_failure_commits_nothing_to_the_target(engine, spark, config, tmp_path):
    run_ingest(engine, config, "itp", _raw(tmp_path, [f"{job_id(6)},600,700,8"]))
    path = config.table_path("bronze", "itp_jobs")
    before_version = history(engine, path, 1)[0].version
    before = _table(spark, config, "bronze", "itp_jobs").collect()

    # every row of every file broken: the row-count rule (critical) fails on zero parsed rows
    write_archive(tmp_path / "bad" / "raw-traces.tar.gz", {
        "cluster01.csv": itp_csv(["x,1"]), "cluster02.csv": itp_csv(["y"])})
    with pytest.raises(QualityGateFailed, match="critical expectation.*table_row_count_to_be_between"):
        run_ingest(engine, config, "itp", str(tmp_path / "bad"))
    assert history(engine, path, 1)[0].version == before_version
    assert sorted(_table(spark, config, "bronze", "itp_jobs").collect()) == sorted(before)
    failed = _table(spark, config, "ops", "quality_results").filter(
        ~F.col("success") & (F.col("severity") == "critical") & (F.col("table_name") == "bronze.itp_jobs"))
    assert [r.expectation_id for r in failed.collect()] == ["table_row_count_to_be_between"]


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_tables_are_addressable_by_layer_and_name(engine, spark, config, tmp_path):
    run_ingest(engine, config, "itp", _raw(tmp_path, [f"{job_id(6)},600,700,8"]))
    register_all(spark, config)
    got = spark.sql("SELECT cluster, count(*) AS n FROM bronze.itp_jobs GROUP BY cluster")
    assert_same_rows(got, spark.createDataFrame([("cluster01", 5), ("cluster02", 1)], "cluster string, n long"))
    assert spark.sql("SELECT count(*) FROM quarantine.itp_jobs").first()[0] == 0


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_a_run_adds_one_version_to_ops_quality_results_and_maintain_compacts_it(engine, config, tmp_path):
    """All of a run's rule results in one commit (it was one per table: ~40 files a run), a
    critical failure's run included; `maintain --optimize` folds the runs' files into one."""
    from helpers import tracelake_in_process

    from tracelake.delta.maintenance import active_files

    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1", f"{job_id(2)},2,600,2"])})
    ops = config.table_path("ops", "quality_results")
    stats = run_ingest(engine, config, "itp", str(raw))
    assert len(stats) == 7  # bronze.itp_jobs, silver.jobs and five gold tables, each with its rules
    # version 0 is the empty table: "CREATE TABLE" by Sail and deltalake, "WRITE" by delta-spark
    assert [c.version for c in history(engine, ops)] == [1, 0] and history(engine, ops)[0].operation == "WRITE"
    tables = {r.table_name for r in engine.spark.read.format("delta").load(ops).select("table_name").distinct().collect()}
    assert tables == {s.table for s in stats}
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv(["x,1"])})
    with pytest.raises(QualityGateFailed):  # no row parses: the row-count rule is critical
        run_ingest(engine, config, "itp", str(raw))
    assert [c.version for c in history(engine, ops)] == [2, 1, 0]  # the failed run's results: one commit
    runs = engine.spark.read.format("delta").load(ops).select("run_id").distinct().count()
    assert runs == 2
    # a file per run on the local profile; delta-spark writes a file per task of the append
    files = active_files(engine, ops)
    assert files == 2 or (engine.profile == "spark" and files >= 2)
    done = tracelake_in_process(engine, "maintain", "ops.quality_results", "--optimize", "--lake", config.lake_root)
    assert done.returncode == 0, done.stderr
    table, _, operation, files_before, files_after = done.stdout.splitlines()[1].split(",")
    assert (table, operation, files_before, files_after) == ("ops.quality_results", "OPTIMIZE", str(files), "1")


@pytest.mark.skipif(PROFILE != "local", reason="the local profile's own catalog, which ends with its command")
def test_an_ingest_names_the_tables_unless_its_catalog_ends_with_the_command(engine, spark, config, tmp_path,
                                                                          monkeypatch):
    """run_ingest registers the lake's tables for a caller that queries them next by name, and
    so does the CLI on an engine whose catalog others may read after it (a Connect server, a
    served engine: here the run's own engine, as the in-process CLI gets it); the CLI on a local
    engine of its own skips that (a statement per table), since that catalog ends with it."""
    from helpers import tracelake_in_process

    from tracelake.engine import Engine
    from tracelake.run import pipeline

    calls: list[str] = []
    monkeypatch.setattr(pipeline, "register_all", lambda session, conf: calls.append(conf.lake_root) or [])
    raw = _raw(tmp_path, [f"{job_id(6)},600,700,8"])
    run_ingest(engine, config, "itp", raw)
    assert calls == [config.lake_root]
    shared = str(tmp_path / "shared-lake")
    done = tracelake_in_process(engine, "ingest", "itp", "--raw", raw, "--lake", shared)
    assert done.returncode == 0, done.stderr[-2000:]
    assert calls == [config.lake_root, shared]

    class OwnServer:
        stopped = 0

        def stop(self) -> None:
            OwnServer.stopped += 1

    def own_engine(conf):
        return Engine("local", spark, _server=OwnServer(), _owns_session=False)

    done = tracelake_in_process(engine, "ingest", "itp", "--raw", raw, "--lake", str(tmp_path / "own-lake"),
                                start=own_engine)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (calls, OwnServer.stopped) == ([config.lake_root, shared], 1)
    assert [Engine(p, spark, _server=s).catalog_ends_with_it for p, s in
            (("local", OwnServer()), ("local", None), ("connect", OwnServer()), ("spark", None))] == \
        [True, False, False, False]


def test_registering_a_lake_makes_each_layer_once_and_each_table_once(config):
    """register_all on a lake of three tables in two layers: one CREATE DATABASE per layer (it
    was one per table: a round trip each for every query), one CREATE TABLE per table, and
    nothing the second time in the same session."""
    import gc
    from unittest import mock

    from tracelake.delta.catalog import register_all

    for layer, table in (("bronze", "itp_jobs"), ("bronze", "zeus_train"), ("quarantine", "itp_jobs")):
        log = Path(config.table_path(layer, table)) / "_delta_log"
        log.mkdir(parents=True)
        (log / "00000000000000000000.json").write_text("{}\n")
    session = mock.Mock()
    assert register_all(session, config) == ["bronze.itp_jobs", "bronze.zeus_train", "quarantine.itp_jobs"]
    statements = [" ".join(w for w in c.args[0].split()[:6] if w not in ("IF", "NOT", "EXISTS"))
                  for c in session.sql.call_args_list]
    assert statements == ["CREATE DATABASE bronze", "CREATE TABLE bronze.itp_jobs", "CREATE TABLE bronze.zeus_train",
                          "CREATE DATABASE quarantine", "CREATE TABLE quarantine.itp_jobs"]
    register_all(session, config)
    assert session.sql.call_count == 5
    # what a session registered goes with it: a later session (which may get its id) starts afresh
    from tracelake.delta import catalog

    assert session in catalog._registered
    del session
    gc.collect()
    later = mock.Mock()
    register_all(later, config)
    assert later.sql.call_count == 5


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_column_docs_travel_with_the_tables(engine, config, tmp_path):
    """Readers outside tracelake (here the `deltalake` package) see each column's description and
    unit as its comment and the table's description, for a merged bronze table and a rebuilt gold one,
    also after a second run."""
    from deltalake import DeltaTable

    from tracelake.schema import load_schema

    for _ in range(2):
        run_ingest(engine, config, "itp", _raw(tmp_path, [f"{job_id(6)},600,700,8"]))
    for name in ("bronze.itp_jobs", "gold.jobs_gpu_count_cdf", "ops.quality_results"):
        layer, table = name.split(".")
        stored = DeltaTable(f"{config.lake_root}/{layer}/{table}")
        schema = load_schema(name)
        assert stored.metadata().description == schema.description, name
        assert {f.name: f.metadata.get("comment") for f in stored.schema().fields} == \
            {c.name: c.comment for c in schema.columns}, name
    duration = load_schema("bronze.itp_jobs").column("duration")
    assert duration.comment == f"{duration.description} [unit: s]"
