import json

import pytest

from tracelake.errors import TracelakeError
from tracelake.quality.gate import expectation_id, load_suite, run_gate
from tracelake.quality.split import split_by_gate

pytestmark = pytest.mark.portable

SUITE = {
    "name": "t",
    "expectations": [
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}, "meta": {"severity": "critical"}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "num_gpu", "value_set": [1, 2, 4, 8]},
         "meta": {"severity": "quarantine"}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "job_id"}, "meta": {"severity": "quarantine"}},
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "duration", "min_value": 600},
         "meta": {"severity": "warning", "id": "short_jobs"}},
        {"type": "unexpected_rows_expectation",
         "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE duration > 1000"},
         "meta": {"severity": "warning", "id": "long_jobs"}},
    ],
}


COLUMNS = ["job_id", "num_gpu", "duration", "_row_id"]


def _frame(spark, rows):
    return spark.createDataFrame(rows, "job_id string, num_gpu int, duration bigint, _row_id string")


def test_row_rules_name_the_rows_and_others_only_record(spark):
    df = _frame(spark, [("a", 1, 700, "r1"), ("b", 3, 650, "r2"), ("c", 2, 500, "r3"),
                        ("c", 2, 2000, "r4"), ("d", 8, 601, "r5")])
    outcome = run_gate(df, SUITE, "_row_id")
    assert outcome.quarantined == {}  # the rules are evaluated where the rows are: no row id in the driver
    kept, set_aside = split_by_gate(spark, df, outcome)
    assert {r._row_id: r.reasons for r in set_aside.collect()} == {
        "r2": ["column_values_to_be_in_set(num_gpu)"],
        "r3": ["column_values_to_be_unique(job_id)"],
        "r4": ["column_values_to_be_unique(job_id)"],
    }
    assert sorted(r._row_id for r in kept.collect()) == ["r1", "r5"]
    by_id = {r.expectation_id: r for r in outcome.results}
    assert [r.expectation_id for r in outcome.results] == [
        "table_row_count_to_be_between", "column_values_to_be_in_set(num_gpu)",
        "column_values_to_be_unique(job_id)", "short_jobs", "long_jobs",
    ]
    assert by_id["table_row_count_to_be_between"].observed_value == "5"
    assert (by_id["short_jobs"].success, by_id["short_jobs"].unexpected_count) == (False, 1)
    assert (by_id["long_jobs"].unexpected_count, by_id["long_jobs"].element_count) == (1, 5)
    assert by_id["long_jobs"].unexpected_percent == pytest.approx(20.0)
    assert json.loads(by_id["column_values_to_be_in_set(num_gpu)"].kwargs_json) == {
        "column": "num_gpu", "value_set": [1, 2, 4, 8]}
    assert outcome.critical_failures == []


def test_critical_failure_is_reported(spark):
    outcome = run_gate(_frame(spark, []), SUITE, "_row_id")
    assert [r.expectation_id for r in outcome.critical_failures] == ["table_row_count_to_be_between"]
    assert (outcome.quarantined, outcome.rejected_by) == ({}, {})


def test_table_level_rule_cannot_quarantine(spark):
    suite = {"name": "bad", "expectations": [
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"max_value": 1}, "meta": {"severity": "quarantine"}}]}
    with pytest.raises(TracelakeError, match="not row-level and cannot quarantine"):
        run_gate(_frame(spark, [("a", 1, 700, "r1"), ("b", 1, 700, "r2")]), suite, "_row_id")


def test_a_rule_whose_query_fails_stops_the_gate(spark):
    suite = {"name": "broken", "expectations": [
        {"type": "unexpected_rows_expectation",
         "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch} WHERE no_such_column > 1"},
         "meta": {"severity": "warning", "id": "typo"}}]}
    with pytest.raises(TracelakeError, match="expectation typo could not run: .*no_such_column"):
        run_gate(_frame(spark, [("a", 1, 700, "r1")]), suite, "_row_id")


def test_suite_files_need_a_known_severity(tmp_path):
    (tmp_path / "bronze.x.json").write_text(json.dumps({"name": "bronze.x", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}, "meta": {}}]}))
    with pytest.raises(TracelakeError, match="meta.severity must be one of"):
        load_suite("bronze.x", tmp_path)


def test_expectation_ids_are_readable():
    assert expectation_id({"type": "expect_compound_columns_to_be_unique",
                           "kwargs": {"column_list": ["a", "b"]}}) == "compound_columns_to_be_unique(a,b)"
    assert expectation_id({"type": "expect_column_pair_values_a_to_be_greater_than_b",
                           "kwargs": {"column_A": "x", "column_B": "y"}}) == "column_pair_values_a_to_be_greater_than_b(x,y)"


def test_a_rule_checked_as_the_files_were_made_is_cleared_only_when_no_row_can_fail(spark, tmp_path):
    """cleared_beside: an unexpected_rows rule whose check column is false on every row of the
    staged files, and whose query returns nothing from the rows computed beside them, is
    cleared; a true flag, a failing computed row, a missing column or a rule of another type
    leaves it to its query."""
    from tracelake.io.staging import Scratch, stage
    from tracelake.quality.gate import cleared_beside

    long_jobs = "long_jobs"
    files = {name: Scratch(str(tmp_path / name)) for name in ("clean", "flagged")}
    rows = "job_id string, num_gpu int, duration bigint, _row_id string, _long boolean"
    stage(spark.createDataFrame([("a", 1, 700, "r1", False), ("b", 2, 900, "r2", False)], rows), files["clean"])
    stage(spark.createDataFrame([("a", 1, 700, "r1", False), ("b", 2, 1200, "r2", True)], rows), files["flagged"])
    ok, bad = _frame(spark, [("c", 4, 999, "r3")]), _frame(spark, [("c", 4, 1001, "r3")])
    def proven(rule: str, column: str) -> dict:  # the suite saying that the parser "p" proves `rule` with `column`
        return {**SUITE, "expectations": [{**e, "meta": {**e["meta"], "proven_by": {"parser": "p", "column": column}}}
                                          if expectation_id(e) == rule else e for e in SUITE["expectations"]]}
    def cleared(folder, beside, suite, parser="p"):
        return cleared_beside(spark, folder, beside, suite, parser, COLUMNS)[0]
    assert cleared(files["clean"], None, proven(long_jobs, "_long")) == {long_jobs}
    assert cleared(files["clean"], ok, proven(long_jobs, "_long")) == {long_jobs}
    assert cleared(files["clean"], bad, proven(long_jobs, "_long")) == set()
    assert cleared(files["flagged"], None, proven(long_jobs, "_long")) == set()
    assert cleared(files["clean"], None, proven(long_jobs, "_no_such_column")) == set()
    assert cleared(files["clean"], None, proven(long_jobs, "_long"), "another") == set()  # not its parser
    assert cleared(files["clean"], None, proven("short_jobs", "_long")) == set()  # a map rule: not this way
    # the gate then records the cleared rule as its query over every row would: passed, nothing found
    every = _frame(spark, [("a", 1, 700, "r1"), ("b", 2, 900, "r2"), ("c", 4, 999, "r3")])
    outcome = run_gate(every, SUITE, "_row_id", cleared={long_jobs})
    assert outcome == run_gate(every, SUITE, "_row_id")


def test_a_rule_checked_as_the_files_were_made_reads_only_the_files_a_row_may_fail_in(spark, tmp_path):
    """Where some staged files hold a row the check column marks, the rule's query reads those
    files and the rows computed beside them (the gate's `narrowed`), and finds what its query
    over every row finds; where every file holds one, it reads every row."""
    from tracelake.io.staging import Scratch, stage
    from tracelake.quality.gate import cleared_beside

    suite = {**SUITE, "expectations": [{**e, "meta": {**e["meta"], "proven_by": {"parser": "p", "column": "_long"}}}
                                       if expectation_id(e) == "long_jobs" else e for e in SUITE["expectations"]]}
    rows = "job_id string, num_gpu int, duration bigint, _row_id string, _long boolean"
    mixed, flagged = Scratch(str(tmp_path / "mixed")), Scratch(str(tmp_path / "flagged"))
    staged = [("a", 1, 700, "r1", False), ("b", 2, 1200, "r2", True)]
    stage(spark.createDataFrame(staged, rows), mixed, "_long")  # two files: the flag true in one
    stage(spark.createDataFrame(staged[1:], rows), flagged)
    beside = _frame(spark, [("c", 4, 1001, "r3")])
    cleared, narrowed = cleared_beside(spark, mixed, beside, suite, "p", COLUMNS)
    assert cleared == set() and sorted(r.job_id for r in narrowed["long_jobs"].collect()) == ["b", "c"]
    every = _frame(spark, [("a", 1, 700, "r1"), ("b", 2, 1200, "r2"), ("c", 4, 1001, "r3")])
    outcome = run_gate(every, SUITE, "_row_id", narrowed=narrowed)
    assert outcome == run_gate(every, SUITE, "_row_id")
    assert [r.unexpected_count for r in outcome.results if r.expectation_id == "long_jobs"] == [2]
    assert cleared_beside(spark, flagged, beside, suite, "p", COLUMNS) == (set(), {})
