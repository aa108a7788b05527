"""A look for keys a table shares with new rows reads only the stored rows that could share one
(delta.catalog.key_bounds): each key column within the new rows' range, or null where theirs is."""

from datetime import datetime

import pytest
from pyspark.sql import functions as F

from tracelake.delta.catalog import key_bounds

pytestmark = pytest.mark.portable

KEYS = ["metric", "ts", "node", "gpu"]
SCHEMA = "metric string, ts timestamp, node string, gpu int, value double"


def _stored(spark):
    rows = [
        ("GPU_UTIL", datetime(2023, 7, 1, 0, 0, 0), "n1", 0, 1.0),   # a month before
        ("GPU_UTIL", datetime(2023, 9, 1, 0, 0, 0), "n1", 0, 2.0),   # the new rows' first instant
        ("GPU_UTIL", datetime(2023, 9, 1, 0, 0, 27), "n2", 1, 3.0),  # the last, exactly
        ("GPU_UTIL", datetime(2023, 9, 1, 0, 0, 28), "n2", 1, 4.0),  # a microsecond past would fail too
        ("NODE_CPU", datetime(2023, 9, 1, 0, 0, 0), "n1", None, 5.0),  # a metric outside, a null GPU
        ("FB_USED", datetime(2023, 9, 1, 0, 0, 0), "n1", None, 6.0),   # inside the metrics' range, null GPU
        ("GPU_UTIL", datetime(2023, 9, 1, 0, 0, 0), "n9", 0, 7.0),   # a node outside
    ]
    return spark.createDataFrame(rows, SCHEMA)


def test_stored_rows_outside_the_new_rows_ranges_are_left_out(spark):
    new = spark.createDataFrame([("GPU_UTIL", datetime(2023, 9, 1, 0, 0, 0), "n1", 0, 9.0),
                                 ("FB_USED", datetime(2023, 9, 1, 0, 0, 27), "n2", 1, 9.0)], SCHEMA)
    kept = _stored(spark).filter(key_bounds(new, KEYS)).orderBy("value")
    assert [r.value for r in kept.collect()] == [2.0, 3.0]


def test_a_null_in_a_new_rows_key_lets_stored_nulls_in(spark):
    new = spark.createDataFrame([("FB_USED", datetime(2023, 9, 1, 0, 0, 0), "n1", None, 9.0),
                                 ("GPU_UTIL", datetime(2023, 9, 1, 0, 0, 27), "n2", 1, 9.0)], SCHEMA)
    kept = _stored(spark).filter(key_bounds(new, KEYS)).orderBy("value")
    assert [r.value for r in kept.collect()] == [3.0, 6.0]  # 2.0's GPU 0 is outside 1..1


def test_keys_every_new_row_leaves_null_match_only_stored_nulls(spark):
    new = spark.createDataFrame([("FB_USED", datetime(2023, 9, 1, 0, 0, 0), "n1", None, 9.0)], SCHEMA)
    assert [r.value for r in _stored(spark).filter(key_bounds(new, KEYS)).collect()] == [6.0]


def test_every_stored_row_sharing_a_key_passes(spark):
    stored = _stored(spark)
    new = spark.createDataFrame([r for r in stored.collect() if r.value in (1.0, 5.0, 7.0)], SCHEMA)
    keys = new.select(*[F.col(k).alias(f"n_{k}") for k in KEYS])
    shared = stored.join(keys, [stored[k].eqNullSafe(keys[f"n_{k}"]) for k in KEYS], "left_semi")
    assert sorted(r.value for r in shared.collect()) == [1.0, 5.0, 7.0]
    assert shared.subtract(stored.filter(key_bounds(new, KEYS))).count() == 0
