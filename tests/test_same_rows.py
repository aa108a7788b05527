"""The suite's frame comparison (same_rows.py) passes exactly where assertDataFrameEqual does, on
the forms the suite compares: rows in another order, doubles inside and outside the tolerance,
nulls, NaN, arrays, timestamps, and columns in another order."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.errors import PySparkAssertionError
from pyspark.testing import assertDataFrameEqual
from same_rows import assert_same_rows, same_rows

SCHEMA = "k string, n bigint, x double, t timestamp, tags array<string>"
BASE = [("a", 1, 0.5, datetime(2024, 5, 24, 0, 0, 0), ["p"]),
        ("b", 2, None, datetime(2024, 5, 24, 0, 0, 1), []),
        ("c", 3, float("nan"), None, None)]


def _with(row: int, column: int, value):
    rows = [list(r) for r in BASE]
    rows[row][column] = value
    return [tuple(r) for r in rows]


CASES = [
    ("another order", list(reversed(BASE)), True),
    ("a double inside the tolerance", _with(0, 2, 0.5 * (1 + 1e-7)), True),
    ("a double outside it", _with(0, 2, 0.5001), False),
    ("null against a double", _with(1, 2, 0.0), False),
    ("another integer", _with(1, 1, 20), False),
    ("another array", _with(0, 4, ["p", "q"]), False),
    ("null against an empty array", _with(1, 4, None), False),
    ("another instant", _with(0, 3, datetime(2024, 5, 24, 0, 0, 2)), False),
    ("a row less", BASE[:2], False),
]


@pytest.mark.portable
@pytest.mark.parametrize("name, other, equal", CASES, ids=[c[0] for c in CASES])
def test_it_passes_where_assert_dataframe_equal_passes(spark, name, other, equal):
    actual, expected = spark.createDataFrame(BASE, SCHEMA), spark.createDataFrame(other, SCHEMA)
    assert same_rows(actual.toArrow(), expected.toArrow()) is equal
    for check in (assertDataFrameEqual, assert_same_rows):
        if equal:
            check(actual, expected)
        else:
            with pytest.raises(PySparkAssertionError):
                check(actual, expected)


@pytest.mark.portable
def test_columns_in_another_order_are_compared_by_name_when_asked(spark):
    actual = spark.createDataFrame(BASE, SCHEMA)
    expected = actual.select("tags", "t", "x", "n", "k")
    assert_same_rows(actual, expected, ignoreColumnOrder=True)
    with pytest.raises(PySparkAssertionError):
        assert_same_rows(actual, expected)
