"""io.unpack: compressed raw files unpacked within the bounds on a line and on a file."""

from __future__ import annotations

import gzip
import io
import lzma
import subprocess

import pytest
from helpers import run_measuring_peak

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
    code, err, peak = run_measuring_peak(["ingest", source, "--raw", str(raw), "--lake", str(tmp_path / "lake")],
                                         subprocess.DEVNULL, timeout_s=300)
    print(f"\n{source}'s refused line: peak {peak / 2**20:.0f} MiB for the process tree")
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        f"tracelake: error: {where} is longer than 8 MiB, the bound on one line "
        "(a line this long is refused, not read)")
    assert 0 < peak < 1 << 30  # the engine, its Python worker and the command: 0.3-0.55 GB measured
