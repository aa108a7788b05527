"""io.staging.settle: a fast parse the engine cannot finish is parsed again exactly, while an
error of this process's own code is raised, not hidden behind that fallback."""

import pyarrow as pa
import pytest

from tracelake.io.staging import Checked, Scratch, settle

pytestmark = pytest.mark.portable


def _failing(batches):
    for _ in batches:
        raise ValueError("a file the fast read cannot take")
    yield pa.record_batch([pa.array([1], pa.int64())], names=["n"])


def _checked(spark, frame):
    exact = spark.createDataFrame([(7,), (8,)], "n bigint")
    return Checked(frame, lambda staged: True, lambda: exact)


def test_an_engine_failure_of_the_fast_parse_falls_back_to_the_exact_one(spark, tmp_path):
    fast = spark.range(1).mapInArrow(_failing, "n bigint")
    staged, held = settle(_checked(spark, fast), Scratch(str(tmp_path / "p.parquet")))
    assert (sorted(r.n for r in staged.collect()), held) == ([7, 8], False)


def test_an_error_of_our_own_code_is_raised(spark, tmp_path):
    def project(frame, proven):  # one argument short of what settle passes
        return frame
    fast = spark.createDataFrame([(1,)], "n bigint")
    with pytest.raises(TypeError):
        settle(_checked(spark, fast), Scratch(str(tmp_path / "p.parquet")), project)
