"""Row numbers within groups of equal keys, computed in Arrow where the engine's tasks run.

The exact parse keeps one cell per key among the cells of repeated lines (unpivot.rank_repeated_cells).
As a window (`row_number` and `first` over a partition of six key columns) that cost Sail 0.7.x
84 s for the 16 M such cells of the held-out 1 GB pair, while sorting them took 4 s: its window
pays per partition, and nearly every partition here holds two or three cells. So the cells are
hash-partitioned by their key, and each task sorts its rows with pyarrow and numbers the runs
of equal keys itself: the same row numbers a window ordered the same way gives (ties in the
order are broken arbitrarily by both).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.types import IntegerType, StructField, StructType

ROW_NUMBER = "_tl_row_number"
FIRST = "_tl_first"
BATCH_ROWS = 65_536


def run_starts(table: pa.Table, keys: list[str]) -> np.ndarray:
    """True where a row's keys differ from the row before it (nulls equal nulls, as a window's
    partition treats them); the first row starts a run."""
    starts = np.zeros(table.num_rows, dtype=bool)
    starts[:1] = True
    for key in keys:
        column = table[key]
        here, before = column[1:], column[:-1]
        same = pc.coalesce(pc.equal(here, before), pc.and_(pc.is_null(here), pc.is_null(before)))
        starts[1:] |= ~same.to_numpy(zero_copy_only=False)
    return starts


def number_runs(batches: Iterator[pa.RecordBatch], keys: list[str], order: list[str],
                first_of: str) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: the task's rows sorted by keys then order (ascending, nulls first,
    as Spark's default), each with its row number within its keys (ROW_NUMBER) and the
    `first_of` value of that run's first row (FIRST). Every row of a key must be in this task."""
    given = [b for b in batches if b.num_rows]
    if not given:
        return
    table = pa.Table.from_batches(given)
    table = table.take(pc.sort_indices(table, **_nulls_first([*keys, *order])))
    starts = run_starts(table, keys)
    at = np.arange(table.num_rows)
    first = np.maximum.accumulate(np.where(starts, at, 0))
    table = table.append_column(ROW_NUMBER, pa.array((at - first + 1).astype(np.int32)))
    table = table.append_column(FIRST, table[first_of].take(pa.array(first)))
    yield from table.to_batches(max_chunksize=BATCH_ROWS)


def _nulls_first(columns: list[str]) -> dict:
    """sort_indices' options for ascending, nulls first: per key from pyarrow 25 on (the one
    option for every key is deprecated there)."""
    if int(pa.__version__.split(".")[0]) >= 25:
        return {"sort_keys": [(c, "ascending", "at_start") for c in columns]}
    return {"sort_keys": [(c, "ascending") for c in columns], "null_placement": "at_start"}


def with_run_numbers(frame: DataFrame, keys: list[str], order: list[str], first_of: str, tasks: int) -> DataFrame:
    """`frame` plus ROW_NUMBER and FIRST, as `row_number()` and `first(first_of)` over a window
    partitioned by `keys` and ordered by `order` would give (each task holds its rows at once)."""
    out = StructType([StructField(f.name, f.dataType, True) for f in frame.schema.fields]
                     + [StructField(ROW_NUMBER, IntegerType(), True),
                        StructField(FIRST, frame.schema[first_of].dataType, True)])
    return frame.repartition(max(1, tasks), *keys).mapInArrow(
        partial(number_runs, keys=keys, order=order, first_of=first_of), out)
