"""io.staging.staged_footers: a staged parse's counts from its Parquet footers, as the engine of
each profile writes them, equal to what a scan of the rows counts."""

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from tracelake.io.staging import Footers, Scratch, stage, staged_footers

pytestmark = pytest.mark.portable
ROWS = "n bigint, flag boolean, copy boolean, verdict tinyint"


def _staged(spark, tmp_path, rows, apart=None):
    return stage(spark.createDataFrame(rows, ROWS), Scratch(str(tmp_path / "staged.parquet")), apart)


def test_clean_rows_are_told_by_the_footers_alone(spark, tmp_path):
    staged = _staged(spark, tmp_path, [(i, False, False, 0) for i in range(5)])
    assert staged.count() == 5
    got = staged_footers(tmp_path / "staged.parquet", ["flag", "copy"], "verdict")
    filled = [f for f in (tmp_path / "staged.parquet").rglob("*.parquet") if pq.read_metadata(f).num_rows]
    assert got == Footers(5, {}, 0, len(filled))
    assert got.true == frozenset()


def test_a_true_flag_and_the_worst_verdict_are_seen_as_a_scan_sees_them(spark, tmp_path):
    rows = [(1, False, False, 0), (2, True, False, 1), (3, False, None, 3), (4, None, False, 2)]
    staged = _staged(spark, tmp_path, rows, apart="copy")  # two folders, as a pass with rows apart
    got = staged_footers(tmp_path / "staged.parquet", ["flag"], "verdict")
    files = [f for f in (tmp_path / "staged.parquet").rglob("*.parquet") if pq.read_metadata(f).num_rows]
    with_flag = {str(f) for f in files if True in pq.read_table(f, columns=["flag"]).column("flag").to_pylist()}
    assert (got.rows, got.true, got.worst, got.files) == (4, frozenset({"flag"}), 3, len(files))
    assert set(got.true_in["flag"]) == with_flag and len(with_flag) == 1
    scanned = staged.agg(F.count(F.lit(1)), F.max("flag"), F.max("verdict")).first()
    assert (scanned[0], scanned[1], scanned[2]) == (got.rows, "flag" in got.true, got.worst)


def test_footers_that_cannot_tell_say_so(spark, tmp_path):
    _staged(spark, tmp_path, [(1, False, False, 0)])
    assert staged_footers(tmp_path / "staged.parquet", ["no_such_column"], "verdict") is None
    assert staged_footers(tmp_path / "staged.parquet", ["flag"], "no_such_column") is None
    assert staged_footers("s3://bucket/staged.parquet", ["flag"], "verdict") is None
