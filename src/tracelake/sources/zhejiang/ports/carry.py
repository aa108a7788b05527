"""The carried state an hour's one pass leaves for the next hour, so that the next hour does not
scan this one's 11 M counter rows again to find it.

The next hour's rates continue from window.carried_state of the stored hour before: per
port its first row, its last row and its last non-zero row (with whether each is non-zero). The
pass sees every row of every file anyway, so it keeps those instants per port as it goes (a few
numpy reductions per group of files: `marks_of_series` from the arrays it rates, `marks_of` from
the rows of a file taken alone) and writes them, per engine task, to a folder beside the run's
staged parse (`write_part`). When bronze.zj_port_counters' partition then
holds exactly the pass's staged files (every file taken by the pass, every row kept, the files
committed as they lie), `keep` stores the state in the lake, at `<lake>/_carry/zj_port_state/`,
named by the hour and recording the partition's data files. The next hour's run uses it
(`left_for`) only while that partition still holds those very files; otherwise (a re-ingest that
went line by line, a repair, another profile) it computes carried_state as before. The next
hour spends 0.11 s on its state instead of 1.4 s; the CLI on the 16th hour of a day, 5 + 5 and
6 + 6 runs alternated with the code before: wall 0.984x and 0.992x, CPU 0.993x (that scan ran
beside the small tables' parses, so most of it was hidden; docs/engine-notes.md).

The stored state has carried_state's own columns and meaning (a counter column holds 1 where the
row is non-zero), so every reader of the staged state takes it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracelake.delta.staged_files import commits_staged
from tracelake.io.parse import KEPT, VERDICT
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.clock import shift_hour
from tracelake.sources.zhejiang.ports.rules import COUNTERS

if TYPE_CHECKING:  # the pass's function imports this module where the engine's tasks run
    from tracelake.config import Config

TABLE = "bronze.zj_port_counters"
# per port: [first instant, last instant, first non-zero instant, last non-zero instant] (epoch
# micros; NONE where the port has no non-zero row)
NONE = np.iinfo(np.int64).min
Marks = dict[tuple[str, str], list[int]]
SCHEMA = pa.schema([("hour_cst", pa.string()), ("device_name", pa.string()), ("port_name", pa.string()),
                    ("save_time_utc", pa.timestamp("us", tz="UTC")), *[(c, pa.int64()) for c in COUNTERS]])
EXPECTED = "_expected.json"  # the driver's count of the files the pass was given
# how far back states are kept, in hours before the one just stored: a retried hour, or a day
# ingested again, finds its hour before's state; an older hour's re-ingest computes it instead
KEPT_HOURS = 24
FILES_KEY = b"tracelake.files"  # the stored state's metadata: the partition's data files it describes


def _values(column: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """(each row's code, the codes' values) of a string column, dictionary-encoded or not."""
    array = column.combine_chunks()
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    return array.indices.to_numpy(zero_copy_only=False).astype(np.int64), array.dictionary.to_pylist()


def marks_of(table: pa.Table, marks: Marks) -> None:
    """Add the rows of `table` (the pass's rows, filepass.PASS_OUTPUT) to `marks`: rows a bronze
    table keeps only (io.parse.KEPT: no marker row, no repeated copy). Rows of one port lie together
    in a pass's table, so each run of one port is reduced at once and runs of one port are merged."""
    drop = table.column(VERDICT).to_numpy(zero_copy_only=False) != KEPT
    if drop.all():
        return
    keep = ~drop
    devices, device_names = _values(table.column("device_name"))
    ports, port_names = _values(table.column("port_name"))
    key = (devices * len(port_names) + ports)[keep]
    ts = table.column("save_time_utc").cast(pa.int64()).to_numpy()[keep]
    nonzero = np.logical_or.reduce([table.column(c).to_numpy()[keep] != 0 for c in COUNTERS])
    starts = np.concatenate([[0], np.flatnonzero(key[1:] != key[:-1]) + 1])
    top = np.iinfo(np.int64).max
    reduced = (np.minimum.reduceat(ts, starts), np.maximum.reduceat(ts, starts),
               np.minimum.reduceat(np.where(nonzero, ts, top), starts),
               np.maximum.reduceat(np.where(nonzero, ts, NONE), starts))
    for i, code in enumerate(key[starts].tolist()):
        first, last, first_nz, last_nz = (int(r[i]) for r in reduced)
        if first_nz == top:
            first_nz = NONE
        _merge(marks, (device_names[code // len(port_names)], port_names[code % len(port_names)]),
               [first, last, first_nz, last_nz])


def marks_of_series(ms: np.ndarray, counters: list[np.ndarray], counts: np.ndarray, names: list[tuple[str, str]],
                    marks: Marks) -> None:
    """Add files the pass rated together to `marks`: their rows one file after another (`counts`
    each, epoch ms `ms` in time order, every row kept), named (switch, port) by `names`; the
    same marks as marks_of, from the arrays the pass has already, at a fraction of its cost."""
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    nonzero = np.logical_or.reduce([c != 0 for c in counters])
    top = np.iinfo(np.int64).max
    first_nz = np.minimum.reduceat(np.where(nonzero, ms, top), starts)
    last_nz = np.maximum.reduceat(np.where(nonzero, ms, NONE), starts)
    ends = starts + counts - 1
    for i, name in enumerate(names):
        seen = first_nz[i] != top
        _merge(marks, name, [int(ms[starts[i]]) * 1000, int(ms[ends[i]]) * 1000,
                             int(first_nz[i]) * 1000 if seen else NONE, int(last_nz[i]) * 1000 if seen else NONE])


def _merge(marks: Marks, name: tuple[str, str], mark: list[int]) -> None:
    seen = marks.get(name)
    if seen is None:
        marks[name] = mark
        return
    seen[0], seen[1] = min(seen[0], mark[0]), max(seen[1], mark[1])
    if mark[2] != NONE:
        seen[2] = mark[2] if seen[2] == NONE else min(seen[2], mark[2])
        seen[3] = max(seen[3], mark[3])


def state_table(marks: Marks, hour: str) -> pa.Table:
    """carried_state's rows from `marks`: per port its first, last and last non-zero instants,
    each once, a counter column 1 where the instant is the port's first or last non-zero one."""
    rows = []
    for (device, port), (first, last, first_nz, last_nz) in sorted(marks.items()):
        for instant in sorted({first, last, *([last_nz] if last_nz != NONE else [])}):
            rows.append((device, port, instant, int(last_nz != NONE and instant in (first_nz, last_nz))))
    devices, ports, instants, nonzero = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
    return pa.table([pa.array([hour] * len(rows), pa.string()), pa.array(devices, pa.string()),
                     pa.array(ports, pa.string()), pa.array(instants, pa.int64()).cast(SCHEMA.field(3).type),
                     *[pa.array(nonzero, pa.int64())] * len(COUNTERS)], schema=SCHEMA)


def write_part(folder: str, paths: list[str], marks: Marks) -> None:
    """One engine task's marks, for the files at `paths`: named by those paths, so a task run
    again writes the same file again; written whole, then renamed into place."""
    if not paths:
        return
    name = hashlib.sha256("\n".join(sorted(paths)).encode()).hexdigest()[:32]
    table = pa.table({"device_name": [d for d, _ in marks], "port_name": [p for _, p in marks],
                      **{k: [m[i] for m in marks.values()] for i, k in enumerate(("first", "last", "first_nz", "last_nz"))}},
                     schema=pa.schema([("device_name", pa.string()), ("port_name", pa.string()),
                                       *[(k, pa.int64()) for k in ("first", "last", "first_nz", "last_nz")]]))
    table = table.replace_schema_metadata({b"files": str(len(paths)).encode()})
    Path(folder).mkdir(parents=True, exist_ok=True)
    temporary = Path(folder) / f".{name}.{uuid.uuid4().hex[:8]}"
    pq.write_table(table, temporary)
    os.replace(temporary, Path(folder) / f"{name}.parquet")


def expect(folder: Path, files: int, hours: list[str]) -> None:
    """A fresh folder for the parts, told how many files of which hours the pass is given."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    (folder / EXPECTED).write_text(json.dumps({"files": files, "hours": hours}))


def _parts(folder: Path, hour: str) -> Marks | None:
    """The marks of every part in `folder`, or None unless the parts cover exactly the files of
    `hour` alone the pass was given (a task that did not finish left none)."""
    try:
        manifest = json.loads((folder / EXPECTED).read_text())
        expected, hours = manifest["files"], manifest["hours"]
    except (OSError, ValueError, KeyError):
        return None
    if hours != [hour]:
        return None
    marks: Marks = {}
    covered = 0
    for part in sorted(folder.glob("*.parquet")):
        table = pq.read_table(part)
        covered += int(table.schema.metadata[b"files"])
        for row in table.to_pylist():
            key = (row["device_name"], row["port_name"])
            if key in marks:  # one port in two parts: a part's marks are its whole files', never merged
                return None
            marks[key] = [row["first"], row["last"], row["first_nz"], row["last_nz"]]
    return marks if covered == expected else None


def _stored_here(config: Config, hour: str) -> bool:
    """Whether the hour's partition can be the pass's own staged files: the commit's own test
    (delta.staged_files.commits_staged: the local profile, a lake on this machine)."""
    return commits_staged(config, load_schema(TABLE), [(hour,)])


def _store(config: Config) -> Path:
    return Path(config.lake_root) / "_carry" / "zj_port_state"


def _partition_files(config: Config, hour: str) -> list[str] | None:
    """The data files (absolute paths) of bronze.zj_port_counters' partition of `hour`."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    table_path = Path(config.lake_root).joinpath(*TABLE.split("."))  # the lake on this disk, as the store
    try:
        table = DeltaTable(str(table_path))
    except TableNotFoundError:
        return None
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    return sorted(str(table_path / path) for path, value in zip(actions["path"], actions.get("partition.hour_cst", []))
                  if value == hour)


def keep(config: Config, folder: Path, staged: Path, hour: str) -> bool:
    """Store the state the pass left in `folder` for `hour`, when the lake's partition of that
    hour is the pass's staged files under `staged` themselves (the same files on disk: the commit
    links them in) and the parts cover every file. Returns whether it was stored."""
    if not _stored_here(config, hour):
        return False
    marks = _parts(folder, hour)
    stored = _partition_files(config, hour)
    if marks is None or not stored:
        return False
    ours = [os.stat(p) for p in staged.rglob("*.parquet")]
    inodes = {(s.st_dev, s.st_ino) for s in ours}
    if len(ours) != len(stored) or any((s.st_dev, s.st_ino) not in inodes for s in map(os.stat, stored)):
        return False
    table = state_table(marks, hour).replace_schema_metadata(
        {FILES_KEY: json.dumps([os.path.basename(p) for p in stored]).encode()})
    target = _store(config)
    target.mkdir(parents=True, exist_ok=True)
    temporary = target / f".{hour}.{uuid.uuid4().hex[:8]}"
    pq.write_table(table, temporary)
    os.replace(temporary, target / f"{hour}.parquet")
    oldest = shift_hour(hour, -KEPT_HOURS)
    for old in target.glob("*.parquet"):  # a state serves a retry of the hour after it; older ones go
        if old.stem < oldest:
            old.unlink(missing_ok=True)
    return True


def left_for(config: Config | None, hour: str) -> pa.Table | None:
    """The state stored for `hour` (carried_state's rows), while bronze.zj_port_counters'
    partition of that hour holds exactly the files it was stored with; otherwise None."""
    if config is None or not _stored_here(config, hour):
        return None
    path = _store(config) / f"{hour}.parquet"
    if not path.is_file():
        return None
    table = pq.read_table(path)
    described = json.loads((table.schema.metadata or {}).get(FILES_KEY, b"null"))
    stored = _partition_files(config, hour)
    if not described or stored is None or sorted(described) != sorted(os.path.basename(p) for p in stored):
        return None
    return table.replace_schema_metadata(None)
