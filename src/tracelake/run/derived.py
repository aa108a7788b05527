"""The derived step: rebuild each silver/gold table whose inputs changed, gate it, and commit it."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from tracelake.api.contract import Derived, Partitions
from tracelake.config import Config
from tracelake.delta.commit import Overwrite, ReplacePartitions, commit, stage_rows
from tracelake.engine import Engine
from tracelake.errors import QualityGateFailed
from tracelake.quality.gate import load_suite, run_gate
from tracelake.quality.ops import warning_lines
from tracelake.run.context import Run, Step, TableStats, record_results
from tracelake.schema import load_schema


def publish_derived(
    spark: SparkSession, config: Config, run: Run, table: str, df: DataFrame,
    partitions: tuple[tuple, ...] | None = None,
) -> TableStats:
    """Gate and write a derived (silver/gold) table in one commit: the whole table, or with
    `partitions` only those partitions (df holds exactly their new rows)."""
    schema = load_schema(table)
    staged = stage_rows(config, schema, df, partitions, run.scratch / f"{table}.parquet")
    gate = run_gate(staged.frame, load_suite(table), None, rows=staged.rows)
    if gate.critical_failures:
        record_results(spark, config, run, table, gate)
        failed = ", ".join(r.expectation_id for r in gate.critical_failures)
        raise QualityGateFailed(f"{table}: critical expectation(s) failed: {failed}; nothing written")
    rows = gate.rows if gate.rows is not None else staged.frame.count()
    compare = [c.name for c in schema.columns]
    mode = Overwrite(compare) if partitions is None else ReplacePartitions(
        partitions, compare, rows=rows, fence=False,  # read back from staging: no filter below it
        pieces=run.scratch / f"{table}.pieces")
    commit(spark, config, schema, staged, mode)
    record_results(spark, config, run, table, gate)
    return TableStats(table, rows, rows, 0, warning_lines(gate.results), partitions=partitions)


def rebuild_derived(
    engine: Engine, config: Config, run: Run, derived: list[Derived],
    changed: dict[str, Partitions | None], step: Step,
) -> list[TableStats]:
    """Rebuild each derived table one of whose inputs changed in this run, in list order
    (registry.all_derived puts every table after the tables it reads). `changed` maps a table
    to the partitions that changed (None: the whole table); a table with a partial rebuild
    recomputes only what those partitions affect."""
    stats: list[TableStats] = []
    for item in derived:
        inputs = {t: changed[t] for t in item.inputs if t in changed}
        if not inputs:
            continue
        with step(f"{item.table}: rebuilding") as note:
            if item.rebuild is not None and all(p is not None for p in inputs.values()):
                result = item.rebuild(engine.spark, config, inputs, run.scratch)
                if result is None:
                    continue
                frame, partitions = result
            else:
                frame, partitions = item.build(engine.spark, config), None
                if frame is None:
                    continue
            stat = publish_derived(engine.spark, config, run, item.table, frame, partitions)
            if isinstance(note, dict):
                note["rows"] = stat.rows_read
            stats.append(stat)
            changed[item.table] = stat.partitions
    return stats
