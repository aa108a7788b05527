"""The gate's own row-level evaluation of quarantine rules (tracelake.rowrules) against GX's:
on a sample with nulls, duplicates, conditions and edge values, every supported expectation
rejects exactly the rows GX lists in its unexpected_index_list."""

from __future__ import annotations

import pytest

from tracelake.quality import _runner
from tracelake.rowrules import rejects

ROWS = [
    # id, a, b, s, t, d
    ("r1", 1, 0, "x-1", "up", 0.5),
    ("r2", 2, 2, "x-2", "down", 1.0),
    ("r3", None, 1, "y", None, None),
    ("r4", 5, None, None, "up", -1.0),
    ("r5", None, None, "x-1", "sideways", 2.5),
    ("r6", 2, 3, "x-2", "up", 0.0),
    ("r7", 7, 7, "z-9", "up", 100.0),
    ("r8", 1, 0, "x-1", "up", 0.5),
]
SCHEMA = "id string, a int, b int, s string, t string, d double"
EXPECTATIONS = [
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "t", "row_condition": "a > 1",
                                                                "condition_parser": "spark"}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "d", "min_value": 0, "max_value": 2}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "d", "min_value": 0, "strict_min": True}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "a", "max_value": 5}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "t", "value_set": ["up", "down"]}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "^x-[0-9]+$"}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "s", "regex": "^x", "row_condition": "t = 'up'",
                                                                "condition_parser": "spark"}},
    {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "s"}},
    {"type": "expect_compound_columns_to_be_unique", "kwargs": {"column_list": ["a", "b"]}},
    {"type": "expect_compound_columns_to_be_unique", "kwargs": {"column_list": ["s", "t"]}},
    {"type": "expect_column_pair_values_a_to_be_greater_than_b", "kwargs": {"column_A": "a", "column_B": "b"}},
    {"type": "expect_column_pair_values_a_to_be_greater_than_b", "kwargs": {"column_A": "a", "column_B": "b",
                                                                             "or_equal": True,
                                                                             "ignore_row_if": "either_value_is_missing"}},
    {"type": "expect_column_pair_values_to_be_equal", "kwargs": {"column_A": "a", "column_B": "b"}},
]


@pytest.mark.portable
@pytest.mark.parametrize("expectation", EXPECTATIONS, ids=lambda e: f"{e['type'][7:]}:{sorted(e['kwargs'].items())}")
def test_rows_rejected_equal_gx_unexpected_rows(spark, expectation):
    frame = spark.createDataFrame(ROWS, SCHEMA)
    fmt = {"result_format": "COMPLETE", "unexpected_index_column_names": ["id"]}
    [raw] = _runner().run(frame, [{**expectation, "meta": {"severity": "quarantine"}}], fmt)
    gx = sorted(item["id"] for item in raw.result.get("unexpected_index_list", []))
    ours = sorted(r.id for r in frame.select("id", rejects(expectation).alias("_bad")).filter("_bad").collect())
    assert ours == gx
    assert raw.result.get("unexpected_count", 0) == len(ours)
