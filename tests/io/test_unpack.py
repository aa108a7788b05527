"""io.unpack: compressed raw files unpacked within the bounds on a line and on a file."""

from __future__ import annotations

import gzip
import io
import lzma
import subprocess
import sys
import time

import psutil
import pytest
from helpers import child_environ

from tracelake.errors import TracelakeError
from tracelake.io.unpack import MAX_LINE_BYTES, copy_bounded


@pytest.mark.parametrize("chunk_cut", [1, 3, 5, 8])
def test_lines_are_measured_across_chunks(monkeypatch, chunk_cut):
    """A line split over chunk boundaries counts whole; the line named is the first too long."""
    import tracelake.io.unpack as unpack

    monkeypatch.setattr(unpack, "CHUNK", chunk_cut)
    data = b"ab\ncdef\nghijklm\nno\n"
    out = io.BytesIO()
    assert copy_bounded(io.BytesIO(data), out, "f.csv", max_line=7) == len(data)
    assert out.getvalue() == data
    with pytest.raises(TracelakeError, match=r"^f.csv: line 3 is longer than 0 MiB"):
        copy_bounded(io.BytesIO(data), io.BytesIO(), "f.csv", max_line=6)
    with pytest.raises(TracelakeError, match=r"^f.csv: line 1 is longer"):
        copy_bounded(io.BytesIO(b"x" * 10), io.BytesIO(), "f.csv", max_line=9)  # no newline at all
    with pytest.raises(TracelakeError, match=r"^f.csv: unpacks to more than 0 GiB, the bound on one file"):
        copy_bounded(io.BytesIO(data), io.BytesIO(), "f.csv", max_bytes=len(data) - 1)


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.Error:
            continue
    return total


HUGE = 10 * MAX_LINE_BYTES  # ten times the bound on a line
SEREN_JOBS = ("job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time\n"
              "5778432,u1,1,8,64,Pretrain,COMPLETED,2023-03-01 00:00:00+08:00,2023-03-01 00:01:00+08:00,"
              "2023-03-01 00:11:00+08:00,600,60,4800.0\n")
BOMBS = {
    "zeus": ({"summary_power_a40.csv.xz": lzma.compress(
        b"dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n" + b"7" * HUGE)},
        "summary_power_a40.csv.xz: line 2"),
    "acme": ({"job_trace/trace_seren.csv": SEREN_JOBS.encode(),
              "utilization/seren/NODE_CPU_UTILIZATION.csv.gz": gzip.compress(
                  b"Time,10.0.0.2\n1689379200,0.5\n1689379215," + b"7" * HUGE + b"\n")},
             "utilization/seren/NODE_CPU_UTILIZATION.csv.gz: line 3"),
}


@pytest.mark.e2e  # an engine of its own: in `bash dev e2e`
@pytest.mark.parametrize("source", sorted(BOMBS))
def test_a_compressed_line_ten_times_the_bound_is_refused_in_little_memory(tmp_path, source):
    """80 MiB of one line in kilobytes of .xz or .gz: exit 2 naming the file and the line, the
    whole process tree (the command and its engine) far below what reading the line would take
    (the engines failed with `Offset overflow` at 3 to 9 GB)."""
    contents, where = BOMBS[source]
    raw = tmp_path / "raw"
    for name, data in contents.items():
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        (raw / name).write_bytes(data)
    process = subprocess.Popen([sys.executable, "-m", "tracelake", "ingest", source, "--raw", str(raw),
                                "--lake", str(tmp_path / "lake")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**child_environ(), "RUST_LOG": "error"})
    watched, peak, deadline = psutil.Process(process.pid), 0, time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        peak = max(peak, _tree_rss(watched))
        time.sleep(0.02)
    if process.poll() is None:
        process.kill()
    err = process.communicate()[1].decode()
    print(f"\n{source}'s refused line: peak {peak / 2**20:.0f} MiB for the process tree")
    assert process.returncode == 2, err
    assert err.strip().splitlines()[-1] == (
        f"tracelake: error: {where} is longer than 8 MiB, the bound on one line "
        "(a compressed file that unpacks to one huge line is refused, not read)")
    assert 0 < peak < 1 << 30  # the engine, its Python worker and the command: 0.3-0.55 GB measured
