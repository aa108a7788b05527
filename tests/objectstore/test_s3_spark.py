"""The `spark` profile (classic Spark with delta-spark) on a lake in an S3 bucket, through
hadoop-aws's S3A, against the S3 server on 127.0.0.1 (moto, s3kit.py): ingest with raw files
local and in the bucket (those through deploy/spark-submit.sh), `tables` and `query` on `s3://` and `s3a://`, a re-run that commits
nothing, and the local profile reading the same lake. The counts equal a local-profile ingest
of the same files into a folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import rows

from tracelake.run.registry import generate

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

SUBMIT = Path(__file__).resolve().parents[2] / "deploy" / "spark-submit.sh"
SUM = "SELECT count(*) AS n, sum(num_gpu) AS gpus FROM bronze.itp_jobs"


def tracelake(env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True,
                          env={**env, "RUST_LOG": "error"}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def listing(env: dict, lake: str) -> dict[str, tuple[int, int]]:
    """layer.table -> (rows, version) as `tables` prints them."""
    listed = rows(tracelake(env, "tables", "--lake", lake).stdout)
    return {name: (int(count), int(version)) for name, count, version, _op in listed[1:]}


def test_the_spark_profile_ingests_into_an_s3_lake_that_both_profiles_read(s3_server, s3_env, tmp_path):
    raw_itp, raw_zeus = tmp_path / "itp", tmp_path / "zeus"
    generate("itp", raw_itp, scale=0.01, seed=5)
    generate("zeus", raw_zeus, scale=0.01, seed=5)
    bucket = s3_server.new_bucket()
    s3_server.upload(raw_zeus, bucket, "raw/zeus")
    lake, local_lake = f"s3://{bucket}/lake", str(tmp_path / "local")
    spark = {**s3_env, "TRACELAKE_PROFILE": "spark"}

    tracelake(spark, "ingest", "itp", "--raw", str(raw_itp), "--lake", lake)
    # Zeus from the bucket, through deploy/spark-submit.sh (which adds the S3A jars for an S3 lake)
    submitted = subprocess.run(["bash", str(SUBMIT), "zeus", f"s3://{bucket}/raw/zeus", lake], capture_output=True,
                               text=True, env={**s3_env, "RUST_LOG": "error", "PYSPARK_PYTHON": sys.executable},
                               timeout=900)
    assert submitted.returncode == 0 and "ingest summary" in submitted.stdout, submitted.stderr[-3000:]
    for source, raw in (("itp", raw_itp), ("zeus", raw_zeus)):
        tracelake(s3_env, "ingest", source, "--raw", str(raw), "--lake", local_lake)
    on_spark, local = listing(spark, lake), listing(s3_env, local_lake)
    assert {t: n for t, (n, _v) in on_spark.items()} == {t: n for t, (n, _v) in local.items()}
    assert on_spark["bronze.itp_jobs"][0] > 0 and on_spark["bronze.zeus_train"][0] > 0

    tracelake(spark, "ingest", "itp", "--raw", str(raw_itp), "--lake", lake)  # the same files again
    again = listing(spark, lake)
    assert {t: v for t, v in again.items() if t != "ops.quality_results"} == \
        {t: v for t, v in on_spark.items() if t != "ops.quality_results"}

    expected = rows(tracelake(s3_env, "query", SUM, "--lake", local_lake).stdout)
    assert rows(tracelake(spark, "query", SUM, "--lake", f"s3a://{bucket}/lake").stdout) == expected
    assert rows(tracelake(s3_env, "query", SUM, "--lake", lake).stdout) == expected  # the local profile reads Spark's lake
