"""A batch's small inputs are prepared in threads while its biggest runs, and its tables are
committed at once (run.alongside): the results keep batch order, and an error is the one the
inputs one after another would raise."""

from __future__ import annotations

import threading
import time

import pytest

from tracelake.api.contract import TableInput
from tracelake.errors import TracelakeError
from tracelake.io.text import RawFile
from tracelake.run.alongside import ALONGSIDE_BYTES, alongside, commit_batch, prepare_batch


def _input(table: str, *sizes: int) -> TableInput:
    return TableInput(table, [RawFile(f"/nowhere/{table}/{i}.csv", f"{table}/{i}.csv", size=s) for i, s in enumerate(sizes)])


BIG = ALONGSIDE_BYTES + 1


def test_the_biggest_input_runs_here_only_when_every_other_is_small():
    hour = [_input("a", 10, 20), _input("b", BIG, BIG), _input("c", ALONGSIDE_BYTES)]
    assert alongside(hour) == 1
    assert alongside([_input("a", BIG), _input("b", BIG + 5)]) is None  # two big parses: one after another
    assert alongside([_input("a", BIG)]) is None
    missing = TableInput("m", [RawFile("/nowhere/at/all.csv", "all.csv")])  # no size: its parser names it
    assert alongside([hour[1], missing]) is None


def test_small_inputs_run_while_the_big_one_does_and_results_keep_batch_order():
    batch = [_input("small1", 1), _input("big", BIG), _input("small2", 2)]
    threads, big_started, small_done = {}, threading.Event(), threading.Semaphore(0)

    def prepare(item: TableInput) -> str:
        threads[item.table] = threading.current_thread() is threading.main_thread()
        if item.table == "big":
            big_started.set()
            assert small_done.acquire(timeout=10) and small_done.acquire(timeout=10)  # both finished meanwhile
        else:
            assert big_started.wait(timeout=10)
            small_done.release()
        return item.table.upper()

    assert prepare_batch(batch, prepare) == ["SMALL1", "BIG", "SMALL2"]
    assert threads == {"small1": False, "big": True, "small2": False}


@pytest.mark.parametrize(("failing", "raised"), [
    ({"small1", "big"}, "small1"),  # the first in batch order, as one after another
    ({"big", "small2"}, "big"),
    ({"small2"}, "small2"),
])
def test_the_error_raised_is_the_first_in_batch_order_once_every_thread_ended(failing, raised):
    batch = [_input("small1", 1), _input("big", BIG), _input("small2", 2)]
    ended = []

    def prepare(item: TableInput) -> str:
        time.sleep(0.05 if item.table != "big" else 0)
        ended.append(item.table)
        if item.table in failing:
            raise TracelakeError(item.table)
        return item.table

    with pytest.raises(TracelakeError) as caught:
        prepare_batch(batch, prepare)
    assert str(caught.value) == raised
    assert "small1" in ended  # started before the big one failed, and waited for


def test_a_batchs_commits_run_at_once_and_results_keep_batch_order():
    arrived = threading.Barrier(3, timeout=10)  # each commit waits until all three have started
    order = []

    def commit(table: str) -> str:
        arrived.wait()
        order.append(table)
        return table.upper()

    assert commit_batch(["a", "b", "c"], commit) == ["A", "B", "C"]
    assert sorted(order) == ["a", "b", "c"]


def test_commits_with_one_thread_run_one_after_another_in_batch_order():
    seen = []

    def commit(table: str) -> str:
        seen.append((table, threading.current_thread() is threading.main_thread()))
        return table

    assert commit_batch(["a", "b", "c"], commit, threads=1) == ["a", "b", "c"]
    assert seen == [("a", True), ("b", True), ("c", True)]


def test_a_failed_commit_raises_the_first_error_in_batch_order_once_every_commit_ended():
    ended = []

    def commit(table: str) -> str:
        time.sleep({"a": 0.2, "b": 0.0, "c": 0.1}[table])  # b fails first, a last
        ended.append(table)
        if table != "c":
            raise TracelakeError(table)
        return table

    with pytest.raises(TracelakeError) as caught:
        commit_batch(["a", "b", "c"], commit)
    assert str(caught.value) == "a"
    assert sorted(ended) == ["a", "b", "c"]
