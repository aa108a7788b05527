"""The Arrow run numbering equals the window it replaces (unpivot.rank_repeated_cells)."""

from collections import Counter

import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F

from tracelake.sources.acme.firstinrun import FIRST, ROW_NUMBER, number_runs, run_starts, with_run_numbers


def test_runs_start_where_a_key_changes_and_nulls_equal_nulls():
    table = pa.table({"a": [1, 1, None, None, 2], "b": ["x", "x", None, "y", "y"]})
    assert run_starts(table, ["a", "b"]).tolist() == [True, False, True, True, True]


def test_a_task_numbers_its_rows_by_key_nulls_first_and_carries_the_runs_first_value():
    rows = pa.record_batch({"k": ["b", "a", "b", None, "a", None], "o": [2, None, 1, 5, 3, 4],
                            "v": ["b2", "a-", "b1", "n5", "a3", "n4"]})
    out = pa.Table.from_batches(list(number_runs(iter([rows[:2], rows[2:]]), ["k"], ["o"], "v")))
    assert list(zip(out["k"].to_pylist(), out["v"].to_pylist(), out[ROW_NUMBER].to_pylist(), out[FIRST].to_pylist())) == [
        (None, "n4", 1, "n4"), (None, "n5", 2, "n4"),
        ("a", "a-", 1, "a-"), ("a", "a3", 2, "a-"),
        ("b", "b1", 1, "b1"), ("b", "b2", 2, "b1"),
    ]


def test_the_engine_gives_the_numbers_a_window_gives(spark):
    rows = [(k % 7 if k % 11 else None, f"s{k % 3}", (k * 37) % 5, f"v{(k * 13) % 17}") for k in range(400)]
    frame = spark.createDataFrame(rows, "k int, s string, o int, v string")
    window = Window.partitionBy("k", "s").orderBy("o", "v")
    expected = frame.select("k", "s", "o", "v", F.row_number().over(window).alias("n"),
                            F.first("v").over(window.rowsBetween(Window.unboundedPreceding, 0)).alias("f"))
    ours = with_run_numbers(frame, ["k", "s"], ["o", "v"], "v", tasks=3).select(
        "k", "s", "o", "v", F.col(ROW_NUMBER).alias("n"), F.col(FIRST).alias("f"))
    # ties in (o, v) are whole-row ties: any numbering of them gives these rows
    assert Counter(map(tuple, ours.collect())) == Counter(map(tuple, expected.collect()))
    assert ours.count() == 400
