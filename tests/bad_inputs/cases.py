"""The corpus itself: every case and its expected outcome (see corpus.py for the helpers)."""

from __future__ import annotations

import gzip
import lzma
from collections.abc import Callable
from pathlib import Path

from corpus import (
    FIXTURES,
    LEAF1,
    PORT_HEADER,
    POWER_HEADER,
    REMOVE,
    SEREN_HEADER,
    SEREN_ROW,
    TRAIN_HEADER,
    TRAIN_ROW,
    Case,
    files,
    good_itp,
    itp,
    port_file,
    port_rows,
    server_ending_every_call,
    task_folder,
    with_fifo,
    zeus,
)
from helpers import ITP_HEADER, job_id, write_archive

from tracelake.sources.zhejiang.synth.hourly import LINK_HEADER

ALIBABA_HEADER = "group,start_time,end_time,dataset,runtime_ratio"
POWER_OK = "cifar100,shufflenetv2,64,adadelta,175,20,100"
ACME_JOBS = "data/job_trace/trace_seren.csv"


def _seren_row(job: int, **values: str) -> str:
    """SEREN_ROW with another job id (577843<job>) and the named fields replaced."""
    fields = dict(zip(SEREN_HEADER.split(","), SEREN_ROW.split(",")))
    return ",".join({**fields, "job_id": f"577843{job}", **values}.values())


def _seren(rows: list[str]):
    return files({ACME_JOBS: "\n".join([SEREN_HEADER, *rows]) + "\n"}, ["ingest", "acme", "--raw", "{raw}"])


def _lake_under_a_file(raw: Path) -> list[list[str]]:
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
    (raw / "plain-file").write_text("not a folder")
    return [["ingest", "itp", "--raw", str(raw), "--lake", str(raw / "plain-file" / "lake")]]


def _traversal(raw: Path) -> list[list[str]]:
    write_archive(raw / "raw-traces.tar.gz", {"../cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
    return [["ingest", "itp", "--raw", str(raw)]]


def _truncated(raw: Path) -> list[list[str]]:
    archive = write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(400)])})
    archive.write_bytes(archive.read_bytes()[:300])
    return [["ingest", "itp", "--raw", str(raw)]]


def _good_then_all_bad(raw: Path) -> list[list[str]]:
    first, second = raw / "first", raw / "second"
    write_archive(first / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(3)])})
    write_archive(second / "raw-traces.tar.gz",
                  {"cluster01.csv": "\n".join([ITP_HEADER, *[f"{job_id(i)},{i},600,3" for i in range(1, 4)]])})
    return [["ingest", "itp", "--raw", str(first)], ["ingest", "itp", "--raw", str(second)]]


def _key_arrives_from_another_file(raw: Path) -> list[list[str]]:
    first, second = raw / "first", raw / "second"
    write_archive(first / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
    write_archive(second / "raw-traces.tar.gz", {"cluster02.csv": "\n".join([ITP_HEADER, *good_itp(3)[1:]])})
    return [["ingest", "itp", "--raw", str(first)], ["ingest", "itp", "--raw", str(second)]]


def _archive_crc_flipped(raw: Path) -> list[list[str]]:
    """A bit flipped in the gzip trailer's CRC: tarfile stops before it, so only reading the
    stream to its end finds the archive corrupt (the members' bytes cannot be trusted)."""
    archive = write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(400)])})
    data = bytearray(archive.read_bytes())
    data[-8] ^= 0x04
    archive.write_bytes(bytes(data))
    return [["ingest", "itp", "--raw", str(raw)]]


def _truncated_xz(raw: Path) -> list[list[str]]:
    rows = [f"{i},{i % 7},{i * 3}" for i in range(3000)]
    data = lzma.compress(("\n".join(["job,group,size", *rows]) + "\n").encode())
    (raw / "summary_train.csv").write_text(TRAIN_HEADER + "\n" + TRAIN_ROW + "\n")
    (raw / "alibaba_groups.csv.xz").write_bytes(data[: len(data) // 2])
    return [["ingest", "zeus", "--raw", str(raw)]]


def _truncated_gzip_utilization(raw: Path) -> list[list[str]]:
    (raw / ACME_JOBS).parent.mkdir(parents=True)
    (raw / ACME_JOBS).write_text(f"{SEREN_HEADER}\n{SEREN_ROW}\n")
    data = gzip.compress(b"Time,10.0.0.2\n1689379200,0.5\n1689379215,0.6\n")
    target = raw / "data" / "utilization" / "seren" / "NODE_CPU_UTILIZATION.csv.gz"
    target.parent.mkdir(parents=True)
    target.write_bytes(data[:-6])
    return [["ingest", "acme", "--raw", str(raw)]]


def _zeus_power_with_a_line_of(size: int) -> Callable[[Path], list[list[str]]]:
    """summary_power_a40.csv, plain: a good row, then one line of `size` bytes (written when the
    case runs: the module holds no such text)."""
    def write(raw: Path) -> list[list[str]]:
        with open(raw / "summary_power_a40.csv", "wb") as fh:
            fh.write(f"{POWER_HEADER}\n{POWER_OK}\n".encode())
            for _ in range(size >> 20):
                fh.write(b"7" * (1 << 20))
            fh.write(b"\n")
        return [["ingest", "zeus", "--raw", str(raw)]]
    return write


ACME_CPU = "data/utilization/seren/NODE_CPU_UTILIZATION.csv"
CPU_LINES = ["Time,10.0.0.2,10.0.0.3", "1689379200,0.5,0.4", "1689379215,0.6,0.3"]


def _acme_utilization(body: bytes) -> Callable[[Path], list[list[str]]]:
    """A Seren job file and one utilization file (NODE_CPU_UTILIZATION.csv) holding `body`."""
    return files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n", ACME_CPU: body}, ["ingest", "acme", "--raw", "{raw}"])


def _acme_ipmi(lines: list[str]) -> Callable[[Path], list[list[str]]]:
    """A Seren job file and one IPMI file (GPU_AB_Power.csv) of these lines under its header."""
    body = "\n".join(["Time,IP,CPU_Power,Sys_Total_Power", *lines]) + "\n"
    return files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n", "data/utilization/ipmi/GPU_AB_Power.csv": body},
                 ["ingest", "acme", "--raw", "{raw}"])


def _jobs_file_moved(raw: Path) -> list[list[str]]:
    """trace_seren.csv first at the top of --raw, then where the release keeps it, one row
    changed: the same file, so its rows are replaced, not set aside as another file's keys."""
    first, second = raw / "first", raw / "second" / "job_trace"
    first.mkdir()
    second.mkdir(parents=True)
    other = SEREN_ROW.replace("5778432", "5778433")
    (first / "trace_seren.csv").write_text(f"{SEREN_HEADER}\n{SEREN_ROW}\n{other}\n")
    (second / "trace_seren.csv").write_text(f"{SEREN_HEADER}\n{SEREN_ROW}\n{other.replace(',117,', ',118,')}\n")
    return [["ingest", "acme", "--raw", str(first)], ["ingest", "acme", "--raw", str(second.parent)]]


def _groups_recompressed(raw: Path) -> list[list[str]]:
    """alibaba_groups.csv, then the same rows as alibaba_groups.csv.xz without the last one:
    the compressed file replaces the plain one's rows."""
    first, second = raw / "first", raw / "second"
    rows = [f"{i:032x},{10.0 * i},{10.0 * i + 5},cifar100,1.0" for i in range(1, 4)]
    first.mkdir()
    second.mkdir()
    (first / "alibaba_groups.csv").write_text("\n".join([ALIBABA_HEADER, *rows]) + "\n")
    (second / "alibaba_groups.csv.xz").write_bytes(lzma.compress(("\n".join([ALIBABA_HEADER, *rows[:2]]) + "\n").encode()))
    return [["ingest", "zeus", "--raw", str(first)], ["ingest", "zeus", "--raw", str(second)]]


def _rows_traded_between_port_files(raw: Path) -> list[list[str]]:
    """Two port files of one switch that traded a row: every file still has as many lines as
    rows naming its port, so only a check of each line's port sends them down the exact path."""
    folder = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825"
    folder.mkdir(parents=True)
    a = port_rows("FourHundredGigE1/0/40", [10**9] * 3).splitlines()
    b = port_rows("FourHundredGigE1/0/41", [10**9] * 3).splitlines()
    a[2], b[2] = b[2], a[2]
    (folder / "Leaf-1_40.csv").write_text("\n".join(a) + "\n")
    (folder / "Leaf-1_41.csv").write_text("\n".join(b) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _port_file_bad_byte_deep(raw: Path) -> list[list[str]]:
    """A byte that is not UTF-8 in the 300th row: Spark's CSV reader stores it as U+FFFD, the
    text read refuses the file; past the first lines, only the stored rows can show it."""
    lines = port_rows("FourHundredGigE1/0/40", [10**9] * 400).encode().splitlines()
    lines[300] = lines[300].replace("星期五".encode(), b"\xe9\xe9")
    target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\n".join(lines) + b"\n")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _port_file_header_again(raw: Path) -> list[list[str]]:
    """Two port files joined by hand: the header once more between the second and third polls."""
    first, *polls = port_rows("FourHundredGigE1/0/40", [10**9] * 4).splitlines()
    target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join([first, *polls[:2], first, *polls[2:]]) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _port_file_cut_short(raw: Path) -> list[list[str]]:
    """A partial upload: the file ends inside its last line, after its fifth field."""
    text = port_rows("FourHundredGigE1/0/40", [10**9] * 3)
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    cut = text[: len(text) - len(last) - 1 + len(",".join(last.split(",")[:5]))]
    target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
    target.parent.mkdir(parents=True)
    target.write_text(cut)
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _empty_switch_folder(raw: Path) -> list[list[str]]:
    """Leaf-1's port file and Leaf-2's folder empty: a copy that stopped part way."""
    files(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9] * 2), [])(raw)
    (raw / "trafficinfo" / "2024052400" / "NH-DC-NM129-B03-ROCE-Leaf-2_GPU_S9825").mkdir()
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _save_time_in_seconds(raw: Path) -> list[list[str]]:
    """SaveTimeUTC written in seconds on one row: as milliseconds it is 1970-01-20."""
    lines = port_rows("FourHundredGigE1/0/40", [10**9] * 3).splitlines()
    stamp = lines[2].split(",")[1]
    lines[2] = lines[2].replace(f",{stamp},", f",{int(stamp) // 1000},")
    target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _version_vacuumed(raw: Path) -> list[list[str]]:
    """Version 1 (the first rows) of bronze.itp_jobs replaced by a re-ingest, compacted, then
    vacuumed with no retention: reading it back (a sum, which needs its files) is the
    statement's failure."""
    first, second = raw / "first", raw / "second"
    write_archive(first / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(3)])})
    write_archive(second / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
    return [["ingest", "itp", "--raw", str(first)], ["ingest", "itp", "--raw", str(second)],
            ["maintain", "bronze.itp_jobs", "--optimize"],
            ["maintain", "bronze.itp_jobs", "--vacuum", "--retain-hours", "0"],
            ["query", "SELECT sum(duration) FROM bronze.itp_jobs VERSION AS OF 1"]]


def _itp_archive(raw: Path) -> Path:
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
    return raw


def _lake_of_a_newer_delta_writer(raw: Path) -> list[list[str]]:
    """bronze.itp_jobs as a newer Delta left it: a writer feature this release does not know.
    Reads go on; a write stopped deep in the engine (or wrote past a feature it ignored)."""
    import json
    import subprocess
    import sys

    from deltalake import DeltaTable

    lake = raw.parent / "lake"
    made = subprocess.run([sys.executable, "-m", "tracelake", "ingest", "itp", "--raw", str(_itp_archive(raw)),
                           "--lake", str(lake)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    table = lake / "bronze" / "itp_jobs"
    actions = [{"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "SET TBLPROPERTIES"}},
               {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "invariants", "futureWriterThing"]}}]
    version = DeltaTable(str(table)).version() + 1
    (table / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    more = raw.parent / "more"
    write_archive(more / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(3)])})
    return [["query", "SELECT count(*) FROM bronze.itp_jobs"], ["ingest", "itp", "--raw", str(more)]]


def _poll_in_two_hour_folders(raw: Path) -> list[list[str]]:
    """Hour 01's first poll also at the end of hour 00's file: kept in both hour partitions of
    bronze (with the out-of-hour warning), rated once, in hour 00; hour 01's copy is `repeated`."""
    hour0 = port_rows("FourHundredGigE1/0/40", [10**9] * 3).splitlines()
    hour1 = [hour0[0]] + [line.replace(" 00:00:", " 01:00:").replace(
        f",{line.split(',')[1]},", f",{int(line.split(',')[1]) + 3_600_000},") for line in hour0[1:]]
    folder = f"{LEAF1}_GPU_S9825/Leaf-1_40.csv"
    for hour, lines in (("2024052400", [*hour0, hour1[1]]), ("2024052401", hour1)):
        target = raw / "trafficinfo" / hour / folder
        target.parent.mkdir(parents=True)
        target.write_text("\n".join(lines) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw)],
            ["query", "SELECT hour_cst, status, count(*) AS n FROM silver.zj_port_rates GROUP BY 1, 2 ORDER BY 1, 2"]]


def _link_end_seen_again_next_hour(raw: Path) -> list[list[str]]:
    """A leaf's uplink in hour 00's link.csv and again in hour 01's, ingested hour by hour: the
    second hour's ends join the stored silver.zj_link_wiring (a union of a stored table and rows
    of bronze.zj_link, whose column comments differ, which Sail 0.7.2's planner refused)."""
    leaf, spine = "NH-DC-NM129-D03-ROCE-Leaf-5.GPU.S9825", "NH-DC-NM129-E01-ROCE-spine-1.GPU.S9825"
    for hour, minute in (("2024052400", "上午00:00:04"), ("2024052401", "上午01:00:04")):
        row = (f"{leaf},400GE1/0/33,{spine},FourHundredGigE1/0/13,2024/5/24 {minute},14981330,10.107.208.115,up,"
               "94915405645,14981420,90,0,441467003,107780,0.88,0,114148632695,18017180,90,18377523,530923873,"
               "129620,1.06,3,0")
        target = raw / "trafficinfo" / hour / f"{hour}_link.csv"
        target.parent.mkdir(parents=True)
        target.write_text(f"{LINK_HEADER}\n{row}\n", encoding="utf-8")
    return [["ingest", "zhejiang", "--raw", str(raw), "--hours", "2024052400"],
            ["ingest", "zhejiang", "--raw", str(raw), "--hours", "2024052401"],
            ["query", "SELECT device_role, dst_role, port_name, samples, ecn_marked_total FROM silver.zj_link_wiring"]]


def _minutes_delivered_again_next_hour(raw: Path) -> list[list[str]]:
    """Hour 01's folder holds the last 150 s of hour 00's polls again (a collector's retry) and
    3 polls of its own; hour 01 is ingested first, then hour 00: the copies become `repeated`
    and no byte is counted twice, as in the other orders."""
    polls = port_rows("FourHundredGigE1/0/40", [10**9] * 403).splitlines()  # the header, then polls 1-403
    for hour, lines in (("2024052400", polls[:401]), ("2024052401", [polls[0], *polls[101:]])):
        target = raw / "trafficinfo" / hour / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
        target.parent.mkdir(parents=True)
        target.write_text("\n".join(lines) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw), "--hours", "2024052401"],
            ["ingest", "zhejiang", "--raw", str(raw), "--hours", "2024052400"],
            ["query", "SELECT hour_cst, status, count(*) AS n, round(sum(in_bytes_per_s * interval_s)) AS bytes "
                      "FROM silver.zj_port_rates GROUP BY 1, 2 ORDER BY 1, 2"]]


def _one_poll_twice(differ: bool):
    """Leaf-1_40.csv with its third poll delivered twice, at the end of the file: the same values
    (a re-delivery: kept once, the copy counted as repeated and named in a warning), or another
    byte count (a conflict: both quarantined with the reason and the file)."""
    def write(raw: Path) -> list[list[str]]:
        lines = port_rows("FourHundredGigE1/0/40", [10**9] * 4).splitlines()
        again = lines[3].replace(f",{10**9},", f",{2 * 10**9},", 1) if differ else lines[3]
        target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
        target.parent.mkdir(parents=True)
        target.write_text("\n".join([*lines, again]) + "\n")
        ingest = [["ingest", "zhejiang", "--raw", str(raw)]]
        return ingest + [["query", "SELECT status, count(*) AS n FROM silver.zj_port_rates GROUP BY 1 ORDER BY 1"]] \
            if differ else ingest
    return write


def _poll_of_the_next_hour_in_a_folder(raw: Path) -> list[list[str]]:
    """Hour 00's port file ends with a poll of 01:00: one hour folder holds a sample outside its
    hour, and the warning counts that folder, not rows."""
    lines = port_rows("FourHundredGigE1/0/40", [10**9] * 3).splitlines()
    stamp = lines[-1].split(",")[1]
    late = lines[-1].replace(" 00:00:", " 01:00:").replace(f",{stamp},", f",{int(stamp) + 3_600_000},")
    target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join([*lines, late]) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _save_time_text_a_second_off(raw: Path) -> list[list[str]]:
    """One row's SaveTime text a second after its SaveTimeUTC + 8 h: the pass's byte check cannot
    show it, so the gate's query of that rule runs and counts exactly that row (a warning)."""
    lines = port_rows("FourHundredGigE1/0/40", [10**9] * 4).splitlines()
    assert " 00:00:01.900," in lines[3]
    lines[3] = lines[3].replace(" 00:00:01.900,", " 00:00:02.900,")
    target = raw / "trafficinfo" / "2024052400" / f"{LEAF1}_GPU_S9825" / "Leaf-1_40.csv"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _raw_is_a_file(raw: Path) -> list[list[str]]:
    (raw / "summary_train.csv").write_text(TRAIN_HEADER + "\n" + TRAIN_ROW + "\n")
    return [["ingest", "zeus", "--raw", str(raw / "summary_train.csv")]]


def _real_task_without_workbook(raw: Path) -> list[list[str]]:
    from corpus import copy_tree
    real = FIXTURES.parents[3].parent / "shared" / "data" / "zhejiang" / "taskinfo"
    copy_tree(real, raw / "taskinfo")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _train_file_linked_to_a_secret(raw: Path) -> list[list[str]]:
    """summary_train.csv is a symbolic link to a file whose first line is not for showing."""
    secret = raw.parent / "secret.txt"
    secret.write_text("root:$6$not-for-your-eyes:19000:0:99999:7:::\n")
    (raw / "summary_train.csv").symlink_to(secret)
    return [["ingest", "zeus", "--raw", str(raw)]]


def _utilization_csv_links_to_a_device(raw: Path) -> list[list[str]]:
    (raw / ACME_JOBS).parent.mkdir(parents=True)
    (raw / ACME_JOBS).write_text(f"{SEREN_HEADER}\n{SEREN_ROW}\n")
    target = raw / "data" / "utilization" / "seren" / "NODE_CPU_UTILIZATION.csv"
    target.parent.mkdir(parents=True)
    target.symlink_to("/dev/zero")
    return [["ingest", "acme", "--raw", str(raw)]]


def _query(sql: str):
    def write(raw: Path) -> list[list[str]]:
        return [["query", sql]]
    return write


def _cli(*args: str):
    def write(raw: Path) -> list[list[str]]:
        return [[*args]]
    return write


def _damaged_lake(damage: str, *command: str):
    """A lake of two small tables (raw/lake2) whose bronze.itp_jobs is then damaged: its newest
    commit cut short, emptied or overwritten, or its folder replaced by a file; `command` runs on it."""
    def write(raw: Path) -> list[list[str]]:
        import pyarrow as pa
        from deltalake import write_deltalake

        lake = raw / "lake2"
        jobs = lake / "bronze" / "itp_jobs"
        if damage in ("column", "constraint"):  # bronze.itp_jobs as its schema file says, then changed
            from deltalake import DeltaTable

            from tracelake.schema import load_schema

            declared = load_schema("bronze.itp_jobs").arrow_schema()
            extra = declared.append(pa.field("note", pa.string())) if damage == "column" else declared
            DeltaTable.create(str(jobs), extra)
            if damage == "constraint":
                DeltaTable(str(jobs)).alter.add_constraint({"short_jobs": "duration < 1000"})
            write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
            return [[*command, "--raw", str(raw), "--lake", str(lake)]]
        if damage == "no_commit":  # a first write killed before its commit: a log folder, no version
            log = raw.parent / "lake" / "bronze" / "itp_jobs" / "_delta_log"  # in the runner's lake: its rows are checked
            log.mkdir(parents=True)
            (log / ".00000000000000000000.json.tmp").write_text("")
            write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
            return [[*command, "--raw", str(raw)]]
        for table in ("itp_jobs", "zeus_train"):
            write_deltalake(str(lake / "bronze" / table), pa.table({"n": [1, 2, 3]}))
        commit = jobs / "_delta_log" / "00000000000000000000.json"
        if damage == "cut":
            commit.write_bytes(commit.read_bytes()[:100])
        elif damage == "empty":
            commit.write_bytes(b"")
        elif damage == "garbage":
            commit.write_bytes(b"\x00\x01 not a log\n")
        elif damage == "data":
            next(jobs.glob("*.parquet")).unlink()
        elif damage == "file":
            import shutil

            shutil.rmtree(jobs)
            jobs.write_text("a table folder turned into a file")
        if command[0] == "ingest":
            write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
            return [[*command, "--raw", str(raw), "--lake", str(lake)]]
        return [[*command, "--lake", str(lake)]]
    return write


def _gold_removed_then_an_hour_without_the_task(raw: Path) -> list[list[str]]:
    """A generated one-hour world (a task, its traffic and the workbook) ingested; then its
    gold.zj_iteration_network folder is removed and a traffic hour two days later, far from
    the task's iterations, is ingested. No evidence partition changes, and gold is built
    whole (it read as "nothing to rebuild" and left the table out of the lake)."""
    from tracelake.run.registry import generate

    generate("zhejiang", raw / "world", scale=0.01, seed=0, hours=1, tasks=1)
    generate("zhejiang", raw / "later_world", scale=0.01, seed=0, hours=1, tasks=1, start="2024052600")
    later = raw / "later" / "trafficinfo"
    later.mkdir(parents=True)
    (raw / "later_world" / "trafficinfo" / "2024052600").rename(later / "2024052600")
    return [["ingest", "zhejiang", "--raw", str(raw / "world")], [REMOVE, "gold/zj_iteration_network"],
            ["ingest", "zhejiang", "--raw", str(raw / "later")]]


def _old_delta_jar(raw: Path) -> list[list[str]]:
    jar = raw / "delta-spark_4.1_2.13-4.3.1.jar"
    jar.write_bytes(b"")
    return [["query", "SELECT 1", "--profile", "spark", "--conf", f"spark_conf.spark.jars={jar}"]]


def _ingested_then(*args: str):
    """A lake holding bronze.itp_jobs (2 rows), then `args` on it."""
    def write(raw: Path) -> list[list[str]]:
        write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": "\n".join([ITP_HEADER, *good_itp(2)])})
        return [["ingest", "itp", "--raw", str(raw)], [*args]]
    return write


def _hourly_one_nic_sample(raw: Path) -> list[list[str]]:
    source = FIXTURES / "hourly" / "trafficinfo" / "2024052412" / "2024052412_nic.csv"
    lines = source.read_text(encoding="utf-8-sig").splitlines()
    target = raw / "trafficinfo" / "2024052412" / "2024052412_nic.csv"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    return [["ingest", "zhejiang", "--raw", str(raw)]]


def _hourly_nic(edit: Callable[[list[str]], list[str]]):
    """The fixture hour's nic.csv (3 samples) with its data lines edited."""
    def write(raw: Path) -> list[list[str]]:
        source = FIXTURES / "hourly" / "trafficinfo" / "2024052412" / "2024052412_nic.csv"
        header, *lines = source.read_text(encoding="utf-8-sig").splitlines()
        target = raw / "trafficinfo" / "2024052412" / "2024052412_nic.csv"
        target.parent.mkdir(parents=True)
        target.write_text("\n".join([header, *edit(lines)]) + "\n", encoding="utf-8")
        return [["ingest", "zhejiang", "--raw", str(raw)]]
    return write


def _same_instant_as_the_first(lines: list[str]) -> list[str]:
    """The second sample given the first one's time: one key, two sets of values."""
    first, second, *rest = lines
    return [first, ",".join([first.split(",")[0], *second.split(",")[1:]]), *rest]


def _time_as_its_groups(lines: list[str]) -> list[str]:
    """The second sample's time written as the time conversion's own intermediate form."""
    first, second, *rest = lines
    return [first, ",".join(["2024|5|24|下午|12|01|05|", *second.split(",")[1:]]), *rest]


def _header_again(lines: list[str]) -> list[str]:
    """The header line once more between the first and second samples (files joined by hand)."""
    header = (FIXTURES / "hourly" / "trafficinfo" / "2024052412" / "2024052412_nic.csv").read_text(
        encoding="utf-8-sig").splitlines()[0]
    return [lines[0], header, *lines[1:]]


def _second_sample_field(position: int, text: str) -> Callable[[list[str]], list[str]]:
    """The second sample with the field at `position` written as `text`."""
    def edit(lines: list[str]) -> list[str]:
        fields = lines[1].split(",")
        fields[position] = text
        return [lines[0], ",".join(fields), *lines[2:]]
    return edit


def _hourly_header_only(raw: Path) -> list[list[str]]:
    source = FIXTURES / "hourly" / "trafficinfo" / "2024052412" / "2024052412_flow.csv"
    header = source.read_text(encoding="utf-8-sig").splitlines()[0]
    target = raw / "trafficinfo" / "2024052412" / "2024052412_flow.csv"
    target.parent.mkdir(parents=True)
    target.write_text(header + "\n", encoding="utf-8")
    return [["ingest", "zhejiang", "--raw", str(raw)]]



def _zj_hours(spec: str):
    """One port file of hour 2024052400, ingested with `--hours spec`."""
    return files(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]),
                 ["ingest", "zhejiang", "--raw", "{raw}", "--hours", spec])


def _zj_empty_hour_in_release(raw: Path) -> list[list[str]]:
    """A whole release (no --hours) whose second hour folder is empty."""
    (raw / "trafficinfo" / "2024052401").mkdir(parents=True)
    return files(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]), ["ingest", "zhejiang", "--raw", "{raw}"])(raw)


def _zj_with_hour_file(name: str):
    """Hour 2024052400's port file plus a file `name` beside its switch folder."""
    return files({**port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]), f"trafficinfo/2024052400/{name}": "x\n"},
                 ["ingest", "zhejiang", "--raw", "{raw}"])


FLOW_HEADER = "SourceServer,DestServer,SourceSwitch,DestSwitch,Time,SourceIp,DestIp,SourceQp,DestQp,Rtt,ReadPkts,WritePkts,SendPkts,NakPkts"
FLOW_ROW = ("NH-DC-NM129-G09-20U-GPU-233,NH-DC-NM129-C07-28U-GPU-100,NH-DC-NM129-H03-ROCE-Leaf-13.GPU.S9825,"
            "NH-DC-NM129-D03-ROCE-Leaf-5.GPU.S9825,2024/5/24 上午12:0{m}:00,10.107.234.53,10.107.226.40,12336344,"
            "14428133,4637,0,65023175,2,0")


def _flow_lines(third_server: bytes) -> list[bytes]:
    """Hour 2024052400's flow.csv lines, UTF-8: header and 4 rows, the third row's SourceServer
    replaced by `third_server` (bytes, in any encoding)."""
    rows = [FLOW_ROW.format(m=m).encode() for m in range(4)]
    rows[2] = rows[2].replace(b"NH-DC-NM129-G09", third_server, 1)
    return [FLOW_HEADER.encode(), *rows]


def _zj_flow(lines: list[bytes], bom: bool = False):
    data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + b"\n"
    return files({"trafficinfo/2024052400/2024052400_flow.csv": data}, ["ingest", "zhejiang", "--raw", "{raw}"])

LOG_HEAD = ['Defaulted container "pytorch" out of: pytorch, sync-barrier (init)',
            "[2024-01-01 00:00:01,000] [INFO] [train.py:10:main] starting"]
ON_LOG = ("[2024-01-01 00:00:{s:02d},500] [INFO] [hf_trainer.py:53:on_log] loss: 1.5, learning_rate: 1e-05, "
          "epoch: 0.5, iter: {i}/3,  00:10 < 00:10,  10.0s/it")

def megatron_line(i: int, elapsed_ms: str = "4568.0", loss: str = "2.504220E+00", minute: int | None = None) -> str:
    """A Megatron master-log iteration line, its time at 00:0<minute>:00 (the iteration's number
    unless given)."""
    return (f"[2024-01-01 00:{minute if minute is not None else i:02d}:00] iteration {i:>8}/      10 | consumed samples: "
            f"{1024 * i:>12} | elapsed time per iteration (ms): {elapsed_ms} | learning rate: 1.000E-05 | "
            f"global batch size:  1024 | lm loss: {loss} | loss scale: 1.0 |")


def _megatron_log_cut_at(cut: str):
    """Iterations 1-3 whole, then iteration 4 cut after `cut` with no newline: a log still written."""
    whole = "\n".join([*LOG_HEAD, *(megatron_line(i) for i in range(1, 4))]) + "\n"
    line = megatron_line(4)
    return files(task_folder((whole + line[:line.index(cut) + len(cut)]).encode()),
                 ["ingest", "zhejiang", "--raw", "{raw}"])


def _log_over_a_megabyte():
    """5,000 DeepSpeed lines of ~250 bytes (1.3 MB), then Megatron iterations 1-3."""
    pad = "x" * 180
    steps = [f"[2024-01-01 00:00:01,000] [INFO] [train.py:10:main] step {i} {pad}" for i in range(5000)]
    text = "\n".join([*LOG_HEAD[:1], *steps, *(megatron_line(i) for i in range(1, 4)), LOG_HEAD[1]]) + "\n"
    return files(task_folder(text.encode()), ["ingest", "zhejiang", "--raw", "{raw}"])


def _hf_step(i: int, seconds: int) -> str:
    return (f"[2024-01-01 00:{seconds // 60:02d}:{seconds % 60:02d},000] [INFO] [hf_trainer.py:53:on_log] loss: 1.5, "
            f"learning_rate: 1e-05, epoch: 0.5, iter: {i}/10,  00:10 < 00:10,  10.0s/it")


RESTARTED = files(task_folder([  # steps 1-8 every 10 s, then steps 4-6 again after a 210 s restart
    *LOG_HEAD, "[INFO|trainer.py:1721] 2024-01-01 00:00:00,000 >> ***** Running training *****",
    *(_hf_step(i, 10 * i) for i in range(1, 9)), *(_hf_step(i, 250 + 10 * i) for i in range(4, 7))]),
    ["ingest", "zhejiang", "--raw", "{raw}"])


def _restarted_then(*args: str):
    def write(raw: Path) -> list[list[str]]:
        return [*RESTARTED(raw), [*args]]
    return write


CUT_OFF = [["incomplete last line: the log does not end with a newline (cut off while being written)"]]

CASES = [
    # ---- ITP / ElasticFlow
    Case("delta_table_of_a_newer_writer", _lake_of_a_newer_delta_writer, 2,
         "bronze.itp_jobs: its Delta protocol needs the table feature 'futureWriterThing' (reader 1, writer 7), "
         "which this release of tracelake cannot write: a newer Delta wrote it", rows={"bronze/itp_jobs": 2}),
    Case("itp_header_only", itp([]), 3, "bronze.itp_jobs: critical expectation(s) failed: table_row_count_to_be_between"),
    Case("itp_every_row_quarantined_by_a_rule", itp([f"{job_id(i)},{i},600,3" for i in range(1, 4)]), 0,
         rows={"bronze/itp_jobs": 0, "silver/jobs": 0},
         reasons={"quarantine/itp_jobs": [["column_values_to_be_in_set(num_gpu)"]] * 3}, read={"itp_jobs": 3}),
    Case("itp_bom_before_header", itp(good_itp(3), header="\ufeff" + ITP_HEADER), 0,
         rows={"bronze/itp_jobs": 3}, reasons={"quarantine/itp_jobs": []}, read={"itp_jobs": 3}),
    Case("itp_crlf_lines", itp([r + "\r" for r in good_itp(3)]), 0, rows={"bronze/itp_jobs": 3}, read={"itp_jobs": 3}),
    Case("itp_short_row", itp([*good_itp(2), f"{job_id(9)},9,600"]), 0, rows={"bronze/itp_jobs": 2},
         reasons={"quarantine/itp_jobs": [["expected 4 fields, found 3"]]}, read={"itp_jobs": 3}),
    Case("itp_not_a_number", itp([*good_itp(2), f"{job_id(9)},9,soon,1"]), 0, rows={"bronze/itp_jobs": 2},
         reasons={"quarantine/itp_jobs": [["duration: 'soon' is not a valid bigint"]]}, read={"itp_jobs": 3}),
    Case("itp_duplicate_ids", itp([*good_itp(2), good_itp(1)[0]]), 0, rows={"bronze/itp_jobs": 1},
         reasons={"quarantine/itp_jobs": [["column_values_to_be_unique(job_id)"]] * 2}, read={"itp_jobs": 3}),
    Case("itp_wrong_header", itp(good_itp(2), header="id,submitted,duration,gpus"), 2, "does not match"),
    Case("itp_member_named_in_capitals", itp(good_itp(2), member="cluster02.CSV"), 2,
         "unexpected CSV member 'cluster02.CSV' (want clusterNN.csv)"),
    Case("itp_truncated_archive", _truncated, 2, "truncated or corrupt archive"),
    Case("itp_member_escapes_archive", _traversal, 2, "escapes the archive with '..'"),
    Case("itp_good_file_then_all_bad", _good_then_all_bad, 0, rows={"bronze/itp_jobs": 0, "silver/jobs": 0},
         reasons={"quarantine/itp_jobs": [["column_values_to_be_in_set(num_gpu)"]] * 3}),
    Case("itp_key_arrives_later_from_another_file", _key_arrives_from_another_file, 0, rows={"bronze/itp_jobs": 3},
         reasons={"quarantine/itp_jobs": [["key already stored from raw-traces.tar.gz!cluster01.csv, a file not in this "
                                           "run: ingest both together to move it"]]}),
    Case("itp_member_name_ends_in_a_newline", itp(good_itp(2), member="cluster02.csv\n"), 2,
         "raw-traces.tar.gz: unexpected CSV member 'cluster02.csv\\n' (want clusterNN.csv)"),
    Case("itp_archive_crc_does_not_match", _archive_crc_flipped, 2, "truncated or corrupt archive (CRC check failed"),
    Case("itp_staging_folder_is_a_url",
         lambda raw: [["ingest", "itp", "--raw", str(_itp_archive(raw)), "--conf", "staging_dir=s3://nobucket/staging"]], 2,
         "staging folder s3://nobucket/staging is a URL: an ingest unpacks raw files there"),
    Case("itp_lake_url_scheme_typo",
         lambda raw: [["ingest", "itp", "--raw", str(_itp_archive(raw)), "--lake", "s4://bucket/lake"]], 2,
         "lake s4://bucket/lake: unknown scheme 's4://' (object stores: s3://, s3a://, gs://, abfss://, abfs://, az://; "
         "a local folder is a plain path)"),
    Case("itp_raw_url_scheme_typo", lambda raw: [["ingest", "itp", "--raw", "s4://bucket/raw"]], 2,
         "raw folder s4://bucket/raw: unknown scheme 's4://'"),
    Case("itp_lake_path_is_under_a_file", _lake_under_a_file, 2, "is not writable: Not a directory"),
    # ---- Zeus
    Case("zeus_non_finite_numbers", zeus([TRAIN_ROW], [
        "cifar100,shufflenetv2,64,adadelta,100,inf,90", "cifar100,shufflenetv2,64,adadelta,125,20,nan",
        "cifar100,shufflenetv2,64,adadelta,150,20,1e400", POWER_OK]), 0,
        rows={"bronze/zeus_power": 1, "gold/zeus_time_energy_to_accuracy": 1},
        reasons={"quarantine/zeus_power": sorted([["time_per_epoch: 'inf' is not a finite number"],
                                                  ["average_power: 'nan' is not a finite number"],
                                                  ["average_power: '1e400' is not a finite number"]])},
        read={"zeus_power": 4}),
    Case("zeus_files_that_do_not_join", zeus([TRAIN_ROW], ["imagenet,resnet50,64,adadelta,100,20,90"]), 0,
         rows={"bronze/zeus_train": 1, "bronze/zeus_power": 1, "gold/zeus_time_energy_to_accuracy": 0}),
    Case("zeus_header_only", zeus([], []), 3, "bronze.zeus_train: critical expectation(s) failed"),
    Case("zeus_latin1_bytes", files({"summary_train.csv": (TRAIN_HEADER + "\n").encode() + "café,x,1,a,1,1,1,1\n".encode("latin-1")},
                                    ["ingest", "zeus", "--raw", "{raw}"]), 2, "summary_train.csv: not UTF-8 text"),
    Case("zeus_learning_rate_text", zeus([TRAIN_ROW, "cifar100,shufflenetv2,64,adadelta,fast,1,0.5,3"], None), 0,
         rows={"bronze/zeus_train": 1}, reasons={"quarantine/zeus_train": [["learning_rate: 'fast' is not a valid double"]]},
         read={"zeus_train": 2}),
    Case("zeus_extra_column", zeus([TRAIN_ROW, TRAIN_ROW.replace("adadelta,1e-1", "adadelta,1e-2") + ",9"], None), 0,
         rows={"bronze/zeus_train": 1}, reasons={"quarantine/zeus_train": [["expected 8 fields, found 9"]]},
         read={"zeus_train": 2}),
    Case("zeus_wrong_power_header", files({"summary_power_a40.csv": POWER_HEADER.replace("power_limit", "limit") + "\n" + POWER_OK + "\n"},
                                          ["ingest", "zeus", "--raw", "{raw}"]), 2, "does not match"),
    Case("zeus_bad_file_found_late_writes_nothing",
         files({"summary_train.csv": f"{TRAIN_HEADER}\n{TRAIN_ROW}\n",
                "summary_power_a40.csv": POWER_HEADER.replace("power_limit", "limit") + "\n" + POWER_OK + "\n"},
               ["ingest", "zeus", "--raw", "{raw}"]), 2, "summary_power_a40.csv: header",
         rows={"bronze/zeus_train": 0, "bronze/zeus_power": 0}),
    Case("zeus_negative_power", zeus(None, [POWER_OK, "cifar100,shufflenetv2,64,adadelta,200,20,-5"]), 0,
         rows={"bronze/zeus_power": 1}, reasons={"quarantine/zeus_power": [["column_values_to_be_between(average_power)"]]},
         read={"zeus_power": 2}),
    Case("zeus_header_with_nul_and_escape_bytes",
         zeus([TRAIN_ROW], None, header_train=TRAIN_HEADER.replace(",run,", ",r\x00un\x1b[2J,")), 2,
         "summary_train.csv: header 'dataset,network,batch_size,optimizer,learning_rate,r\\x00un\\x1b[2J,target_metric"),
    Case("zeus_train_file_is_a_link_to_a_secret", _train_file_linked_to_a_secret, 2,
         "summary_train.csv: header (not shown: the file is a symbolic link) does not match", hidden="not-for-your-eyes"),
    Case("zeus_train_file_is_a_fifo", with_fifo({"summary_power_a40.csv": f"{POWER_HEADER}\n{POWER_OK}\n"}, "summary_train.csv",
                                                ["ingest", "zeus", "--raw", "{raw}"]), 2,
         "tracelake: error: summary_train.csv: a FIFO, not a regular file; only regular files are read",
         rows={"bronze/zeus_power": 0}),
    Case("zeus_truncated_xz", _truncated_xz, 2, "alibaba_groups.csv.xz: truncated .xz file",
         rows={"bronze/zeus_train": 0}),
    Case("zeus_groups_file_recompressed", _groups_recompressed, 0, rows={"bronze/zeus_alibaba_groups": 2},
         reasons={"quarantine/zeus_alibaba_groups": []}),
    Case("zeus_target_epoch_not_positive", zeus([TRAIN_ROW, TRAIN_ROW.replace(",1,0.5,3", ",2,0.5,-3"),
                                                  TRAIN_ROW.replace(",1,0.5,3", ",3,0.5,0")], [POWER_OK]), 0,
         rows={"bronze/zeus_train": 1, "gold/zeus_time_energy_to_accuracy": 1},
         reasons={"quarantine/zeus_train": [["target_epoch_positive"]] * 2}, read={"zeus_train": 3}),
    Case("zeus_power_file_compressed", files({"summary_power_a40.csv.xz": lzma.compress(f"{POWER_HEADER}\n{POWER_OK}\n".encode())},
                                             ["ingest", "zeus", "--raw", "{raw}"]), 0,
         rows={"bronze/zeus_power": 1}, read={"zeus_power": 1}),
    Case("zeus_dataset_quoted_or_padded", zeus([TRAIN_ROW, '"cifar100"' + TRAIN_ROW.removeprefix("cifar100").replace(",1,0.5", ",2,0.5"),
                                                 " " + TRAIN_ROW.replace(",1,0.5", ",3,0.5")], [POWER_OK]), 0,
         rows={"bronze/zeus_train": 1, "gold/zeus_time_energy_to_accuracy": 1},
         reasons={"quarantine/zeus_train": [["column_values_to_be_in_set(dataset)"]] * 2}, read={"zeus_train": 3}),
    Case("zeus_raw_is_a_file", _raw_is_a_file, 2, "is a file, not a folder"),
    Case("zeus_raw_missing", _cli("ingest", "zeus", "--raw", "/nonexistent/zeus"), 2, "raw folder /nonexistent/zeus does not exist"),
    # ---- AcmeTrace
    Case("acme_release_root_as_cloned", files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n"}, ["ingest", "acme", "--raw", "{raw}"]), 0,
         rows={"bronze/acme_jobs": 1, "silver/jobs": 1}, read={"acme_jobs": 1}),
    # the docs say a .csv.gz job trace is read: it was skipped without a word (exit 0, no job)
    Case("acme_job_trace_gzipped", files({f"{ACME_JOBS}.gz": gzip.compress(f"{SEREN_HEADER}\n{SEREN_ROW}\n".encode())},
                                         ["ingest", "acme", "--raw", "{raw}"]), 0,
         rows={"bronze/acme_jobs": 1, "silver/jobs": 1}, read={"acme_jobs": 1}),
    Case("acme_job_trace_plain_and_gzipped", files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n",
                                                    f"{ACME_JOBS}.gz": gzip.compress(f"{SEREN_HEADER}\n{SEREN_ROW}\n".encode())},
                                                   ["ingest", "acme", "--raw", "{raw}"]), 2,
         "job_trace/trace_seren.csv and job_trace/trace_seren.csv.gz are one file in two places or forms; keep one"),
    Case("acme_job_trace_gzip_cut_short", files({f"{ACME_JOBS}.gz": gzip.compress(f"{SEREN_HEADER}\n{SEREN_ROW}\n".encode())[:12]},
                                                ["ingest", "acme", "--raw", "{raw}"]), 2,
         "job_trace/trace_seren.csv.gz: truncated .gz file (the stream ends before its end marker)"),
    # a compressed file that unpacks to one huge line: refused at the bound, exit 2 naming the
    # file and line (the engines failed with "Offset overflow", exit 1, at 3-9 GB)
    Case("acme_job_trace_gz_holding_a_huge_line",
         files({f"{ACME_JOBS}.gz": gzip.compress(f"{SEREN_HEADER}\n{SEREN_ROW}\n".encode() + b"9" * (9 << 20) + b"\n")},
               ["ingest", "acme", "--raw", "{raw}"]), 2,
         "job_trace/trace_seren.csv.gz: line 3 is longer than 8 MiB, the bound on one line"),
    Case("itp_archive_member_holding_a_huge_line",
         itp([*good_itp(1), "x" * (9 << 20)]), 2,
         "raw-traces.tar.gz!cluster01.csv: line 3 is longer than 8 MiB, the bound on one line"),
    Case("acme_utilization_gz_holding_a_huge_line",
         files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n",
                f"{ACME_CPU}.gz": gzip.compress("\n".join(CPU_LINES).encode() + b"\n1689379230," + b"9" * (9 << 20) + b"\n")},
               ["ingest", "acme", "--raw", "{raw}"]), 2,
         "utilization/seren/NODE_CPU_UTILIZATION.csv.gz: line 4 is longer than 8 MiB, the bound on one line"),
    # a plain file's long line is read (one of 100 MiB is set aside, a row); past the engine's
    # 128 MiB result message it failed, exit 1, naming nothing: now the file and the line
    Case("zeus_csv_holding_a_line_past_the_engine_message_limit", _zeus_power_with_a_line_of(144 << 20), 2,
         "summary_power_a40.csv: line 3 is longer than 8 MiB, the bound on one line"),
    # a series whose file fails the fast parse is read line by line: its lines are bounded first
    Case("acme_utilization_csv_holding_a_huge_line",
         _acme_utilization("\n".join(CPU_LINES).encode() + b"\n1689379230," + b"9" * (9 << 20) + b"\n"), 2,
         "utilization/seren/NODE_CPU_UTILIZATION.csv: line 4 is longer than 8 MiB, the bound on one line"),
    # two files joined by hand: each header line after the first is set aside with its line,
    # counted as read (before, dropped and counted nowhere); a CRLF one and one with no newline too
    Case("zeus_power_header_repeated_mid_file",
         files({"summary_power_a40.csv": f"{POWER_HEADER}\n{POWER_OK}\n{POWER_HEADER}\r\n"
                                         f"{POWER_OK.replace(',175,', ',200,')}\n{POWER_HEADER}"},
               ["ingest", "zeus", "--raw", "{raw}"]), 0,
         rows={"bronze/zeus_power": 2},
         reasons={"quarantine/zeus_power": [["line 3 repeats the file's header line (files joined?): not a data line"],
                                            ["line 5 repeats the file's header line (files joined?): not a data line"]]},
         read={"zeus_power": 4}),
    Case("itp_header_repeated_mid_file", itp([*good_itp(2)[:1], ITP_HEADER, *good_itp(2)[1:]]), 0,
         rows={"bronze/itp_jobs": 2},
         reasons={"quarantine/itp_jobs": [["line 3 repeats the file's header line (files joined?): not a data line"]]},
         read={"itp_jobs": 3}),
    Case("zeus_xz_holding_a_huge_line",
         files({"summary_power_a40.csv.xz": lzma.compress(f"{POWER_HEADER}\n".encode() + b"x" * (9 << 20))},
               ["ingest", "zeus", "--raw", "{raw}"]), 2,
         "summary_power_a40.csv.xz: line 2 is longer than 8 MiB, the bound on one line"),
    Case("zeus_power_file_gzipped", files({"summary_power_a40.csv.gz": gzip.compress(f"{POWER_HEADER}\n{POWER_OK}\n".encode())},
                                          ["ingest", "zeus", "--raw", "{raw}"]), 0,
         rows={"bronze/zeus_power": 1}, read={"zeus_power": 1}),
    Case("acme_header_only", files({ACME_JOBS: SEREN_HEADER + "\n"}, ["ingest", "acme", "--raw", "{raw}"]), 3,
         "bronze.acme_jobs: critical expectation(s) failed"),
    Case("acme_unknown_state", files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n{SEREN_ROW.replace('5778432', '5778433').replace('FAILED', 'EXPLODED')}\n"},
                                     ["ingest", "acme", "--raw", "{raw}"]), 0,
         rows={"bronze/acme_jobs": 1}, reasons={"quarantine/acme_jobs": [["state_known"]]}, read={"acme_jobs": 2}),
    Case("acme_bad_timestamp", files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n{SEREN_ROW.replace('5778432', '5778433').replace('2023-03-01 00:18:22+08:00', 'yesterday')}\n"},
                                     ["ingest", "acme", "--raw", "{raw}"]), 0,
         rows={"bronze/acme_jobs": 1}, reasons={"quarantine/acme_jobs": [["submit_time: 'yesterday' is not a valid timestamp"]]},
         read={"acme_jobs": 2}),
    # a byte that is not UTF-8 past the first lines: the engine's error names no file, tracelake does
    Case("acme_latin1_byte_late_in_the_file",
         files({ACME_JOBS: (f"{SEREN_HEADER}\n" + "".join(SEREN_ROW.replace("5778432", str(5778432 + i)) + "\n"
                                                         for i in range(200))).encode()
                + SEREN_ROW.replace("u5907", "caf\xe9").replace("5778432", "1").encode("latin-1") + b"\n"},
               ["ingest", "acme", "--raw", "{raw}"]), 2, "trace_seren.csv: not UTF-8 text (byte 0xe9",
         rows={"bronze/acme_jobs": 0}),
    Case("acme_truncated_gzip_utilization", _truncated_gzip_utilization, 2,
         "NODE_CPU_UTILIZATION.csv.gz: truncated or corrupt gzip file", rows={"bronze/acme_jobs": 0}),
    Case("acme_utilization_csv_links_to_a_device", _utilization_csv_links_to_a_device, 2,
         "tracelake: error: NODE_CPU_UTILIZATION.csv: a character device, not a regular file", rows={"bronze/acme_jobs": 0}),
    # a partial upload of a utilization file: its last line ends mid-line, with no newline
    Case("acme_utilization_file_cut_short_in_its_last_line",
         _acme_utilization(("\n".join(CPU_LINES) + "\n1689379230,0.").encode()), 0,
         rows={"bronze/acme_utilization": 4}, read={"acme_utilization": 6},  # the cut line: a row per column
         reasons={"quarantine/acme_utilization": [["expected 3 fields, found 2"]] * 2}),
    Case("acme_utilization_bad_byte_deep_in_the_file",
         _acme_utilization(("\n".join(CPU_LINES) + "\n").encode() + b"".join(
             f"{1689379230 + 15 * i},0.5,0.4\n".encode() for i in range(3000)) + b"1689500000,0.5,caf\xe9\n"), 2,
         "NODE_CPU_UTILIZATION.csv: not UTF-8 text (byte 0xe9", rows={"bronze/acme_jobs": 0}),
    Case("acme_utilization_header_repeated_mid_file",
         _acme_utilization(("\n".join([*CPU_LINES[:2], CPU_LINES[0], *CPU_LINES[2:]]) + "\n").encode()), 0,
         rows={"bronze/acme_utilization": 4}, read={"acme_utilization": 6},  # the header line: a row per column
         reasons={"quarantine/acme_utilization": [["line 3 repeats the file's header line (files joined?): not a data line"]] * 2}),
    Case("acme_utilization_times_going_back",  # the pass takes files in time order; this one is parsed line by line
         _acme_utilization(("\n".join([CPU_LINES[0], CPU_LINES[2], CPU_LINES[1]]) + "\n").encode()), 0,
         rows={"bronze/acme_utilization": 4}, read={"acme_utilization": 4}, reasons={"quarantine/acme_utilization": []}),
    Case("acme_utilization_time_repeated_with_another_value",  # the pass hands both lines to the exact parse
         _acme_utilization(("\n".join([*CPU_LINES[:2], "1689379200,0.7,0.4", CPU_LINES[2]]) + "\n").encode()), 0,
         rows={"bronze/acme_utilization": 4}, read={"acme_utilization": 6},
         reasons={"quarantine/acme_utilization": [["duplicate Time row"],
                                                  ["duplicate Time row with a different value (kept '0.5')"]]}),
    Case("acme_utilization_months_overlapping_one_filling_an_empty_cell",  # the later month's cell is kept there
         files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n",
                ACME_CPU.replace(".csv", "-2023-07.csv"): "\n".join([*CPU_LINES[:2], "1689379215,0.6,"]) + "\n",
                ACME_CPU.replace(".csv", "-2023-08.csv"): "\n".join([CPU_LINES[0], "1689379215,0.6,0.3",
                                                                      "1689379230,0.7,0.2"]) + "\n"},
               ["ingest", "acme", "--raw", "{raw}"]), 0,
         rows={"bronze/acme_utilization": 6}, read={"acme_utilization": 7},
         reasons={"quarantine/acme_utilization": [["duplicate Time row"]]}),
    Case("acme_ipmi_server_repeated_at_a_time_with_another_reading",  # both lines handed to the exact parse
         _acme_ipmi(["2023-07-19 08:00:00,10.140.0.1,350,4200", "2023-07-19 08:00:00,10.140.0.2,340,4100",
                     "2023-07-19 08:00:00,10.140.0.1,351,4200", "2023-07-19 08:00:15,10.140.0.1,352,4210"]), 0,
         rows={"bronze/acme_power": 6}, read={"acme_power": 8},
         reasons={"quarantine/acme_power": [["duplicate Time row"],
                                            ["duplicate Time row with a different value (kept '350')"]]}),
    Case("acme_ipmi_server_missing_on_a_line",
         _acme_ipmi(["2023-07-19 08:00:00,10.140.0.1,350,4200", "2023-07-19 08:00:00,,340,4100",
                     "2023-07-19 08:00:15,10.140.0.1,352,4210"]), 0,
         rows={"bronze/acme_power": 4}, read={"acme_power": 6},
         reasons={"quarantine/acme_power": [["node: missing value"]] * 2}),
    Case("acme_utilization_header_without_time",
         _acme_utilization(("\n".join(["When,10.0.0.2,10.0.0.3", *CPU_LINES[1:]]) + "\n").encode()), 2,
         "NODE_CPU_UTILIZATION.csv: header has no Time column: 'When,10.0.0.2,10.0.0.3'", rows={"bronze/acme_jobs": 0}),
    Case("acme_jobs_file_moved_into_job_trace", _jobs_file_moved, 0, rows={"bronze/acme_jobs": 2, "silver/jobs": 2},
         reasons={"quarantine/acme_jobs": []}),
    Case("acme_seren_job_id_not_canonical",
         files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW.replace('5778432', '1')}\n{SEREN_ROW.replace('5778432', '01')}\n"},
               ["ingest", "acme", "--raw", "{raw}"]), 0,
         rows={"bronze/acme_jobs": 1}, reasons={"quarantine/acme_jobs": [["seren_job_id_integer"]]},
         read={"acme_jobs": 2}),
    Case("acme_no_files", files({"notes.txt": "nothing here"}, ["ingest", "acme", "--raw", "{raw}"]), 2, "no AcmeTrace files"),
    # a parse-failed row's NaN must not reach a rule: Sail evaluates a query's condition on the rows
    # a filter drops too, and its decimal cast fails on NaN (the gpu_time values differ, or Sail
    # reads the NaN back as the column's only other value)
    Case("acme_nan_beside_a_rule_rejected_row", _seren([SEREN_ROW, _seren_row(3, duration="-5", gpu_time="0.0"),
                                                         _seren_row(4, gpu_time="nan")]), 0,
         rows={"bronze/acme_jobs": 1}, read={"acme_jobs": 3},
         reasons={"quarantine/acme_jobs": [["duration_not_negative"], ["gpu_time: 'nan' is not a finite number"]]}),
    Case("acme_non_finite_in_several_columns_first", _seren([
        _seren_row(4, queue="nan"), _seren_row(5, gpu_time="inf"), _seren_row(6, gpu_time="-1e400"),
        _seren_row(3, duration="-5", gpu_time="0.0"), SEREN_ROW]), 0,
        rows={"bronze/acme_jobs": 1}, read={"acme_jobs": 5},
        reasons={"quarantine/acme_jobs": [["duration_not_negative"], ["queue: 'nan' is not a finite number"],
                                          ["gpu_time: 'inf' is not a finite number"],
                                          ["gpu_time: '-1e400' is not a finite number"]]}),
    # a finite value beyond Decimal128(30, 15) failed the same query when its literal was a decimal
    Case("acme_gpu_time_beyond_decimal_range", _seren([SEREN_ROW, _seren_row(3, gpu_time="1e20")]), 0,
         rows={"bronze/acme_jobs": 2}, read={"acme_jobs": 2}, stdout="gpu_time_is_duration_times_gpus"),
    # a zone the engine cannot parse failed late, as a rule that "could not run"; now refused first
    Case("acme_session_time_zone_not_a_zone", files({ACME_JOBS: f"{SEREN_HEADER}\n{SEREN_ROW}\n"},
                                                    ["ingest", "acme", "--raw", "{raw}", "--conf",
                                                     "spark_conf.spark.sql.session.timeZone=Mars/Olympus"]), 2,
         "spark_conf.spark.sql.session.timeZone must be UTC, got 'Mars/Olympus'", rows={"bronze/acme_jobs": 0}),
    # ---- Zhejiang
    Case("zj_negative_count_on_a_400g_port", files(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40",
                                                             [10**9, 10**9, -(10**6), 10**9]),
                                                   ["ingest", "zhejiang", "--raw", "{raw}"]), 0,
         rows={"bronze/zj_port_counters": 4, "silver/zj_port_rates": 4}, read={"zj_port_counters": 4}),
    Case("zj_row_of_another_port_in_a_file", files(port_file("Leaf-1_41.csv", "FourHundredGigE1/0/40", [10**9, 10**9]),
                                                   ["ingest", "zhejiang", "--raw", "{raw}"]), 0,
         rows={"bronze/zj_port_counters": 0},
         reasons={"quarantine/zj_port_counters": [["port_matches_file_name"]] * 2}, read={"zj_port_counters": 2}),
    # the CSV read names a row's file from the last part of its PortName: a name of another form
    # with the same number lands in this file, and the check sends the file down the exact path
    Case("zj_port_name_of_another_form_in_a_file", files(port_file("Leaf-1_41.csv", "EightHundredGigE1/0/41",
                                                                   [10**9, 10**9, 10**9]),
                                                         ["ingest", "zhejiang", "--raw", "{raw}"]), 0,
         rows={"bronze/zj_port_counters": 0},
         reasons={"quarantine/zj_port_counters": [["port_matches_file_name"]] * 3}, read={"zj_port_counters": 3}),
    Case("zj_rows_traded_between_port_files", _rows_traded_between_port_files, 0,
         rows={"bronze/zj_port_counters": 4},
         reasons={"quarantine/zj_port_counters": [["port_matches_file_name"]] * 2}, read={"zj_port_counters": 6}),
    Case("zj_port_file_bad_byte_deep_in_the_file", _port_file_bad_byte_deep, 2,
         "Leaf-1_40.csv: not UTF-8 text (byte 0xe9", rows={"bronze/zj_port_counters": 0}),
    Case("zj_port_file_header_again_mid_file", _port_file_header_again, 0,
         rows={"bronze/zj_port_counters": 4, "silver/zj_port_rates": 4},
         reasons={"quarantine/zj_port_counters": [["line 4 repeats the file's header line (files joined?): not a data line"]]},
         read={"zj_port_counters": 5}),
    Case("zj_port_file_cut_short_in_its_last_line", _port_file_cut_short, 0, rows={"bronze/zj_port_counters": 2},
         reasons={"quarantine/zj_port_counters": [["expected 10 fields, found 5"]]}, read={"zj_port_counters": 3}),
    Case("zj_entry_in_trafficinfo_not_an_hour",
         files({**port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9] * 2),
                f"trafficinfo/2024052400_old/{LEAF1}_GPU_S9825/Leaf-1_40.csv": PORT_HEADER + "\n"},
               ["ingest", "zhejiang", "--raw", "{raw}"]), 2, "trafficinfo/2024052400_old: not an hour folder"),
    Case("zj_empty_switch_folder_beside_a_full_one", _empty_switch_folder, 2,
         "trafficinfo/2024052400/NH-DC-NM129-B03-ROCE-Leaf-2_GPU_S9825: a switch folder with no port files"),
    Case("zj_save_time_in_seconds", _save_time_in_seconds, 0, rows={"bronze/zj_port_counters": 2},
         reasons={"quarantine/zj_port_counters": [[
             "save_time_utc: '1716480001' is not a valid epoch time in whole milliseconds of the years 2000-2099"]]},
         read={"zj_port_counters": 3}),
    Case("zj_poll_in_two_hour_folders", _poll_in_two_hour_folders, 0,
         stdout="hour_cst,status,n\n2024052400,first,1\n2024052400,gap,1\n2024052400,update,2\n"
                "2024052401,repeated,1\n2024052401,update,2\n",
         rows={"bronze/zj_port_counters": 7, "silver/zj_port_rates": 7}, read={"zj_port_counters": 7}),
    Case("generate_itp_over_the_real_archives",
         files({"raw-traces.tar.gz": b"the real release", "elasticflow-traces.tar.gz": b"the real release"},
               ["generate", "itp", "--out", "{raw}", "--scale", "0.001"]), 2,
         "holds raw-traces.tar.gz, elasticflow-traces.tar.gz, which no generator wrote: generate itp would write over them"),
    Case("zj_link_end_seen_again_next_hour", _link_end_seen_again_next_hour, 0,
         stdout="device_role,dst_role,port_name,samples,ecn_marked_total\nleaf,spine,FourHundredGigE1/0/33,2,6\n",
         rows={"bronze/zj_link": 2, "silver/zj_link_wiring": 1}, read={"zj_link": 2}),
    Case("zj_minutes_of_polls_delivered_again_in_the_next_hour", _minutes_delivered_again_next_hour, 0,
         stdout="hour_cst,status,n,bytes\n2024052400,first,1,\n2024052400,update,399,399000000000.0\n"
                "2024052401,repeated,300,\n2024052401,update,3,3000000000.0\n",
         rows={"bronze/zj_port_counters": 703, "silver/zj_port_rates": 703}, read={"zj_port_counters": 703}),
    Case("zj_one_poll_delivered_twice_is_kept_once", _one_poll_twice(differ=False), 0,
         stdout="repeated_rows: 1 rows repeat an earlier row of their file exactly",
         rows={"bronze/zj_port_counters": 4, "silver/zj_port_rates": 4}, read={"zj_port_counters": 4}),
    Case("zj_one_poll_delivered_twice_with_other_values_is_quarantined", _one_poll_twice(differ=True), 0,
         stdout="first,1\nupdate,2\n", rows={"bronze/zj_port_counters": 3, "silver/zj_port_rates": 3},
         reasons={"quarantine/zj_port_counters": [[
             "the same poll (switch, port, SaveTimeUTC) delivered 2 times with different values in "
             f"trafficinfo/2024052400/{LEAF1}_GPU_S9825/Leaf-1_40.csv"]] * 2},
         read={"zj_port_counters": 5}),
    Case("zj_sample_outside_its_hour_folder_counts_folders", _poll_of_the_next_hour_in_a_folder, 0,
         stdout="samples_in_hour_folder: 1 hour folders", rows={"bronze/zj_port_counters": 4}, read={"zj_port_counters": 4}),
    Case("zj_save_time_text_a_second_off_is_counted", _save_time_text_a_second_off, 0,
         stdout="save_time_matches_utc: 1 rows (25.00%)", rows={"bronze/zj_port_counters": 4, "silver/zj_port_rates": 4},
         read={"zj_port_counters": 4}),
    Case("zj_file_for_a_port_the_switch_lacks", files(port_file("Leaf-1_70.csv", "FourHundredGigE1/0/70", [10**9]),
                                                      ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         "a GPU leaf has no port FourHundredGigE1/0/70"),
    Case("zj_breakout_lane_on_a_400g_port", files(port_file("Leaf-1_40_1.csv", "TwoHundredGigE1/0/40:1", [10**9]),
                                                  ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         "a GPU leaf has no port TwoHundredGigE1/0/40:1"),
    Case("zj_port_file_header_only", files({"trafficinfo/2024052400/NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825/Leaf-1_40.csv":
                                            "SaveTime,SaveTimeUTC,DeviceName,PortName,InPkts,InOctets,OutPkts,OutOctets,InRatio,OutRatio\n"},
                                           ["ingest", "zhejiang", "--raw", "{raw}"]), 3,
         "bronze.zj_port_counters: critical expectation(s) failed: table_row_count_to_be_between"),
    Case("zj_flow_file_header_only", _hourly_header_only, 3, "bronze.zj_flow: critical expectation(s) failed"),
    # uniqueness is checked on the staged rows; a key found twice stages the parse again with the rule's flags
    Case("zj_nic_key_twice_with_other_values", _hourly_nic(_same_instant_as_the_first), 0,
         rows={"bronze/zj_nic": 1}, reasons={"quarantine/zj_nic": [["nic_key_unique"]] * 2}, read={"zj_nic": 3}),
    Case("zj_nic_time_written_as_its_groups", _hourly_nic(_time_as_its_groups), 0,
         rows={"bronze/zj_nic": 2}, reasons={"quarantine/zj_nic": [["save_time: '2024|5|24|下午|12|01|05|' is not a valid timestamp"]]}, read={"zj_nic": 3}),
    # forms the hourly files' fast parse (hourlypass) does not type: the file goes line by line, with
    # that parse's outcome
    Case("zj_nic_header_again_between_samples", _hourly_nic(_header_again), 0,
         rows={"bronze/zj_nic": 3},
         reasons={"quarantine/zj_nic": [["line 3 repeats the file's header line (files joined?): not a data line"]]},
         read={"zj_nic": 4}),
    Case("zj_nic_bytes_with_a_plus_sign", _hourly_nic(_second_sample_field(4, "+1.826184052268872e+16")), 0,
         rows={"bronze/zj_nic": 3, "quarantine/zj_nic": 0}, read={"zj_nic": 3}),
    Case("zj_nic_packets_with_a_cr_inside", _hourly_nic(_second_sample_field(6, "4964729\r31239.0")), 0,
         rows={"bronze/zj_nic": 2}, reasons={"quarantine/zj_nic": [["received_packets_by_port: '4964729\r31239.0' is not a valid double"]]},
         read={"zj_nic": 3}),
    Case("zj_nic_file_with_one_sample", _hourly_one_nic_sample, 0, rows={"bronze/zj_nic": 1, "silver/zj_nic_rates": 0},
         read={"zj_nic": 1}),
    Case("zj_log_ends_before_first_iteration", files(task_folder(LOG_HEAD), ["ingest", "zhejiang", "--raw", "{raw}"]), 0,
         rows={"bronze/zj_task_pods": 1, "bronze/zj_task_log_events": 2, "silver/zj_task_iterations": 0},
         read={"zj_task_pods": 3, "zj_task_log_events": 2}),
    Case("zj_log_with_gbk_and_binary_lines",
         files(task_folder("\n".join([*LOG_HEAD, ON_LOG.format(s=10, i=1)]).encode() + b"\n" + "训练开始".encode("gbk")
                           + b"\n\x00\xff\xfe garbage\n" + ON_LOG.format(s=20, i=2).encode() + b"\n"),
               ["ingest", "zhejiang", "--raw", "{raw}"]), 0,
         # the two undecodable lines are lines of the log of no known grammar: kept (kind unrecognised), not quarantined
         rows={"bronze/zj_task_log_events": 6, "quarantine/zj_task_log_events": 0, "silver/zj_task_iterations": 2},
         read={"zj_task_log_events": 6}),
    # a FIFO (or a device) among the inputs: refused by name before any read, which would block
    # while the run holds the lake's lock
    Case("zj_file_name_with_a_newline_in_a_task_folder",
         files({**task_folder(LOG_HEAD), "taskinfo/20240101-0000-1/notes\nfake: error line.txt": "x\n"},
               ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         "tracelake: error: taskinfo/20240101-0000-1/notes\\nfake: error line.txt: unexpected file (want pod-node-starttime.log"),
    Case("zj_task_log_is_a_fifo",
         with_fifo({k: v for k, v in task_folder(LOG_HEAD).items() if k.endswith("starttime.log")},
                   "taskinfo/20240101-0000-1/demo-a1b2c-master.log", ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         "tracelake: error: taskinfo/20240101-0000-1/demo-a1b2c-master.log: a FIFO, not a regular file; "
         "only regular files are read", rows={"bronze/zj_task_pods": 0, "bronze/zj_task_log_events": 0}),
    Case("zj_pod_listing_is_a_fifo",
         with_fifo({k: v for k, v in task_folder(LOG_HEAD).items() if k.endswith("master.log")},
                   "taskinfo/20240101-0000-1/pod-node-starttime.log", ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         "taskinfo/20240101-0000-1/pod-node-starttime.log: a FIFO, not a regular file",
         rows={"bronze/zj_task_pods": 0, "bronze/zj_task_log_events": 0}),
    Case("zj_hourly_file_is_a_fifo",  # named as the file it is, not as the file it wants
         with_fifo(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]), "trafficinfo/2024052400/2024052400_flow.csv",
                   ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         "tracelake: error: trafficinfo/2024052400/2024052400_flow.csv: a FIFO, not a regular file; only regular files are read",
         rows={"bronze/zj_port_counters": 0}),
    Case("zj_port_file_is_a_fifo",
         with_fifo(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]),
                   f"trafficinfo/2024052400/{LEAF1}_GPU_S9825/Leaf-1_41.csv", ["ingest", "zhejiang", "--raw", "{raw}"]), 2,
         f"trafficinfo/2024052400/{LEAF1}_GPU_S9825/Leaf-1_41.csv: a FIFO, not a regular file", rows={"bronze/zj_port_counters": 0}),
    # the last line of a growing log, cut short: never a record, its number prefixes never numbers
    Case("zj_megatron_log_cut_in_the_elapsed_time", _megatron_log_cut_at("elapsed time per iteration (ms): 45"), 0,
         rows={"bronze/zj_task_log_events": 5, "silver/zj_task_iterations": 3},
         reasons={"quarantine/zj_task_log_events": CUT_OFF}, read={"zj_task_log_events": 6}),
    # a log of more than 1 MB: Sail's whole-text read gave it as two rows, its line numbers counted twice from 1
    Case("zj_log_larger_than_a_megabyte_is_one_text", _log_over_a_megabyte(), 0,
         rows={"bronze/zj_task_log_events": 5005, "quarantine/zj_task_log_events": 0, "silver/zj_task_iterations": 3},
         read={"zj_task_log_events": 5005}),
    Case("zj_megatron_log_cut_in_the_loss", _megatron_log_cut_at("lm loss: 2.5"), 0,
         rows={"bronze/zj_task_log_events": 5, "silver/zj_task_iterations": 3},
         reasons={"quarantine/zj_task_log_events": CUT_OFF}, read={"zj_task_log_events": 6}),
    Case("zj_log_ending_in_a_progress_cr_is_whole",  # a tqdm bar ends its pieces with CR: nothing cut
         files(task_folder(("\n".join(LOG_HEAD) + "\n" + ON_LOG.format(s=10, i=1) + "\n 50%|#####| 1/2 [00:10<00:10, 10.00s/it]\r").encode()),
               ["ingest", "zhejiang", "--raw", "{raw}"]), 0,
         rows={"bronze/zj_task_log_events": 4, "quarantine/zj_task_log_events": 0}, read={"zj_task_log_events": 4}),
    # a run restarted from a checkpoint: positive steps, the restart as an event of its own
    Case("zj_restarted_run_has_positive_steps", _restarted_then(
        "query", "SELECT count(*) AS steps, min(duration_s) AS shortest, max(duration_s) AS longest, "
                 "count(duration_s) AS timed FROM silver.zj_task_iterations"), 0,
         stdout="steps,shortest,longest,timed\n8,10.0,10.0,7\n",  # step 4 after the restart: no start logged
         rows={"bronze/zj_task_log_events": 14, "silver/zj_task_iterations": 8, "silver/zj_task_restarts": 1},
         read={"zj_task_log_events": 14}),
    Case("zj_restart_event_says_when_where_and_what_it_cost", _restarted_then(
        "query", "SELECT restart, stopped_iteration, resumed_iteration, redone_iterations, pause_s, redone_s, "
                 "time_lost_s FROM silver.zj_task_restarts"), 0,
         stdout="restart,stopped_iteration,resumed_iteration,redone_iterations,pause_s,redone_s,time_lost_s\n"
                "1,8,4,5,210.0,50.0,260.0\n", rows={"silver/zj_task_restarts": 1}),
    Case("zj_hours_not_a_range", files(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]),
                                       ["ingest", "zhejiang", "--raw", "{raw}", "--hours", "yesterday"]), 2, "--hours"),
    # an hour with no folder has exit 4 of its own: a scheduler skips (or retries) it, where exit 2 fails the task
    Case("zj_hours_not_in_the_release", files(port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]),
                                              ["ingest", "zhejiang", "--raw", "{raw}", "--hours", "2024052405"]), 4,
         "no hour folder 2024052405"),
    # a daily run for the workbook and task logs re-parsed every hour folder; `--hours none` reads no traffic
    Case("zj_hours_none_reads_the_task_logs_and_no_hour",
         files({**port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9] * 3),
                **task_folder([*LOG_HEAD, ON_LOG.format(s=10, i=1), ON_LOG.format(s=20, i=2)])},
               ["ingest", "zhejiang", "--raw", "{raw}", "--hours", "none", "--json"]), 0,
         rows={"bronze/zj_task_log_events": 4, "silver/zj_task_iterations": 2}, read={"zj_task_log_events": 4},
         stdout='"hours": "none"', hidden="zj_port_counters"),
    # a range runs hour after hour: a bad hour stops the run there, the hours before it stay
    Case("zj_range_stops_at_a_header_only_hour",
         files({**port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9] * 3),
                f"trafficinfo/2024052401/{LEAF1}_GPU_S9825/Leaf-1_40.csv": PORT_HEADER + "\n"},
               ["ingest", "zhejiang", "--raw", "{raw}", "--hours", "2024052400..2024052401"]), 3,
         "hour 2024052401: bronze.zj_port_counters: critical expectation(s) failed: table_row_count_to_be_between",
         rows={"bronze/zj_port_counters": 3, "silver/zj_port_rates": 3}, read={"zj_port_counters": 3}),
    # a release's later hour is bad: the task logs came with the first hour, and what is derived
    # from them (iterations) is built before the error, not left behind the bronze rows
    Case("zj_release_stops_at_a_bad_hour_with_its_tasks_derived",
         files({**port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9] * 3),
                f"trafficinfo/2024052401/{LEAF1}_GPU_S9825/Leaf-1_40.csv": PORT_HEADER + "\n",
                **task_folder([*LOG_HEAD, ON_LOG.format(s=10, i=1), ON_LOG.format(s=20, i=2)])},
               ["ingest", "zhejiang", "--raw", "{raw}"]), 3,
         "hour 2024052401: bronze.zj_port_counters: critical expectation(s) failed: table_row_count_to_be_between",
         rows={"bronze/zj_port_counters": 3, "silver/zj_port_rates": 3, "bronze/zj_task_log_events": 4,
               "silver/zj_task_iterations": 2},
         read={"zj_port_counters": 3, "zj_task_log_events": 4}),
    Case("zj_real_task_without_workbook", _real_task_without_workbook, 0,
         rows={"bronze/zj_task_pods": 4, "silver/zj_task_iterations": 2436}),
    # the last hour of year 9999 stepped past it (OverflowError, exit 1); a typo's range listed millions of hours
    Case("zj_hours_last_hour_of_year_9999", _zj_hours("9999123123"), 4, "no hour folder 9999123123"),
    Case("zj_hours_range_over_10_years", _zj_hours("0001010100..9999123123"), 2,
         "--hours 0001010100..9999123123: the range covers 87649416 hours, more than the 87660 (10 years)"),
    Case("zj_hours_empty_is_refused", _zj_hours(""), 2, "--hours is empty"),  # it ingested the whole release
    # an hour folder with nothing to ingest, or a file that is not one of the hour's files, was passed over silently
    Case("zj_hour_folder_holding_only_a_dot_file",
         files({**port_file("Leaf-1_40.csv", "FourHundredGigE1/0/40", [10**9]), "trafficinfo/2024052401/.DS_Store": b"Bud1"},
               ["ingest", "zhejiang", "--raw", "{raw}", "--hours", "2024052401"]), 2,
         "trafficinfo/2024052401: the hour folder holds no switch folders and no hourly files"),
    Case("zj_release_with_an_empty_hour_folder", _zj_empty_hour_in_release, 2,
         "trafficinfo/2024052401: the hour folder holds no switch folders and no hourly files"),
    Case("zj_hour_folder_with_only_empty_switch_folders",
         files({f"trafficinfo/2024052401/{LEAF1}_GPU_S9825/.DS_Store": b"Bud1"},
               ["ingest", "zhejiang", "--raw", "{raw}", "--hours", "2024052401"]), 2,
         f"trafficinfo/2024052401/{LEAF1}_GPU_S9825: a switch folder with no port files"),
    Case("zj_hourly_file_in_another_case", _zj_with_hour_file("2024052400_Flow.csv"), 2,
         "trafficinfo/2024052400/2024052400_Flow.csv: unexpected file in an hour folder (want 2024052400_flow.csv, "),
    Case("zj_stray_file_in_an_hour_folder", _zj_with_hour_file("notes.txt"), 2,
         "trafficinfo/2024052400/notes.txt: unexpected file in an hour folder (want 2024052400_flow.csv, "),
    # one GBK field in a UTF-8 file made the whole file GB18030: every 上午 garbled, the error blamed rows or header
    Case("zj_gbk_field_in_a_utf8_flow_file", _zj_flow(_flow_lines("NH-DC-你好".encode("gbk")), bom=True), 0,
         rows={"bronze/zj_flow": 3}, reasons={"quarantine/zj_flow": [["line is not UTF-8 text (undecodable bytes shown as \\xNN)"]]},
         read={"zj_flow": 4}),
    Case("zj_gbk_flow_file_still_reads_as_gb18030",
         _zj_flow([line.decode().encode("gbk") for line in _flow_lines("NH-DC-你好".encode())]), 0,
         rows={"bronze/zj_flow": 4}, read={"zj_flow": 4}),
    # ---- CLI
    Case("query_delete_is_refused", _query("DELETE FROM bronze.itp_jobs WHERE num_gpu = 1"), 2, "query is read-only: DELETE"),
    Case("query_insert_overwrite_is_refused", _query("INSERT OVERWRITE bronze.itp_jobs SELECT * FROM bronze.itp_jobs"), 2,
         "query is read-only: INSERT"),
    Case("query_cte_insert_is_refused", _query("WITH t AS (SELECT 1) INSERT INTO bronze.x SELECT * FROM t"), 2,
         "query is read-only: INSERT"),
    Case("query_two_statements_are_refused", _query("SELECT 1; DROP TABLE bronze.itp_jobs"), 2, "one statement at a time"),
    Case("query_of_a_vacuumed_version_is_input_error", _version_vacuumed, 2, "tracelake: error: query failed: ",
         rows={"bronze/itp_jobs": 2}),
    Case("query_select_runs", _query("SELECT 40 + 2 AS answer"), 0, stdout="answer\n42"),
    # a typo of SELECT was blamed on the user as a write ("SELEC statements are refused"): the parser says it now
    Case("query_typo_gets_the_parsers_message", _query("SELEC 1"), 2,
         "tracelake: error: query failed: invalid argument: found SELEC at 0:5 expected something else, ';', "
         "statement, or end of input"),
    Case("query_typo_of_with_gets_the_parsers_message", _query("WTIH t AS (SELECT 1) SELECT * FROM t"), 2,
         "tracelake: error: query failed: invalid argument: found WTIH at 0:4 expected something else"),
    Case("query_typo_beside_a_write_is_still_refused", _query("SELEC 1; DELETE FROM bronze.itp_jobs"), 2,
         "one statement at a time"),
    Case("query_set_is_refused_not_parsed", _query("SET spark.sql.ansi.enabled = false"), 2,
         "query is read-only: SET statements are refused"),
    Case("query_json_format", _cli("query", "SELECT 40 + 2 AS answer, 'a' AS b", "--format", "json"), 0,
         stdout='[\n {\n  "answer": 42,\n  "b": "a"\n }\n]'),
    Case("query_table_format", _cli("query", "SELECT 40 + 2 AS answer, 'a' AS b", "--format", "table"), 0,
         stdout="answer | b\n-------+--\n    42 | a\n(1 row)"),
    # an ingest without --raw read conf's default folder without a word
    Case("ingest_without_raw_and_no_default", _cli("ingest", "acme"), 2,
         "tracelake: error: no --raw given and no default raw folder for 'acme' (conf raw_roots.acme): pass --raw DIR"),
    Case("ingest_without_raw_default_missing", _cli("ingest", "itp", "--conf", "raw_roots.itp=/nonexistent/itp"), 2,
         "tracelake: error: no --raw given, and the default raw folder for 'itp' (conf raw_roots.itp = /nonexistent/itp) "
         "is not a folder here: /nonexistent/itp; pass --raw DIR"),
    Case("ingest_without_raw_unknown_source", _cli("ingest", "nope"), 2, "unknown source 'nope'"),
    Case("query_unknown_format", _cli("query", "SELECT 1", "--format", "xml"), 2, "invalid choice: 'xml'"),
    Case("unknown_command_is_one_line", _cli("ingst", "itp"), 2, "invalid choice: 'ingst'"),
    Case("unknown_profile_is_one_line", _cli("tables", "--profile", "fast"), 2, "invalid choice: 'fast'"),
    Case("unreachable_connect_url", _cli("tables", "--profile", "connect", "--connect-url", "sc://127.0.0.1:9"), 2,
         "cannot reach Spark Connect at sc://127.0.0.1:9"),
    # a server that ends a call without an error of Spark's own: the gRPC status and details, not
    # the client's first line "<_InactiveRpcError of RPC that terminated with:", which says nothing
    Case("connect_server_ends_the_call", _cli("tables", "--profile", "connect", "--connect-url", "{beside}"), 1,
         "tracelake: error: SparkConnectGrpcException: the engine's call ended with INTERNAL: "
         "the test server ends every call", beside=server_ending_every_call),
    Case("describe_unknown_table", _cli("describe", "bronze.nope"), 2, "bronze.nope"),
    Case("maintain_retain_hours_past_100_years",
         _ingested_then("maintain", "bronze.itp_jobs", "--vacuum", "--retain-hours", "99999999999999"), 2,
         "--retain-hours: vacuum retention must be 0 to 876600 hours (100 years), got 99999999999999",
         rows={"bronze/itp_jobs": 2}),
    Case("maintain_negative_retain_hours", _cli("maintain", "--vacuum", "--retain-hours", "-5"), 2,
         "--retain-hours: vacuum retention must be 0 to 876600 hours (100 years), got -5"),
    Case("query_raw_string_cte_insert_is_refused",  # in r'…' a backslash escapes nothing
         _query("WITH t AS (SELECT r'\\' AS a) INSERT INTO bronze.acme_jobs SELECT * FROM bronze.acme_jobs --'"), 2,
         "query is read-only: INSERT"),
    Case("query_raw_string_two_statements_are_refused", _query("SELECT r'\\'; DROP TABLE bronze.acme_jobs --'"), 2,
         "one statement at a time"),
    Case("query_comment_ends_at_carriage_return", _query("SELECT 1 --note\rINSERT INTO bronze.itp_jobs SELECT 1"), 2,
         "query is read-only: INSERT"),
    Case("query_dollar_quote_insert_is_refused",  # Sail reads $$'$$ as a string
         _query("WITH t AS (SELECT $$'$$ AS a) INSERT INTO bronze.itp_jobs SELECT * FROM bronze.itp_jobs --'"), 2,
         "query is read-only: INSERT"),
    Case("query_hint_with_quoted_comment_end_is_refused",  # Spark reads /*+ … */ as code
         _query("WITH t AS (SELECT /*+ x('*/') */ 1) INSERT INTO bronze.itp_jobs SELECT 1 --'"), 2,
         "query is read-only: INSERT"),
    Case("query_nested_comment_is_refused", _query("SELECT 1 /* a /* b */ DELETE */"), 2,
         "nested /* */ comments are refused"),
    Case("query_quotes_and_comments_still_read",
         _query("SELECT 'it\\'s' AS a, \"x;y\" AS b, `DELETE`.c FROM (SELECT 1 AS c) AS `DELETE` /* DROP */ -- MERGE"), 0,
         stdout="a,b,c\nit's,x;y,1"),
    # a path-addressed source or a file-reading function reads outside the lake: refused, named
    Case("query_text_file_is_refused", _query("SELECT * FROM text.`/etc/passwd`"), 2,
         "query reads the lake's tables (layer.table) only: text.`/etc/passwd` is refused"),
    Case("query_csv_file_is_refused", _query("SELECT * FROM csv . `/etc/passwd`"), 2, "only: csv.`/etc/passwd` is refused"),
    Case("query_parquet_file_is_refused", _query("SELECT count(*) FROM Parquet/**/.`/tmp/x.parquet`"), 2,
         "only: Parquet.`/tmp/x.parquet` is refused"),
    Case("query_binary_file_is_refused", _query("SELECT content FROM `binaryFile`.`/etc/shadow`"), 2,
         "only: `binaryFile`.`/etc/shadow` is refused"),
    Case("query_another_lake_is_refused", _query("SELECT * FROM delta.`/srv/other-lake/bronze/itp_jobs`"), 2,
         "only: delta.`/srv/other-lake/bronze/itp_jobs` is refused"),
    Case("query_path_under_a_catalog_is_refused", _query("SELECT * FROM spark_catalog.text.`/etc/passwd`"), 2,
         "only: text.`/etc/passwd` is refused"),
    Case("query_path_behind_identifier_is_refused", _query("SELECT * FROM IDENTIFIER('text.`/etc/passwd`')"), 2,
         "only: IDENTIFIER(…) is refused"),
    Case("query_file_reading_function_is_refused", _query("SELECT * FROM read_files('/etc/passwd')"), 2,
         "only: read_files(…) is refused"),
    Case("query_path_inside_a_string_still_reads", _query("SELECT 'text.`/etc/passwd`' AS s"), 0,
         stdout="s\ntext.`/etc/passwd`\n"),
    # questions about a table's columns: answered from its schema file
    Case("query_describe_table_from_the_schema", _ingested_then("query", "DESCRIBE TABLE bronze.itp_jobs"), 0,
         stdout="col_name,data_type,comment\ncluster,string,\"Cluster, from the archive member name (cluster01 … cluster10).\"\n"
                "job_id,string,"),
    Case("query_show_columns_from_the_schema", _ingested_then("query", "SHOW COLUMNS FROM itp_jobs IN bronze"), 0,
         stdout="col_name\ncluster\njob_id\nsubmission_time\nduration\nnum_gpu\nsource_file\ningest_run_id\ningest_ts\n"),
    Case("query_show_create_table_is_a_read", _ingested_then("query", "SHOW CREATE TABLE bronze.itp_jobs"), 0,
         stdout="createtab_stmt\n\"CREATE TABLE bronze.itp_jobs (\n  cluster STRING NOT NULL COMMENT"),
    Case("query_unknown_table_is_input_error", _query("SELECT * FROM bronze.nope"), 2,
         "tracelake: error: query failed: no table bronze.nope in the lake (`tracelake tables` lists them) "
         "[the engine: Table not found: [TABLE_OR_VIEW_NOT_FOUND] Table or view not found: nope]"),
    # a mistake in a statement is said in a SQL user's words, with the nearest names; the engine's words stay
    Case("query_misspelt_table_names_the_nearest", _ingested_then("query", "SELECT count(*) FROM bronze.itp_job"), 2,
         "tracelake: error: query failed: no table bronze.itp_job in the lake; did you mean bronze.itp_jobs? "),
    Case("query_misspelt_column_names_the_nearest_and_the_columns",
         _ingested_then("query", "SELECT nmu_gpu FROM bronze.itp_jobs"), 2,
         "query failed: no column nmu_gpu in bronze.itp_jobs; did you mean num_gpu? (columns of bronze.itp_jobs: "
         "cluster, job_id, submission_time, duration, num_gpu, source_file, ingest_run_id, ingest_ts) [the engine: "),
    Case("query_missing_group_by_is_said_plainly",
         _ingested_then("query", "SELECT cluster, num_gpu, count(*) AS n FROM bronze.itp_jobs GROUP BY cluster"), 2,
         "query failed: a selected column is neither in GROUP BY nor inside an aggregate: add it to GROUP BY"),
    Case("query_ambiguous_column_is_said_plainly",
         _ingested_then("query", "SELECT job_id FROM bronze.itp_jobs a JOIN bronze.itp_jobs b ON a.job_id = b.job_id"),
         2, "query failed: column job_id is in more than one table of the query: name its table (t.job_id)"),
    Case("query_type_mismatch_is_said_plainly", _ingested_then("query", "SELECT num_gpu + 'x' FROM bronze.itp_jobs"),
         2, "query failed: the types do not match (a text value where a number is needed, or the reverse)"),
    # two columns of one name: both print, in every format (JSON makes the names unique)
    Case("query_duplicate_column_names_all_print", _query("SELECT 1 AS a, 2 AS a"), 0, stdout="a,a\n1,2\n"),
    Case("query_duplicate_column_names_in_json", _cli("query", "SELECT 1 AS a, 2 AS a", "--format", "json"), 0,
         stdout='"a": 1,\n  "a_1": 2'),
    Case("query_history_answers_on_every_profile", _ingested_then("query", "DESCRIBE HISTORY bronze.itp_jobs"), 0,
         stdout="version,timestamp,operation\n1,"),
    Case("query_limit_must_be_a_count", _cli("query", "SELECT 1", "--limit", "-3"), 2,
         "argument --limit: expects a whole number of rows (0: all), got '-3'"),
    Case("maintain_history_names_one_table", _ingested_then("maintain", "--history"), 2,
         "maintain --history prints one table's versions: name the table"),
    Case("query_division_by_zero_is_input_error", _query("SELECT 1/0"), 2, "tracelake: error: query failed: divide by zero"),
    Case("describe_path_traversal_is_refused", _cli("describe", "../conf/base"), 2,
         "table name must be <layer>.<table> with layer one of bronze, silver, gold, quarantine, ops"),
    Case("describe_quarantine_table", _cli("describe", "quarantine.zj_port_counters"), 0,
         stdout="Partitioned by: hour_cst\n\n| column | type | nullable | unit | source | description |\n|---|---|---|---|---|---|\n"
                "| hour_cst | string | no |"),
    Case("describe_quarantine_of_unknown_table", _cli("describe", "quarantine.nope"), 2,
         "no table 'quarantine.nope': each bronze table has one quarantine table"),
    Case("tables_on_a_missing_lake", _cli("tables"), 2, "/lake (run `tracelake ingest` first, or check --lake)"),  # the runner's --lake: never created
    Case("report_on_a_missing_lake", files({}, ["report", "--out", "{raw}/report"]), 2,
         "/lake (run `tracelake ingest` first, or check --lake)"),
    Case("empty_lake_path_is_refused", _cli("tables", "--lake", ""), 2, "the lake path is empty"),
    # naive times (IPMI power, task logs, the suites' TIMESTAMP literals) are read in the session's
    # zone: another zone stored IPMI times 8 hours off without a word
    # a damaged Delta log: exit 2 naming the table and the file (the engines said "Invalid JSON in
    # log record" or "list index out of range", exit 1); `tables` lists the other tables first
    Case("delta_log_cut_short_tables", _damaged_lake("cut", "tables"), 2,
         "bronze.itp_jobs: its Delta log is damaged: ", stdout="bronze.itp_jobs,,,damaged log\nbronze.zeus_train,3,0,"),
    Case("delta_log_empty_tables", _damaged_lake("empty", "tables"), 2,
         "/lake2/bronze/itp_jobs/_delta_log/00000000000000000000.json is empty", stdout="bronze.zeus_train,3,0,"),
    Case("delta_log_garbage_query", _damaged_lake("garbage", "query", "SELECT count(*) FROM bronze.itp_jobs"), 2,
         "/lake2/bronze/itp_jobs/_delta_log/00000000000000000000.json line 1 is not a JSON action (cut short or overwritten)"),
    Case("delta_log_garbage_query_of_another_table", _damaged_lake("garbage", "query", "SELECT sum(n) FROM bronze.zeus_train"), 0,
         "bronze.itp_jobs: its Delta log is damaged", stdout="sum(n)\n6\n"),
    Case("delta_log_cut_short_ingest", _damaged_lake("cut", "ingest", "itp"), 2,
         "/lake2/bronze/itp_jobs/_delta_log/00000000000000000000.json line 1 is not a JSON action"),
    # another Delta writer changed a table: exit 2 naming it and the change (the engines failed
    # mid-MERGE, exit 1: "Cannot resolve source column", a constraint violation)
    Case("table_gained_a_column_from_another_writer", _damaged_lake("column", "ingest", "itp"), 2,
         "bronze.itp_jobs: another Delta writer changed it: it has a column note (string) that the schema file "
         "does not declare. tracelake writes the columns of schemas/bronze.itp_jobs.yaml"),
    Case("table_gained_a_check_constraint_from_another_writer", _damaged_lake("constraint", "ingest", "itp"), 2,
         "it has a CHECK constraint short_jobs (duration < 1000) that tracelake never set"),
    # the log's row count of a table whose data file is gone was printed as if it were there
    Case("data_file_gone_tables", _damaged_lake("data", "tables"), 2,
         "is gone, though its Delta log lists it: restore the file", stdout="bronze.itp_jobs,,,missing data file\n"),
    Case("table_folder_became_a_file_tables", _damaged_lake("file", "tables"), 0,
         "bronze.itp_jobs is not a table (", stdout="bronze.zeus_train,3,0,"),
    # a first write killed before its commit left a log folder with no version: the next ingest
    # read it as a table and stopped ("No commit files found in _delta_log", exit 1); it writes it
    Case("table_log_without_a_commit_is_written_by_the_next_ingest", _damaged_lake("no_commit", "ingest", "itp"), 0,
         rows={"bronze/itp_jobs": 2, "silver/jobs": 2}),
    # a gold table missing from the lake and an hour that changes no task's evidence: the network
    # rebuild returned "no partition changed" before it looked for the table, which stayed out
    Case("zj_network_table_removed_is_built_whole_by_an_hour_without_the_task",
         _gold_removed_then_an_hour_without_the_task, 0,
         rows={"gold/zj_iteration_network": 546, "silver/zj_task_iterations": 546, "silver/zj_iteration_counters": 2160}),
    Case("local_engine_of_unknown_kind", _cli("tables", "--conf", "local_engine=open"), 2,
         "config local_engine: takes private or tcp, got 'open'"),
    Case("conf_shuffle_partitions_not_a_number", _cli("tables", "--conf", "spark_conf.spark.sql.shuffle.partitions=abc"), 2,
         "config spark_conf.spark.sql.shuffle.partitions: takes a whole number of at least 1, got 'abc'"),
    Case("conf_catalog_not_a_plain_name", _cli("tables", "--conf", "tables.catalog=my-catalog"), 2,
         "config tables.catalog: takes a catalog name of letters, digits and _ (SQL names are written unquoted), "
         "got 'my-catalog'"),
    Case("conf_profile_unknown", _cli("tables", "--conf", "profile=bogus"), 2,
         "unknown profile 'bogus' (choose one of local, spark, connect)"),
    Case("session_time_zone_not_utc", _cli("tables", "--conf", "spark_conf.spark.sql.session.timeZone=Asia/Shanghai"), 2,
         "spark_conf.spark.sql.session.timeZone must be UTC, got 'Asia/Shanghai': tracelake converts every time to UTC"),
    # the spark profile's engine pieces, refused before a JVM starts
    Case("spark_delta_jar_of_another_release", _old_delta_jar, 2,
         "is version 4.3.1, but the delta-spark pip package is 4.4.0: use io.delta:delta-spark_4.1_2.13:4.4.0"),
    Case("spark_master_that_does_not_answer", _cli("query", "SELECT 1", "--profile", "spark", "--conf", "master=spark://127.0.0.1:9"),
         2, "the Spark master spark://127.0.0.1:9 does not answer (Connection refused)"),
]
