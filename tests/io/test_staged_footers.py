"""io.staging.staged_footers: a staged parse's counts from its Parquet footers, as the engine of
each profile writes them, equal to what a scan of the rows counts."""

import pytest
from pyspark.sql import functions as F

from tracelake.io.staging import Footers, Scratch, stage, staged_footers

pytestmark = pytest.mark.portable
ROWS = "n bigint, flag boolean, copy boolean, _parse_errors array<string>"


def _staged(spark, tmp_path, rows, apart=None):
    return stage(spark.createDataFrame(rows, ROWS), Scratch(str(tmp_path / "staged.parquet")), apart)


def test_clean_rows_are_told_by_the_footers_alone(spark, tmp_path):
    staged = _staged(spark, tmp_path, [(i, False, False, []) for i in range(5)])
    assert staged.count() == 5
    assert staged_footers(tmp_path / "staged.parquet", ["flag", "copy"], "_parse_errors") == Footers(5, frozenset(), False)


def test_a_true_flag_and_a_problem_are_seen_as_a_scan_sees_them(spark, tmp_path):
    rows = [(1, False, False, []), (2, True, False, []), (3, False, None, ["n: bad"]), (4, None, False, [])]
    staged = _staged(spark, tmp_path, rows, apart="copy")  # two folders, as a pass with rows apart
    got = staged_footers(tmp_path / "staged.parquet", ["flag"], "_parse_errors")
    assert got == Footers(4, frozenset({"flag"}), True)
    scanned = staged.agg(F.count(F.lit(1)), F.max("flag"), F.max(F.size("_parse_errors"))).first()
    assert (scanned[0], scanned[1], scanned[2] > 0) == (got.rows, "flag" in got.true, got.problems)


def test_footers_that_cannot_tell_say_so(spark, tmp_path):
    _staged(spark, tmp_path, [(1, False, False, [])])
    assert staged_footers(tmp_path / "staged.parquet", ["no_such_column"], "_parse_errors") is None
    assert staged_footers(tmp_path / "staged.parquet", ["flag"], "no_such_list") is None
    assert staged_footers("s3://bucket/staged.parquet", ["flag"], "_parse_errors") is None
