"""silver.jobs and the gold job characterization against the generator's ground truth, the
pure transforms on hand-made rows, and `tracelake report`.

The generated world's scale is TRACELAKE_ACME_TEST_SCALE (default 0.05, ~44k jobs); the same
assertions were run by hand at scale 1 (880,740 jobs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from conftest import make_config
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.crosstrace.characterize import duration_comparison, gpu_count_cdf, job_characterization
from tracelake.crosstrace.failures import job_failures
from tracelake.crosstrace.unify import unify_jobs
from tracelake.run.pipeline import run_ingest
from tracelake.run.registry import generate
from tracelake.schema import load_schema
from tracelake.sources.acme.synth import jobs as generate_jobs
from tracelake.sources.acme.synth.jobs import GROUND_TRUTH

SCALE = float(os.environ.get("TRACELAKE_ACME_TEST_SCALE", "0.05"))
EXACT = {"rel": 1e-9, "abs": 1e-9}  # floats summed in another order: equal within rounding


@pytest.fixture(scope="module")
def world(engine, tmp_path_factory):
    """A generated AcmeTrace world and a small ITP release, ingested into one lake."""
    root = tmp_path_factory.mktemp("acme-world")
    config = make_config(root / "lake")
    acme_raw, itp_raw = root / "acme", root / "itp"
    acme_raw.mkdir()
    generate_jobs.generate(acme_raw, SCALE, seed=11)  # the job files only: utilization has its own tests
    generate("itp", itp_raw, 0.01, seed=11)
    stats = run_ingest(engine, config, "acme", str(acme_raw)) + run_ingest(engine, config, "itp", str(itp_raw))
    truth = json.loads((acme_raw / GROUND_TRUTH).read_text())
    return config, truth, {s.table: s for s in stats}


def _read(spark, config, name):
    layer, table = name.split(".")
    return spark.read.format("delta").load(config.table_path(layer, table))


def test_gold_groups_equal_the_ground_truth(spark, world):
    config, truth, _ = world
    acme = _read(spark, config, "gold.jobs_characterization").filter(F.col("trace") == "acme")
    gold = {(r.cluster, r.job_type, r.final_state): r for r in acme.collect()}
    expected = {(c, g["job_type"], g["final_state"]): g for c, t in truth["clusters"].items() for g in t["groups"]}
    assert sorted(gold) == sorted(expected)
    for key, g in expected.items():
        row = gold[key]
        buckets = {name: row[f"gpu_jobs_{name}"] for name in g["gpu_buckets"]}
        assert (row.jobs, row.gpu_jobs, buckets) == (g["jobs"], g["gpu_jobs"], g["gpu_buckets"]), key
        for col in ("gpu_hours", "gpu_hour_share", "duration_mean_s", "duration_median_s", "duration_p90_s",
                    "queue_mean_s", "queue_median_s", "queue_p90_s"):
            assert row[col] == (None if g[col] is None else pytest.approx(g[col], **EXACT)), (key, col)
    for cluster, t in truth["clusters"].items():
        mine = [r for k, r in gold.items() if k[0] == cluster]
        assert sum(r.jobs for r in mine) == t["jobs"] and sum(r.gpu_jobs for r in mine) == t["gpu_jobs"]
        for job_type, share in t["gpu_hour_share_by_type"].items():
            got = sum(r.gpu_hour_share for r in mine if r.job_type == job_type)
            assert got == pytest.approx(share, **EXACT), (cluster, job_type)


def test_calibration_survives_the_pipeline(spark, world):
    """The published shapes, read back from gold (scale-independent ones)."""
    config, truth, _ = world
    rows = _read(spark, config, "gold.jobs_characterization").filter(F.col("trace") == "acme").collect()
    share = {(r.cluster, r.job_type): 0.0 for r in rows}
    for r in rows:
        share[(r.cluster, r.job_type)] += r.gpu_hour_share
    assert round(share[("seren", "Pretrain")], 3) == 0.695 and round(share[("kalos", "Pretrain")], 3) == 0.955
    gpu = {c: sum(r.gpu_jobs for r in rows if r.cluster == c) for c in ("seren", "kalos")}
    assert gpu == {"seren": round(450_590 * SCALE), "kalos": round(19_907 * SCALE)}
    assert max(r.gpu_jobs_257_plus for r in rows) > 0


def test_duration_comparison_and_gpu_count_cdf_equal_the_ground_truth(spark, world):
    config, truth, _ = world
    comparison = {(r.trace, r.cluster): r for r in _read(spark, config, "gold.jobs_duration_comparison").collect()}
    for cluster, t in truth["clusters"].items():
        row = comparison[("acme", cluster)]
        assert row.gpu_jobs == t["gpu_jobs"]
        for stat in ("median", "mean", "p90"):
            assert row[f"duration_{stat}_s"] == pytest.approx(t[f"gpu_job_duration_{stat}_s"], **EXACT)
    assert comparison[("acme", "all")].gpu_jobs == sum(t["gpu_jobs"] for t in truth["clusters"].values())
    itp = [k for k in comparison if k[0] == "itp"]
    assert len(itp) == 11 and ("itp", "all") in itp  # 10 clusters + the whole trace
    assert comparison[("itp", "all")].duration_median_s == comparison[("elasticflow", "all")].duration_median_s

    cdf = _read(spark, config, "gold.jobs_gpu_count_cdf").filter(F.col("trace") == "acme").collect()
    for cluster, t in truth["clusters"].items():
        mine = sorted((r for r in cdf if r.cluster == cluster), key=lambda r: r.gpu_num)
        expected = {k: v["gpu_jobs"] for k, v in t["gpu_count"].items()}
        assert {str(r.gpu_num): r.gpu_jobs for r in mine} == expected
        assert mine[-1].gpu_num == t["gpu_num_max"] == 1024
        assert (mine[-1].job_cdf, mine[-1].gpu_time_cdf) == (1.0, pytest.approx(1.0, **EXACT))
        one = t["gpu_count"]["1"]
        assert mine[0].job_cdf == pytest.approx(one["gpu_jobs"] / t["gpu_jobs"], **EXACT)
        assert mine[0].gpu_time_cdf == pytest.approx(one["gpu_hours"] / t["gpu_hours"], **EXACT)

    quantiles = _read(spark, config, "gold.jobs_duration_quantiles")
    medians = quantiles.filter("trace = 'acme' AND job_type = 'all' AND q = 50").collect()
    median = {r.cluster: r.duration_s for r in medians}
    assert median == {c: pytest.approx(t["gpu_job_duration_median_s"], **EXACT) for c, t in truth["clusters"].items()}


def test_failures_equal_the_ground_truth_and_the_failed_jobs_run_times(spark, world):
    """Counts and GPU time from the generator's groups; run-time quantiles from the failed jobs'
    durations in silver.jobs, taken with numpy (linear, its default)."""
    config, truth, _ = world
    gold = {(r.trace, r.cluster, r.job_type): r for r in _read(spark, config, "gold.jobs_failures").collect()}
    assert {k[0] for k in gold} == {"acme"}  # itp and elasticflow record no final states
    jobs = _read(spark, config, "silver.jobs").filter("trace = 'acme'").select(
        "cluster", "job_type", "final_state", "duration_s").toPandas()
    failed = ("FAILED", "NODE_FAIL")
    for cluster, t in truth["clusters"].items():
        ended = [g for g in t["groups"] if g["final_state"] != "RUNNING"]
        for job_type in sorted({g["job_type"] for g in ended}) + ["all"]:
            mine = [g for g in ended if job_type in ("all", g["job_type"])]
            row = gold[("acme", cluster, job_type)]
            counts = (sum(g["jobs"] for g in mine), sum(g["jobs"] for g in mine if g["final_state"] in failed),
                      sum(g["jobs"] for g in mine if g["final_state"] == "NODE_FAIL"))
            assert (row.jobs, row.failed_jobs, row.node_fail_jobs) == counts, (cluster, job_type)
            assert row.failed_job_share == pytest.approx(counts[1] / counts[0], **EXACT)
            hours = sum(g["gpu_hours"] for g in mine)
            failed_hours = sum(g["gpu_hours"] for g in mine if g["final_state"] in failed)
            assert (row.gpu_hours, row.failed_gpu_hours, row.failed_gpu_hour_share) == (
                pytest.approx(hours, **EXACT), pytest.approx(failed_hours, **EXACT),
                pytest.approx(failed_hours / hours, **EXACT))
            group = jobs[(jobs.cluster == cluster) & ((jobs.job_type == job_type) | (job_type == "all"))]
            runs = group[group.final_state.isin(failed)].duration_s.to_numpy()
            expected = np.percentile(runs, [25, 50, 75, 90]) if len(runs) else [None] * 4
            got = [row.failed_duration_p25_s, row.failed_duration_p50_s, row.failed_duration_p75_s,
                   row.failed_duration_p90_s]
            assert got == [None if v is None else pytest.approx(v, **EXACT) for v in expected], (cluster, job_type)
            early = (runs <= 600).mean() if len(runs) else None
            assert row.failed_within_10min_share == (None if early is None else pytest.approx(early, **EXACT))
            completed = group[group.final_state == "COMPLETED"].duration_s
            assert row.completed_duration_p50_s == pytest.approx(completed.median(), **EXACT)
    assert len(gold) == sum(len({g["job_type"] for g in t["groups"]}) + 1 for t in truth["clusters"].values())
    # the generator draws failed run times at half a completed one's: failures come early here
    assert all(gold[("acme", c, "Eval")].failed_duration_p50_s < gold[("acme", c, "Eval")].completed_duration_p50_s
               for c in truth["clusters"])


def test_silver_rows_per_trace_equal_the_bronze_rows(spark, world):
    config, truth, stats = world
    per_trace = _read(spark, config, "silver.jobs").groupBy("trace").agg(F.count("*").alias("n"))
    silver = {r.trace: r.n for r in per_trace.collect()}
    bronze = {
        "acme": _read(spark, config, "bronze.acme_jobs").count(),
        "itp": _read(spark, config, "bronze.itp_jobs").count(),
        "elasticflow": _read(spark, config, "bronze.elasticflow_jobs").filter("variant = 'elasticflow'").count(),
    }
    assert silver == bronze
    assert bronze["acme"] == sum(t["jobs"] for t in truth["clusters"].values())
    # the ITP ingest rebuilt silver.jobs with the AcmeTrace rows still in it
    assert stats["silver.jobs"].rows_read == sum(bronze.values())


def test_report_writes_the_figures_and_the_page(world, tmp_path):
    config, _, _ = world
    out = tmp_path / "report"
    env = {**os.environ, "RUST_LOG": "error"}
    result = subprocess.run([sys.executable, "-m", "tracelake", "report", "--out", str(out),
                             "--lake", config.lake_root], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    figures = {"jobs_duration_cdf_by_type.png", "jobs_gpu_time_share_by_type.png",
               "jobs_final_state_shares.png", "jobs_gpu_count_cdf.png"}
    assert figures <= {p.name for p in out.glob("*.png")}
    for name in figures:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "index.html").read_text()
    assert all(f"src='{name}'" in page for name in figures)
    assert "GPU-job run time across traces" in page and "Jobs per cluster and job type" in page
    # the ITP archives came from `generate` (its marker names them); the AcmeTrace files were
    # written by the job generator alone, with no marker: the lake's record says which is which
    inputs = json.loads((Path(config.lake_root) / "_inputs.json").read_text())
    assert {t: v["synthetic"] for t, v in inputs.items()} == {
        "bronze.acme_jobs": False, "bronze.itp_jobs": True, "bronze.elasticflow_jobs": True}
    assert ("<p>Synthetic data (generated by `tracelake generate`, not the release&#x27;s): elasticflow, itp; "
            "figure titles say which clusters.</p>") in page
    assert "drawn dotted, its legend saying n &lt; 30: rough" in page


# --- the pure transforms on hand-made rows (portable)

def _bronze_frame(spark, table, rows):
    schema = load_schema(table)
    return spark.createDataFrame(rows, ", ".join(f"`{c.name}` {c.type}" for c in schema.data_columns))


def _ts(text):
    return datetime.fromisoformat(text)


@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_unify_jobs_recomputes_run_time_and_tolerates_missing_inputs(spark):
    assert unify_jobs(None, None, None) is None
    acme = _bronze_frame(spark, "bronze.acme_jobs", [
        ("kalos", "dlctk696s0jbvitv", "uf794", 8, 64, 960, 1000.0, 100.0, "Other", "FAILED",
         _ts("2023-05-17 11:00:58+00:00"), _ts("2023-05-17 11:01:08+00:00"), _ts("2023-05-17 11:01:16+00:00"),
         _ts("2023-05-17 11:01:16+00:00"), None, 18, 10.0, 1152.0),
        ("kalos", "dlcrunning000001", "u2", 1, 0, 4, 16.0, 8.0, "Other", "RUNNING",
         _ts("2023-08-31 20:00:00+00:00"), _ts("2023-08-31 20:00:02+00:00"), None, None, None, None, 2.0, None),
    ])
    itp = _bronze_frame(spark, "bronze.itp_jobs", [("cluster01", "a-1", 100, 700, 4)])
    ef = _bronze_frame(spark, "bronze.elasticflow_jobs", [
        ("elasticflow", "cluster01", "a-1", 100, 5, "bert", 900, 64, 4, 700),
        ("testbed", None, "a-1", 100, 5, "bert", 900, 64, 4, 700)])
    got = unify_jobs(acme, itp, ef).select("trace", "cluster", "job_id", "submit_rel_s", "duration_s",
                                          "queue_s", "gpu_num", "gpu_hours", "job_type", "final_state")
    expected = spark.createDataFrame([
        ("acme", "kalos", "dlctk696s0jbvitv", None, 8.0, 10.0, 64, 8 * 64 / 3600, "Other", "FAILED"),
        ("acme", "kalos", "dlcrunning000001", None, None, 2.0, 0, None, "Other", "RUNNING"),
        ("itp", "cluster01", "a-1", 100, 700.0, None, 4, 700 * 4 / 3600, None, None),
        ("elasticflow", "cluster01", "a-1", 100, 700.0, None, 4, 700 * 4 / 3600, None, None),
    ], got.schema)
    assert_same_rows(got, expected)
    assert unify_jobs(None, itp, None).count() == 1


def _silver(spark, rows):
    cols = ("trace string, cluster string, job_id string, duration_s double, queue_s double, gpu_num int, "
            "gpu_hours double, job_type string, final_state string")
    return spark.createDataFrame(rows, cols)


@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_characterization_on_hand_made_jobs(spark):
    jobs = _silver(spark, [
        ("acme", "s", "1", 100.0, 0.0, 8, 800 / 3600, "Eval", "COMPLETED"),
        ("acme", "s", "2", 300.0, 10.0, 1, 300 / 3600, "Eval", "COMPLETED"),
        ("acme", "s", "3", 60.0, 20.0, 0, 0.0, "Eval", "COMPLETED"),
        ("acme", "s", "4", 3600.0, 5.0, 512, 512.0, "Pretrain", "FAILED"),
        ("acme", "s", "5", None, 1.0, 0, None, "Other", "RUNNING"),
        ("itp", "c1", "x", 600.0, None, 2, 600 * 2 / 3600, None, None),
    ])
    got = job_characterization(jobs).select(
        "trace", "cluster", "job_type", "final_state", "jobs", "gpu_jobs", "gpu_hours", "job_share", "gpu_hour_share",
        "duration_median_s", "duration_p90_s", "queue_median_s", "gpu_jobs_1", "gpu_jobs_2_8", "gpu_jobs_257_plus")
    hours = 800 / 3600 + 300 / 3600 + 512.0
    expected = spark.createDataFrame([
        # median of 60, 100, 300 = 100; p90 = 100 + 0.8 × 200 = 260 (linear, numpy's default)
        ("acme", "s", "Eval", "COMPLETED", 3, 2, 1100 / 3600, 0.6, (1100 / 3600) / hours, 100.0, 260.0, 10.0, 1, 1, 0),
        ("acme", "s", "Pretrain", "FAILED", 1, 1, 512.0, 0.2, 512.0 / hours, 3600.0, 3600.0, 5.0, 0, 0, 1),
        ("acme", "s", "Other", "RUNNING", 1, 0, 0.0, 0.2, 0.0, None, None, 1.0, 0, 0, 0),
        ("itp", "c1", "unknown", "unknown", 1, 1, 1200 / 3600, 1.0, 1.0, 600.0, 600.0, None, 0, 1, 0),
    ], got.schema)
    assert_same_rows(got, expected, rtol=1e-12)

    comparison = duration_comparison(jobs).select("trace", "cluster", "gpu_jobs", "duration_median_s", "duration_mean_s")
    assert_same_rows(comparison, spark.createDataFrame([
        ("acme", "s", 3, 300.0, 4000 / 3), ("acme", "all", 3, 300.0, 4000 / 3),
        ("itp", "c1", 1, 600.0, 600.0), ("itp", "all", 1, 600.0, 600.0)], comparison.schema), rtol=1e-12)

    cdf = gpu_count_cdf(jobs).filter("trace = 'acme'").select("gpu_num", "gpu_jobs", "job_cdf", "gpu_time_cdf")
    assert_same_rows(cdf, spark.createDataFrame([
        (1, 1, 1 / 3, (300 / 3600) / hours), (8, 1, 2 / 3, (1100 / 3600) / hours), (512, 1, 1.0, 1.0)],
        cdf.schema), rtol=1e-12)


@pytest.mark.portable
def test_failures_on_hand_made_jobs(spark):
    jobs = _silver(spark, [
        ("acme", "s", "1", 100.0, 0.0, 8, 800 / 3600, "Eval", "COMPLETED"),
        ("acme", "s", "2", 60.0, 0.0, 1, 60 / 3600, "Eval", "FAILED"),
        ("acme", "s", "3", 1200.0, 0.0, 2, 2400 / 3600, "Eval", "FAILED"),
        ("acme", "s", "4", 300.0, 0.0, 4, 1200 / 3600, "Eval", "NODE_FAIL"),
        ("acme", "s", "5", 50.0, 0.0, 0, 0.0, "Eval", "CANCELLED"),
        ("acme", "s", "6", 3600.0, 0.0, 512, 512.0, "Pretrain", "FAILED"),
        ("acme", "s", "7", None, 0.0, 8, None, "Pretrain", "RUNNING"),  # no outcome yet: left out
        ("acme", "s", "8", 10.0, 0.0, 0, 0.0, None, "TIMEOUT"),
        ("itp", "c1", "x", 600.0, None, 2, 600 * 2 / 3600, None, None),  # no final states: no rows
    ])
    got = job_failures(jobs)
    eval_hours, all_hours = 4460 / 3600, 4460 / 3600 + 512
    expected = spark.createDataFrame([
        # Eval's failed run times 60, 300, 1200: p25 = 60 + 0.5 × 240, p75 = 300 + 0.5 × 900, p90 = 300 + 0.8 × 900
        ("acme", "s", "Eval", 5, 3, 1, 0.6, eval_hours, 3660 / 3600, 1200 / 3600, 3660 / 4460,
         180.0, 300.0, 750.0, 1020.0, 2 / 3, 100.0),
        ("acme", "s", "Pretrain", 1, 1, 0, 1.0, 512.0, 512.0, 0.0, 1.0, 3600.0, 3600.0, 3600.0, 3600.0, 0.0, None),
        ("acme", "s", "unknown", 1, 0, 0, 0.0, 0.0, 0.0, 0.0, None, None, None, None, None, None, None),
        # all: 60, 300, 1200, 3600 at positions 0.75, 1.5, 2.25, 2.7
        ("acme", "s", "all", 7, 4, 1, 4 / 7, all_hours, 3660 / 3600 + 512, 1200 / 3600, (3660 / 3600 + 512) / all_hours,
         240.0, 750.0, 1800.0, 2880.0, 0.5, 100.0),
    ], got.schema)
    assert_same_rows(got, expected, rtol=1e-12)
    assert [c.name for c in load_schema("gold.jobs_failures").columns] == got.columns


def test_a_state_with_no_visible_bar_has_no_plain_legend_entry():
    """A category of no jobs is neither drawn nor in the legend; one too thin to see says so."""
    import pandas as pd

    from tracelake.crosstrace import report

    shares = pd.DataFrame({"COMPLETED": [0.9, 0.997], "FAILED": [0.1, 0.0], "TIMEOUT": [0.0, 0.003],
                           "NODE_FAIL": [0.0, 0.0]}, index=["seren", "kalos"])
    fig, ax = report._plt().subplots()
    report._stacked_shares(ax, shares, report.STATE_ORDER, report.STATE_COLOURS)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    report._plt().close(fig)
    assert labels == ["COMPLETED", "FAILED", "TIMEOUT (< 0.5%)"]
