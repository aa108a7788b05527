"""How a run is cut into batches (one per hour folder, say) and how the changes of its batches add
up."""

from __future__ import annotations

from dataclasses import replace

from tracelake.api.contract import Derived, Partitions, TableInput
from tracelake.run.context import TableStats
from tracelake.schema import load_schema


def changes_of(stats: list[TableStats]) -> dict[str, Partitions | None]:
    return {s.table: s.partitions for s in stats}


def batches(inputs: list[TableInput], by: str | None) -> list[tuple[str | None, list[TableInput]]]:
    """A run's inputs in the order they are ingested: one batch per value of the file constant
    `by` (the source's `batch_by`, e.g. its hour folder), in order, the files without that
    constant (a workbook, task logs) with the first. A backfill of a day then parses, gates and
    writes one hour at a time, so its memory is an hour's, not the range's (a write of many
    hour partitions sorts all their rows first, engine-notes.md)."""
    values = sorted({f.constants[by] for item in inputs for f in item.files if by in f.constants}) if by else []
    if len(values) <= 1:
        return [(None, inputs)]
    cut = []
    for i, value in enumerate(values):
        wanted = {value, None} if i == 0 else {value}
        cut.append((value, [replace(item, files=files) for item in inputs
                            if (files := [f for f in item.files if f.constants.get(by) in wanted])]))
    return cut


def split_per_batch(derived: list[Derived], by: str | None) -> tuple[list[Derived], list[Derived]]:
    """(the derived tables rebuilt after each batch: partitioned by the batch column `by` and
    reading no table of the other kind; the rest, rebuilt once after the last batch from
    everything that changed)."""
    per_batch, once = [], []
    for item in derived:
        batched = by is not None and by in load_schema(item.table).partition_by
        if batched and not {d.table for d in once} & set(item.inputs):
            per_batch.append(item)
        else:
            once.append(item)
    return per_batch, once


def _joined(a: Partitions | None, b: Partitions | None) -> Partitions | None:
    """The partitions two changes touched together; None (the whole table) wins."""
    return None if a is None or b is None else tuple(sorted({*a, *b}))


def add_changes(total: dict[str, Partitions | None], changed: dict[str, Partitions | None]) -> None:
    for table, partitions in changed.items():
        total[table] = _joined(total[table], partitions) if table in total else partitions


def merged_stats(stats: list[TableStats]) -> list[TableStats]:
    """One line per table for a run of several batches: counts added, partitions joined."""
    by_table: dict[str, TableStats] = {}
    for s in stats:
        if (seen := by_table.get(s.table)) is None:
            by_table[s.table] = s
            continue
        by_table[s.table] = TableStats(
            s.table, seen.rows_read + s.rows_read, seen.rows_kept + s.rows_kept,
            seen.rows_quarantined + s.rows_quarantined, tuple(dict.fromkeys([*seen.warnings, *s.warnings])),
            tuple(dict.fromkeys([*seen.critical_failures, *s.critical_failures])),
            _joined(seen.partitions, s.partitions), seen.rows_repeated + s.rows_repeated, seen.unchanged and s.unchanged)
    return list(by_table.values())
