"""How a run is cut into batches (one per hour folder, say) and how the changes of its batches add
up."""

from __future__ import annotations

from dataclasses import replace

from tracelake.api.contract import Derived, Partitions, TableInput
from tracelake.run.context import TableStats
from tracelake.schema import load_schema


def changes_of(stats: list[TableStats]) -> dict[str, Partitions | None]:
    return {s.table: s.partitions for s in stats}


HOUR = "hour_cst"  # the constant a file of an hour folder carries (Zhejiang traffic)


def hour_batches(inputs: list[TableInput]) -> list[tuple[str | None, list[TableInput]]]:
    """A run's inputs in the order they are ingested: one batch per hour folder, in hour order,
    the files that belong to no hour (workbook, task logs) with the first. A backfill of a day
    then parses, gates and writes one hour at a time, so its memory is an hour's, not the
    range's (a write of many hour partitions sorts all their rows first, engine-notes.md)."""
    hours = sorted({f.constants[HOUR] for item in inputs for f in item.files if HOUR in f.constants})
    if len(hours) <= 1:
        return [(None, inputs)]
    batches = []
    for i, hour in enumerate(hours):
        wanted = {hour, None} if i == 0 else {hour}
        batches.append((hour, [replace(item, files=files) for item in inputs
                               if (files := [f for f in item.files if f.constants.get(HOUR) in wanted])]))
    return batches


def split_per_hour(derived: list[Derived]) -> tuple[list[Derived], list[Derived]]:
    """(the derived tables rebuilt after each hour: partitioned by hour and reading no table of
    the other kind; the rest, rebuilt once after the last hour from everything that changed)."""
    per_hour, once = [], []
    for item in derived:
        hourly = HOUR in load_schema(item.table).partition_by
        if hourly and not {d.table for d in once} & set(item.inputs):
            per_hour.append(item)
        else:
            once.append(item)
    return per_hour, once


def _joined(a: Partitions | None, b: Partitions | None) -> Partitions | None:
    """The partitions two changes touched together; None (the whole table) wins."""
    return None if a is None or b is None else tuple(sorted({*a, *b}))


def add_changes(total: dict[str, Partitions | None], changed: dict[str, Partitions | None]) -> None:
    for table, partitions in changed.items():
        total[table] = _joined(total[table], partitions) if table in total else partitions


def merged_stats(stats: list[TableStats]) -> list[TableStats]:
    """One line per table for a run of several hours: counts added, partitions joined."""
    by_table: dict[str, TableStats] = {}
    for s in stats:
        if (seen := by_table.get(s.table)) is None:
            by_table[s.table] = s
            continue
        by_table[s.table] = TableStats(
            s.table, seen.rows_read + s.rows_read, seen.rows_kept + s.rows_kept,
            seen.rows_quarantined + s.rows_quarantined, tuple(dict.fromkeys([*seen.warnings, *s.warnings])),
            tuple(dict.fromkeys([*seen.critical_failures, *s.critical_failures])),
            _joined(seen.partitions, s.partitions))
    return list(by_table.values())
