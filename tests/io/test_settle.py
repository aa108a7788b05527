"""run.parsing.settle_parse: a fast parse the engine cannot finish is parsed again exactly, while an
error of this process's own code is raised, not hidden behind that fallback."""

import pyarrow as pa
import pytest

from tracelake.api.contract import FastParse, Parser
from tracelake.io.staging import Scratch
from tracelake.run.parsing import settle_parse
from tracelake.schema import load_schema

pytestmark = pytest.mark.portable
NO_RULES = {"expectations": []}


def _failing(batches):
    for _ in batches:
        raise ValueError("a file the fast read cannot take")
    yield pa.record_batch([pa.array([1], pa.int64())], names=["n"])


class _Given(Parser):
    """A fast parse of `frame`, parsed exactly as two rows."""

    def __init__(self, frame):
        self.frame = frame

    def parse(self, spark, files, schema, *, lake=None, scratch=None):
        return FastParse(self.frame)

    def exact(self, spark, files, schema, *, scratch=None):
        return spark.createDataFrame([(7,), (8,)], "n bigint")


def test_an_engine_failure_of_the_fast_parse_falls_back_to_the_exact_one(spark, tmp_path):
    fast = spark.range(1).mapInArrow(_failing, "n bigint")
    staged = settle_parse(spark, _Given(fast), [], load_schema("bronze.itp_jobs"), Scratch(str(tmp_path / "p.parquet")),
                          suite=NO_RULES)
    assert (sorted(r.n for r in staged.rows.collect()), staged.held) == ([7, 8], False)


def test_an_error_of_our_own_code_is_raised(spark, tmp_path):
    def project(frame, proven):  # one argument short of what settle_parse passes
        return frame
    fast = spark.createDataFrame([(1,)], "n bigint")
    with pytest.raises(TypeError):
        settle_parse(spark, _Given(fast), [], load_schema("bronze.itp_jobs"), Scratch(str(tmp_path / "p.parquet")),
                     project, suite=NO_RULES)
