"""The parse's side channel for a step's ETA (io.progress): tasks tell each file done, the run
sums what they told while the job runs."""

from __future__ import annotations

import pytest

from tracelake.io import progress

pytestmark = pytest.mark.portable


def test_files_rows_and_bytes_done_give_the_time_left(tmp_path):
    sizes = {"a": 100, "b": 100, "c": 200, "d": 600}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
    paths = [str(tmp_path / name) for name in sizes]
    with progress.watching(tmp_path / "tally") as watch:
        folder = progress.expect(paths)
        assert folder == str(tmp_path / "tally")
        assert watch.done() == (0, 0, 0) and watch.eta_s(5.0) is None
        progress.tally(folder, paths[0], 10)
        progress.tally(folder, paths[1], 12)
        with open(tmp_path / "tally" / "other-task.tally", "w", encoding="utf-8") as half:
            half.write("7\t" + paths[2])  # a line still being written: not counted yet
        assert watch.done() == (2, 22, 200)
        assert watch.eta_s(10.0) == pytest.approx(40.0)  # a fifth of the bytes in 10 s
    assert progress.expect(paths) is None  # no step watching: the parse tells nobody


def test_a_task_that_cannot_write_its_tally_goes_on(tmp_path):
    progress.tally(str(tmp_path / "not-there"), "x.csv", 3)  # a worker on another machine
    progress.tally(None, "x.csv", 3)
    assert not (tmp_path / "not-there").exists()


def test_files_without_a_size_count_by_number(tmp_path):
    with progress.watching(tmp_path / "tally") as watch:
        folder = progress.expect(["s3://bucket/a.csv", "s3://bucket/b.csv", "s3://bucket/c.csv", "s3://bucket/d.csv"])
        progress.tally(folder, "s3://bucket/a.csv", 5)
        assert watch.done() == (1, 5, 0)
        assert watch.eta_s(3.0) == pytest.approx(9.0)


def test_files_read_in_place_count_by_their_listed_sizes(tmp_path):
    """AcmeTrace's one pass hands the sizes a store's listing gave: the ETA weighs the bytes."""
    paths = ["s3://bucket/a.csv", "s3://bucket/b.csv", "s3://bucket/c.csv.gz"]
    with progress.watching(tmp_path / "tally") as watch:
        folder = progress.expect(paths, [300, 100, 600])
        progress.tally(folder, paths[0], 5)
        assert watch.done() == (1, 5, 300)
        assert watch.eta_s(3.0) == pytest.approx(7.0)  # 300 of 1,000 bytes in 3 s
