"""Results for people: a table capped in rows and fitted to the width, readable doubles, every
column printed even under one name, EXPLAIN as lines; CSV and JSON keep every value."""

from __future__ import annotations

import io
import json

import pytest
from helpers import tracelake_in_process

from tracelake.app.results import Result, aligned, readable, unique_names, write_result


def test_a_wide_table_elides_middle_columns_and_says_so():
    columns = [f"column_{i:02d}" for i in range(12)]
    lines = aligned(columns, [tuple(range(12))], width=60)
    assert lines[0] == "column_00 | column_01 | … | column_10 | column_11"
    assert lines[2] == "        0 |         1 | … |        10 |        11"
    assert all(len(line) <= 60 for line in lines)
    assert lines[-1] == "(1 row; 12 columns, 4 shown (CSV or JSON print them all))"


def test_long_values_are_cut_and_one_column_never_exceeds_the_width():
    lines = aligned(["text"], [("x" * 500,)], width=30)
    assert lines[2] == "x" * 25 + "…" and all(len(line) <= 30 for line in lines)


def test_doubles_read_at_a_readable_precision():
    assert [readable(v) for v in (6823.203055555553, 0.000123456789, 2.0, 0.0, 1e20, -3.14159, None)] == \
        ["6823.203", "0.0001235", "2", "0", "1e+20", "-3.142", "NULL"]


def test_a_capped_table_says_how_many_rows_it_shows():
    out = io.StringIO()
    write_result(Result(("n",), [(i,) for i in range(40)], total=378_043), "table", out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 43 and lines[-1] == "(378,043 rows, 40 shown (--limit / .maxrows for more))"


def test_two_columns_of_one_name_both_print_in_every_format():
    assert unique_names(["a", "a", "a_1", "b"]) == ["a", "a_1", "a_1_1", "b"]
    out = io.StringIO()
    write_result((("a", "a"), [(1, 2)]), "json", out)
    assert json.loads(out.getvalue()) == [{"a": 1, "a_1": 2}]
    out = io.StringIO()
    write_result((("a", "a"), [(1, 2)]), "csv", out)
    assert out.getvalue() == "a,a\n1,2\n"


def test_a_plan_prints_as_its_lines():
    out = io.StringIO()
    write_result((("plan",), [("== Physical Plan ==\nProject\n  Scan",)]), "table", out)
    assert out.getvalue() == "== Physical Plan ==\nProject\n  Scan\n"


@pytest.mark.portable
def test_query_of_a_large_result_fetches_only_what_it_shows(engine, monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    done = tracelake_in_process(engine, "query", "SELECT id, id * 1.5 AS x, repeat('w', 80) AS wide, id AS y "
                                        "FROM range(378043)", "--format", "table")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 43 and lines[-1] == ("(378,043 rows, 40 shown (--limit / .maxrows for more); "
                                              "4 columns, 3 shown (CSV or JSON print them all))")
    assert lines[0].replace(" ", "") == "id|x|…|y" and all(len(line) <= 50 for line in lines[:-1])
    assert lines[3].replace(" ", "") == "1|1.5|…|1"
    csv = tracelake_in_process(engine, "query", "SELECT id FROM range(100)", "--limit", "3")
    assert csv.stdout == "id\n0\n1\n2\n" and "100 rows, 3 printed (--limit)" in csv.stderr


MIXED = ("SELECT 1 AS a, 2 AS a, CAST(id AS DECIMAL(10,2)) AS d, "
         "TIMESTAMP'2024-05-24 12:00:01.5' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts, DATE'2024-05-24' AS day, "
         "CASE WHEN id % 2 = 0 THEN NULL ELSE concat('x', id) END AS s, id / 4 AS f, id % 2 = 0 AS b, "
         "CAST(NULL AS TIMESTAMP) AS none FROM range(70000) ORDER BY ts")


@pytest.mark.portable
def test_streamed_rows_are_the_rows_of_the_whole_result(engine):
    """An export's streamed rows (a Connect server's batches, a classic session's partitions
    in parts of CLASSIC_PART_ROWS) are the whole result's, value for value and type for type."""
    from tracelake.app.statements import run_sql

    whole, streamed = run_sql(engine.spark, MIXED), run_sql(engine.spark, MIXED, stream=True)
    rows = list(streamed.rows)
    assert list(streamed.columns) == list(whole.columns) == ["a", "a", "d", "ts", "day", "s", "f", "b", "none"]
    assert len(rows) == 70_000 and rows == list(whole.rows)
    assert str(rows[3][3]) == "2024-05-24 12:00:04.500000+00:00" and rows[3][5] == "x3" and rows[2][5] is None
