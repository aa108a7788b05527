"""Derived tables are rebuilt two at a time where neither reads the other (run.derived): a table
starts only after every table it reads, the stats keep list order, and a failure is the first
in list order, with no table started after it."""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import pytest

import tracelake.run.derived as derived_step
from tracelake.api.contract import Derived
from tracelake.errors import QualityGateFailed
from tracelake.io.staging import Scratch
from tracelake.run.context import Run, TableStats


class _Engine:
    spark = None


def _run(pending: list | None) -> Run:
    return Run("r", None, Path("/nowhere"), Scratch("/nowhere"), pending)


def _plan(log: list, fail: str | None = None, slow: str | None = None):
    """Derived tables a..g: c reads a, d reads b and c, e reads d; b's input does not change;
    f and g read only the changed input."""
    lock = threading.Lock()

    def build(table: str):
        def rebuild(spark, config, inputs, scratch):
            with lock:
                log.append(("start", table))
            if table == slow:
                time.sleep(0.3)
            if table == fail:
                raise QualityGateFailed(f"{table} failed")
            with lock:
                log.append(("end", table))
            return table, (("h",),)
        return rebuild

    def item(table: str, *inputs: str) -> Derived:
        return replace(Derived(table, inputs, None), rebuild=build(table))

    return [item("a", "bronze.x"), item("b", "bronze.unchanged"), item("c", "a"), item("d", "b", "c"),
            item("e", "d"), item("f", "bronze.x"), item("g", "bronze.x")]


@pytest.fixture
def published(monkeypatch):
    def publish(spark, config, run, table, frame, partitions=None):
        return TableStats(table, 1, 1, 0, (), partitions=partitions)
    monkeypatch.setattr(derived_step, "publish_derived", publish)


def _rebuild(plan, pending):
    changed = {"bronze.x": (("h",),)}
    stats = derived_step.rebuild_derived(_Engine(), None, _run(pending), plan, changed, lambda label: nullcontext({}))
    return [s.table for s in stats], changed


def test_a_table_starts_after_every_table_it_reads_and_stats_keep_list_order(published):
    log: list = []
    tables, changed = _rebuild(_plan(log, slow="a"), pending=[])
    assert tables == ["a", "c", "d", "e", "f", "g"]  # b: nothing it reads changed
    assert set(changed) == {"bronze.x", "a", "c", "d", "e", "f", "g"}
    order = [f"{kind} {table}" for kind, table in log]
    assert order.index("end a") < order.index("start c") < order.index("end c") < order.index("start d")
    assert order.index("end d") < order.index("start e")
    assert order.index("start f") < order.index("end a")  # f reads nothing of a's: it ran beside it


def test_a_failure_is_the_first_in_list_order_and_nothing_starts_after_it(published):
    log: list = []
    with pytest.raises(QualityGateFailed, match="c failed"):
        _rebuild(_plan(log, fail="c", slow="f"), pending=[])
    started = {table for kind, table in log if kind == "start"}
    assert started == {"a", "c", "f"}  # d and e read c; g waited for a free thread and came after the failure


def test_no_table_ready_at_the_failure_starts_after_it(published):
    log: list = []
    with pytest.raises(QualityGateFailed, match="a failed"):
        _rebuild(_plan(log, fail="a", slow="f"), pending=[])
    assert {table for kind, table in log if kind == "start"} == {"a", "f"}  # g was ready, not started


def test_a_run_that_commits_each_table_results_at_once_rebuilds_one_after_another(published):
    log: list = []
    tables, _ = _rebuild(_plan(log, slow="a"), pending=None)
    assert tables == ["a", "c", "d", "e", "f", "g"]
    assert [table for kind, table in log if kind == "start"] == ["a", "c", "d", "e", "f", "g"]
    assert all(log[i][1] == log[i + 1][1] for i in range(0, len(log), 2))  # each ends before the next starts
