"""Progress of a long ingest, as a log (Airflow, CI, a redirect) records it: plain lines with
files done of the run's total, rows and rows/s, and a line per hour of a --hours range with the
time left."""

from __future__ import annotations

import re

import numpy as np
from helpers import itp_csv, job_id, tracelake_in_process, write_archive

from tracelake.app.cli import step_summary
from tracelake.sources.zhejiang.synth.ports import write_port_hour

LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825"
NUMBER = r"[\d,]+"


def _load(folder, port, t):
    return np.full_like(t, 0.2), np.full_like(t, 0.1)


def test_progress_on_a_non_terminal_is_plain_lines_with_files_done_of_total(engine, tmp_path):
    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1", f"{job_id(2)},2,600,2"]),
                                              "cluster02.csv": itp_csv([f"{job_id(3)},3,600,4"])})
    done = tracelake_in_process(engine, "ingest", "itp", "--raw", str(raw), "--lake", str(tmp_path / "lake"))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert all(line.startswith("tracelake: ✓ ") for line in lines)  # no spinner, no control characters
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    parsed = [line for line in lines if "file(s)" in line]
    assert len(parsed) == 1
    assert re.fullmatch(rf"tracelake: ✓ bronze\.itp_jobs: 2 file\(s\): files 2/2, 3 rows( \({NUMBER} rows/s\))?, "
                        r"\d+\.\d s", parsed[0]), parsed[0]
    assert any(re.fullmatch(r"tracelake: ✓ silver\.jobs: rebuilding: 3 rows, \d+\.\d s", line) for line in lines), lines


def test_a_range_of_hours_has_a_line_per_hour_with_the_time_left(engine, tmp_path):
    hours = ("2024052400", "2024052401", "2024052402")
    for i, hour in enumerate(hours):
        write_port_hour(tmp_path / "raw", hour, [(LEAF1, "TwoHundredGigE1/0/1:1")], _load, seed=70 + i)
    done = tracelake_in_process(engine, "ingest", "zhejiang", "--raw", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"),
                                "--hours", f"{hours[0]}..{hours[-1]}")
    assert done.returncode == 0, done.stderr
    per_hour = [line for line in done.stderr.splitlines() if line.startswith("tracelake: ✓ hour ")]
    assert len(per_hour) == 3
    for n, (hour, line) in enumerate(zip(hours, per_hour), 1):
        left = "last" if n == 3 else r"ETA \d+ (s|min \d\d s)"
        assert re.fullmatch(rf"tracelake: ✓ hour {hour} \({n}/3\): files {n}/3, {NUMBER} rows \({NUMBER} rows/s\), "
                            rf"\d+\.\d s, {left}", line), line
    ports = [line for line in done.stderr.splitlines() if "bronze.zj_port_counters: 1 file(s)" in line]
    assert [re.search(r"files (\d+/\d+)", line).group(1) for line in ports] == ["1/3", "2/3", "3/3"]


def test_step_summary_figures():
    assert step_summary({"files": (3, 7), "rows": 120_000}, 2.0) == "files 3/7, 120,000 rows (60,000 rows/s), 2.0 s"
    assert step_summary({"rows": 20}, 0.5) == "20 rows, 0.5 s"
    assert step_summary({"files": (1, 24), "rows": 10, "eta_s": 3725}, 1.0) == \
        "files 1/24, 10 rows (10 rows/s), 1.0 s, ETA 1 h 02 min"
    assert step_summary({}, 0.04) == "0.0 s"


def test_a_parse_still_running_gets_lines_with_files_done_rows_and_an_eta(engine, tmp_path, monkeypatch):
    from tracelake.app import cli
    from tracelake.sources.zhejiang.ports import filepass, grouppass

    ports = [(LEAF1, f"TwoHundredGigE1/0/{n}:1") for n in range(1, 7)]
    write_port_hour(tmp_path / "raw", "2024052400", ports, _load, seed=77)
    read = filepass.read_port_file

    def slow(path):  # each file takes 0.2 s: the in-process tasks of the local profile see this
        import time
        time.sleep(0.2)
        return read(path)

    monkeypatch.setattr(filepass, "read_port_file", slow)
    monkeypatch.setattr(grouppass, "GROUP_FILES", 1)  # a group's files are told when the group is done
    monkeypatch.setattr(cli, "PLAIN_EVERY_S", (0.1, 0.1))
    done = tracelake_in_process(engine, "ingest", "zhejiang", "--raw", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"),
                                "--hours", "2024052400")
    assert done.returncode == 0, done.stderr
    running = [line for line in done.stderr.splitlines() if line.startswith("tracelake: … ")]
    assert running, done.stderr
    pattern = (rf"tracelake: … bronze\.zj_port_counters: 6 file\(s\): files ([1-6])/6, ETA \d+ s, "
               rf"({NUMBER}) rows \({NUMBER} rows/s\), \d+\.\d s")
    matched = [re.fullmatch(pattern, line) for line in running]
    assert all(matched), running
    told = [(int(m.group(1)), int(m.group(2).replace(",", ""))) for m in matched]
    assert told == sorted(told)  # files and rows only grow
    final = next(line for line in done.stderr.splitlines() if line.startswith("tracelake: ✓ bronze.zj_port_counters"))
    total = int(re.search(rf"({NUMBER}) rows", final).group(1).replace(",", ""))
    assert all(rows <= total for _, rows in told) and (told[-1][0] < 6 or told[-1][1] == total)
