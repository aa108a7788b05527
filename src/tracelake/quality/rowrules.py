"""The suites' rules evaluated where the rows are: each GX expectation of a supported type becomes
a Spark column that is true for the rows it rejects, plus the columns GX's summary counts.

GX names failing rows only through `unexpected_index_list` (result format COMPLETE), which brings
every failing row id to the driver: an hour of port counters with 10 % bad rows is a million ids
in Python; and a GX validation costs seconds per suite (its import alone 3 s a process). The
suites stay the single definition of the rules; the gate (tracelake.quality.gate) evaluates the types
listed here itself, all of a suite's row rules in one scan, and produces GX's SUMMARY figures
(tests/quality/test_rowrules.py compares them with GX's own validation, rule by rule, on samples
and on every suite of the project). The semantics follow GX 1.x on Spark frames:
column-map rules skip null values (not_be_null excepted), a `row_condition` (condition_parser
`spark`) limits the rows a rule sees, uniqueness marks every copy of a repeated value, and pair
rules skip the rows their `ignore_row_if` names. A type not listed here returns None, and the gate
falls back to GX's row ids for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from pyspark.sql import Column, Window
from pyspark.sql import functions as F


def _condition(kwargs: dict[str, Any]) -> Column:
    """The rows a rule applies to (its row_condition), as a never-null boolean."""
    condition = kwargs.get("row_condition")
    if not condition:
        return F.lit(True)
    if kwargs.get("condition_parser") not in ("spark", None):
        raise ValueError(f"row_condition with condition_parser {kwargs.get('condition_parser')!r}")
    return F.coalesce(F.expr(condition), F.lit(False))


def _between(value: Column, kwargs: dict[str, Any]) -> Column:
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    inside = F.lit(True)
    if low is not None:
        inside = inside & (value > F.lit(low) if kwargs.get("strict_min") else value >= F.lit(low))
    if high is not None:
        inside = inside & (value < F.lit(high) if kwargs.get("strict_max") else value <= F.lit(high))
    return inside


def _duplicated(columns: Sequence[str], applies: Column, ignore: str) -> Column:
    """Rows whose value (or value combination) occurs more than once among the rows the rule sees."""
    cols = [F.col(c) for c in columns]
    missing = {"all_values_are_missing": reduce(Column.__and__, [c.isNull() for c in cols]),
               "any_value_is_missing": reduce(Column.__or__, [c.isNull() for c in cols]),
               "never": F.lit(False)}[ignore]
    seen = applies & ~missing
    copies = F.sum(F.when(seen, 1).otherwise(0)).over(Window.partitionBy(*cols))
    return seen & (copies > 1)


def _pair(a: Column, b: Column, holds: Column, ignore: str, unknown_holds: bool) -> Column:
    """`unknown_holds`: whether a comparison with one missing side counts as met. GX 1.x on Spark
    differs per rule (measured, tests/quality/test_rowrules.py): a_to_be_greater_than_b lets such a
    row pass, to_be_equal rejects it."""
    skipped = {"both_values_are_missing": a.isNull() & b.isNull(),
               "either_value_is_missing": a.isNull() | b.isNull(),
               "neither": F.lit(False)}[ignore]
    return ~skipped & ~F.coalesce(holds, F.lit(unknown_holds))


def rejects(expectation: dict[str, Any], domain: Column | None = None) -> Column | None:
    """A boolean column, true for the rows `expectation` finds unexpected; None when this module
    does not evaluate its type (the gate then asks GX for the row ids). `domain` limits the rows
    the rule sees, as if the others were not there (e.g. rows that failed to parse)."""
    kind, kwargs = expectation["type"], expectation.get("kwargs", {})
    applies = _condition(kwargs) if domain is None else domain & _condition(kwargs)
    column = F.col(kwargs["column"]) if "column" in kwargs else None
    if kind == "expect_column_values_to_not_be_null":
        failing = column.isNull()
    elif kind == "expect_column_values_to_be_between":
        failing = column.isNotNull() & ~F.coalesce(_between(column, kwargs), F.lit(False))
    elif kind == "expect_column_values_to_be_in_set":
        failing = column.isNotNull() & ~F.coalesce(column.isin(list(kwargs["value_set"])), F.lit(False))
    elif kind == "expect_column_values_to_match_regex":
        failing = column.isNotNull() & ~F.coalesce(column.rlike(kwargs["regex"]), F.lit(False))
    elif kind == "expect_column_values_to_be_unique":
        return _duplicated([kwargs["column"]], applies, "any_value_is_missing")
    elif kind == "expect_compound_columns_to_be_unique":
        return _duplicated(kwargs["column_list"], applies, kwargs.get("ignore_row_if", "all_values_are_missing"))
    elif kind == "expect_column_pair_values_a_to_be_greater_than_b":
        a, b = F.col(kwargs["column_A"]), F.col(kwargs["column_B"])
        holds = (a >= b) if kwargs.get("or_equal") else (a > b)
        failing = _pair(a, b, holds, kwargs.get("ignore_row_if", "both_values_are_missing"), unknown_holds=True)
    elif kind == "expect_column_pair_values_to_be_equal":
        a, b = F.col(kwargs["column_A"]), F.col(kwargs["column_B"])
        failing = _pair(a, b, a == b, kwargs.get("ignore_row_if", "both_values_are_missing"), unknown_holds=False)
    else:
        return None
    return applies & failing


TABLE_RULES = ("expect_table_row_count_to_be_between", "unexpected_rows_expectation")
_SINGLE_COLUMN = ("expect_column_values_to_be_between", "expect_column_values_to_be_in_set",
                  "expect_column_values_to_match_regex", "expect_column_values_to_be_unique")


def evaluates(expectation: dict[str, Any]) -> bool:
    """Whether the gate evaluates this expectation itself (else GX does)."""
    return expectation["type"] in TABLE_RULES or rejects(expectation) is not None


def missing(expectation: dict[str, Any]) -> Column:
    """The rows of a map rule's domain GX skips as missing (its missing_count): null in the
    column, or as the rule's ignore_row_if says; not_be_null has none (nulls are what it counts)."""
    kind, kwargs = expectation["type"], expectation.get("kwargs", {})
    if kind in _SINGLE_COLUMN:
        return F.col(kwargs["column"]).isNull()
    if kind == "expect_compound_columns_to_be_unique":
        cols = [F.col(c).isNull() for c in kwargs["column_list"]]
        return {"all_values_are_missing": reduce(Column.__and__, cols), "any_value_is_missing": reduce(Column.__or__, cols),
                "never": F.lit(False)}[kwargs.get("ignore_row_if", "all_values_are_missing")]
    if kind.startswith("expect_column_pair_values"):
        a, b = F.col(kwargs["column_A"]).isNull(), F.col(kwargs["column_B"]).isNull()
        return {"both_values_are_missing": a & b, "either_value_is_missing": a | b,
                "neither": F.lit(False)}[kwargs.get("ignore_row_if", "both_values_are_missing")]
    return F.lit(False)


def in_domain(expectation: dict[str, Any]) -> Column:
    """The rows a map rule looks at (its row_condition): GX's element_count counts them."""
    return _condition(expectation.get("kwargs", {}))


_VALUE_RULES = ("expect_column_values_to_not_be_null", "expect_column_values_to_be_between",
                "expect_column_values_to_be_in_set", "expect_column_values_to_match_regex")


def map_summary(
    expectation: dict[str, Any], element: int, missed: int, unexpected: int
) -> tuple[bool, int | None, float | None]:
    """(success, unexpected_count, unexpected_percent) as GX 1.x reports them for a map rule:
    the percent is of the rows not missing (computed in GX's order, so the floats are equal),
    `mostly` (default 1) the share of those that must pass; a value rule that saw no row
    reports no count."""
    considered = element - missed
    count = None if element == 0 and expectation["type"] in _VALUE_RULES else unexpected
    if considered <= 0:
        return True, count, None
    mostly = expectation.get("kwargs", {}).get("mostly", 1.0)
    return (considered - unexpected) / considered >= mostly, count, unexpected / considered * 100


def row_count_success(expectation: dict[str, Any], rows: int) -> bool:
    """expect_table_row_count_to_be_between on a table of `rows` rows."""
    kwargs = expectation.get("kwargs", {})
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if low is not None and (rows <= low if kwargs.get("strict_min") else rows < low):
        return False
    return not (high is not None and (rows >= high if kwargs.get("strict_max") else rows > high))
