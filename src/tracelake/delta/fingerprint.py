"""Whether new rows equal the stored ones, without comparing row by row: a row count and an order-
free sum of row hashes, per table, partition or group. An identical re-run then commits nothing."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tracelake.delta.catalog import partition_predicate
from tracelake.schema import TableSchema


def fingerprint(df: DataFrame, columns: list[str]) -> tuple:
    """Row count and an order-free sum of row hashes: equal content, equal fingerprint."""
    row = df.agg(F.count(F.lit(1)), F.coalesce(F.sum(F.xxhash64(*columns).cast("decimal(38,0)")), F.lit(0))).first()
    return int(row[0]), str(row[1])


def fingerprints(df: DataFrame, columns: list[str], by: list[str]) -> dict[tuple, tuple]:
    """fingerprint per group of `by` values (as strings, None kept), in one scan."""
    rows = df.groupBy(*by).agg(
        F.count(F.lit(1)), F.coalesce(F.sum(F.xxhash64(*columns).cast("decimal(38,0)")), F.lit(0))).collect()
    return {partition_key(r[: len(by)]): (int(r[-2]), str(r[-1])) for r in rows}


def partition_key(values) -> tuple:
    return tuple(None if v is None else str(v) for v in values)


def changed_groups(stored: DataFrame, new: DataFrame, columns: list[str], by: str) -> list[str]:
    """The values of column `by` whose rows differ between `stored` and `new` (by fingerprint)."""
    before, after = fingerprints(stored, columns, [by]), fingerprints(new, columns, [by])
    return sorted(k[0] for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def changed_partitions(stored: DataFrame, df: DataFrame, schema: TableSchema, partitions: list[tuple],
                        compare: list[str]) -> list[tuple]:
    """The partitions whose new rows differ from the stored ones. New rows are hashed only for
    partitions that hold rows already (a new hour is written without that scan)."""
    by = list(schema.partition_by)
    before = fingerprints(stored, compare, by)
    held = [p for p in partitions if partition_key(p) in before]
    after = fingerprints(df.filter(partition_predicate(schema, held)), compare, by) if held else {}
    return [p for p in partitions if partition_key(p) not in before or before[partition_key(p)] != after.get(partition_key(p))]


def unchanged(stored: DataFrame, df: DataFrame, compare: list[str], rows: int | None = None) -> bool:
    """Whether `df` holds the same rows as `stored` (by fingerprint); when nothing is stored, as
    for a new hour, only whether `df` is empty too (no hash over the new rows; `rows`, when the
    caller counted them already, spares even that look)."""
    before = fingerprint(stored, compare)
    if before[0] == 0:
        return rows == 0 if rows is not None else not df.limit(1).collect()
    return before == fingerprint(df, compare)
