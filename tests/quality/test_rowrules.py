"""The gate's own row-level evaluation of quarantine rules (tracelake.quality.rowrules) against GX's:
on a sample with nulls, duplicates, conditions and edge values, every supported expectation
rejects exactly the rows GX lists in its unexpected_index_list."""

from __future__ import annotations

import json

import pytest

from tracelake.quality.gate import _runner
from tracelake.quality.rowrules import rejects

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


SUMMARY_EXTRA = [
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}},
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 10, "max_value": 20}},
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"max_value": 8, "strict_max": True}},
    {"type": "unexpected_rows_expectation", "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE a > 1",
                                                       "description": "a above one"}},
    {"type": "unexpected_rows_expectation", "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE a > 100"}},
    {"type": "expect_column_values_to_be_between", "kwargs": {"column": "d", "min_value": 0, "max_value": 2, "mostly": 0.5}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a", "mostly": 0.7}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "t", "value_set": ["up"], "mostly": 0.8}},
]


def _fields(result):
    return (result.expectation_id, result.expectation, result.severity, result.success,
            result.element_count, result.unexpected_count, result.unexpected_percent, result.observed_value)


def _gx_summary(frame, suite):
    from tracelake.quality.gate import _to_rule_result, _with_rate, expectation_id

    by_id = {expectation_id(e): e for e in suite["expectations"]}
    results = [_to_rule_result(raw, by_id)[0] for raw in _runner().run(frame, suite["expectations"],
                                                                        {"result_format": "SUMMARY"})]
    total = frame.count()
    return {r.expectation_id: _with_rate(r, total) if r.element_count is None and r.unexpected_count is not None
            else r for r in results}


def _numbered(expectations, severity="warning"):
    return [{**e, "meta": {"severity": severity, "id": f"e{i}"}} for i, e in enumerate(expectations)]


@pytest.mark.portable
@pytest.mark.parametrize("rows", [pytest.param(ROWS, marks=pytest.mark.slow_on_classic), []], ids=["sample", "empty"])
def test_the_gate_reports_what_gx_reports(spark, rows):
    """Every outcome the gate records (ops.quality_results), for every supported type, with
    mostly, row conditions, ignore_row_if and nulls, equals GX's SUMMARY validation; kwargs_json
    is the rule as the suite writes it (GX's own form turns 5 into 5.0 and drops descriptions)."""
    from tracelake.quality.gate import run_gate

    suite = {"name": "all", "expectations": _numbered(EXPECTATIONS + SUMMARY_EXTRA)}
    frame = spark.createDataFrame(rows, SCHEMA)
    ours = {r.expectation_id: r for r in run_gate(frame, suite, None).results}
    gx = _gx_summary(frame, suite)
    assert sorted(ours) == sorted(gx)
    for ident in gx:
        assert _fields(ours[ident]) == _fields(gx[ident]), ident
    assert json.loads(ours["e17"].kwargs_json) == {"description": "a above one",
                                                   "unexpected_rows_query": "SELECT * FROM {batch} WHERE a > 1"}


@pytest.fixture(scope="module")
def demo_lake(engine, tmp_path_factory):
    """The demo's lake: every table of the four sources, from generated and real sample files."""
    from contextlib import nullcontext

    from conftest import make_config

    from tracelake.app.demo import run_demo

    config = make_config(tmp_path_factory.mktemp("suites") / "lake")
    run_demo(engine, config, lambda label: nullcontext())
    return config


@pytest.mark.e2e
def test_every_project_suite_reports_what_gx_reports(spark, demo_lake, tmp_path):
    """The project's own suites on the demo lake's tables (up to 5,000 rows each, staged so both
    read the same rows): the gate's outcomes equal GX's, rule by rule."""
    from tracelake.delta.catalog import list_lake_tables
    from tracelake.io.staging import stage
    from tracelake.quality.gate import load_suite, run_gate

    compared = 0
    for layer, table in list_lake_tables(demo_lake):
        name = f"{layer}.{table}"
        if layer in ("ops", "quarantine"):
            continue
        suite = load_suite(name)
        path = str(tmp_path / f"{name}.parquet")
        # staged: the schema is kept for a table with no rows (the demo's silver.zj_task_restarts)
        frame = stage(spark.read.format("delta").load(demo_lake.table_path(layer, table)).limit(5000), path)
        ours = {r.expectation_id: r for r in run_gate(frame, suite, None).results}
        gx = _gx_summary(frame, suite)
        assert {i: _fields(r) for i, r in ours.items()} == {i: _fields(r) for i, r in gx.items()}, name
        compared += 1
    from tracelake.resources import resource_dir

    assert compared == len(list(resource_dir("expectations").glob("*.json"))) == 40  # every suite
