"""The carried state an hour's one pass leaves for the next hour (carry): it is exactly
carried_state of the stored hour, the next hour uses it instead of scanning that hour, and it is
never used once the hour's partition holds other files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.io.parse import EXACT, KEPT, REPEATED, VERDICT
from tracelake.run.pipeline import run_ingest
from tracelake.sources.zhejiang.ports import TABLE, carry, parser, rebuild
from tracelake.sources.zhejiang.ports.window import carried_state, port_rates
from tracelake.sources.zhejiang.synth.ports import write_port_hour

HOURS = ("2024052400", "2024052401")
LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1_GPU_S9825"
CHOSEN = [(LEAF1, "TwoHundredGigE1/0/1:1"), (LEAF1, "TwoHundredGigE1/0/2:1"), (LEAF1, "M-GigabitEthernet0/0/0")]
COLUMNS = ["hour_cst", "device_name", "port_name", "save_time_utc", *carry.COUNTERS]


def _hour(root, hour, seed):
    def load(folder, port, t):
        return np.full_like(t, 0.9), np.full_like(t, 0.3)
    write_port_hour(root / hour, hour, CHOSEN, load, seed=seed)
    return root / hour


def _state_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*[table.column(c).to_pylist() for c in COLUMNS]))


def _bronze(spark, config):
    return spark.read.format("delta").load(config.table_path("bronze", "zj_port_counters"))


def test_the_marks_of_the_pass_rows_give_carried_state_exactly(spark):
    """Hand-made rows of the pass: a port idle throughout, one whose last rows are zeros, one
    split over two tables (two runs to merge), a repeated copy and a marker row (neither is kept
    in bronze, so neither counts). The state from the marks equals carried_state of the kept rows."""
    def at(second):
        return datetime(2024, 5, 24, 0, 0, second, tzinfo=UTC)
    rows = [  # (switch, port, instant, counters, repeated copy, marker)
        ("S1", "idle", at(1), 0, False, False), ("S1", "idle", at(2), 0, False, False),
        ("S1", "tail", at(1), 5, False, False), ("S1", "tail", at(2), 7, False, False),
        ("S1", "tail", at(3), 0, False, False), ("S1", "tail", at(4), 0, False, False),
        ("S1", "tail", at(4), 0, True, False),
        ("S2", "split", at(2), 3, False, False), ("S2", "split", at(5), 4, False, False),
        ("S9", "marker", at(0), 0, False, True),
    ]
    later = [("S2", "split", at(1), 0, False, False), ("S2", "split", at(9), 0, False, False)]

    def pass_table(part):
        return pa.table({"device_name": pa.array([r[0] for r in part]).dictionary_encode(),
                         "port_name": pa.array([r[1] for r in part]),
                         "save_time_utc": pa.array([r[2] for r in part], pa.timestamp("us", tz="UTC")),
                         **{c: pa.array([r[3] for r in part], pa.int64()) for c in carry.COUNTERS},
                         VERDICT: pa.array([EXACT if r[5] else REPEATED if r[4] else KEPT for r in part], pa.int8())})
    marks: carry.Marks = {}
    for part in (rows, later):
        carry.marks_of(pass_table(part), marks)
    got = _state_rows(carry.state_table(marks, HOURS[0]))

    kept = [(HOURS[0], r[0], r[1], r[2], *[r[3]] * 4) for r in rows + later if not (r[4] or r[5])]
    frame = spark.createDataFrame(kept, "hour_cst string, device_name string, port_name string, save_time_utc timestamp, "
                                        "in_pkts bigint, in_octets bigint, out_pkts bigint, out_octets bigint")
    want = sorted(tuple(r) for r in carried_state(frame).select(*COLUMNS).collect())
    assert [(r[1], r[2], r[3].second, r[4]) for r in got] == [
        ("S1", "idle", 1, 0), ("S1", "idle", 2, 0),
        ("S1", "tail", 1, 1), ("S1", "tail", 2, 1), ("S1", "tail", 4, 0),
        ("S2", "split", 1, 0), ("S2", "split", 5, 1), ("S2", "split", 9, 0),
    ]
    assert [(r[1], r[2], r[3].replace(tzinfo=UTC), *r[4:]) for r in want] == [(r[1], r[2], r[3], *r[4:]) for r in got]


def test_an_hour_leaves_its_carried_state_and_the_next_hour_reads_no_row_of_it(engine, spark, config, tmp_path, monkeypatch):
    """The first hour's pass leaves the state (equal to carried_state of its stored rows, the
    wrapped management port included); the second hour's run uses it, never scanning the first
    hour, and both hours' rates equal the window over both."""
    store = Path(config.lake_root) / "_carry" / "zj_port_state"
    store.mkdir(parents=True)
    for old in ("2024052222", "2024052300"):  # 26 and 24 hours before the first hour
        (store / f"{old}.parquet").write_bytes(b"")
    run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, HOURS[0], seed=63)))
    left = carry.left_for(config, HOURS[0])
    assert left is not None
    assert sorted(p.name for p in store.iterdir()) == ["2024052300.parquet", f"{HOURS[0]}.parquet"]
    stored = carried_state(_bronze(spark, config).filter(F.col("hour_cst") == HOURS[0])).select(
        *COLUMNS[:3], F.unix_micros("save_time_utc").alias("t"), *COLUMNS[4:]).collect()
    ours = [(*r[:3], int(r[3].timestamp() * 1_000_000), *r[4:]) for r in _state_rows(left)]
    assert ours == sorted(tuple(r) for r in stored) and len(ours) >= len(CHOSEN)

    scans = []
    original = parser.carried_state
    for module in (parser, rebuild):  # the pass's state and the rates' rebuild each scan through it
        monkeypatch.setattr(module, "carried_state", lambda earlier, firsts=None: scans.append(firsts) or original(earlier, firsts))
    run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, HOURS[1], seed=64)))
    assert scans == []
    rates = spark.read.format("delta").load(config.table_path("silver", "zj_port_rates"))
    assert_same_rows(rates, port_rates(_bronze(spark, config)), ignoreColumnOrder=True)
    assert rates.filter(F.col("status") == "first").groupBy("hour_cst").count().collect() == [(HOURS[0], len(CHOSEN))]


def test_a_state_is_not_used_once_its_hour_holds_other_files(engine, spark, config, tmp_path, monkeypatch):
    """The first hour ingested again with a line that goes line by line (quarantined): its
    partition is then the engine's write, not the pass's files, so the state left before is not
    used (and no new one is stored); the second hour scans the first again and still equals the
    window over both."""
    raw = _hour(tmp_path, HOURS[0], seed=63)
    run_ingest(engine, config, "zhejiang", str(raw))
    assert carry.left_for(config, HOURS[0]) is not None
    changed = sorted(raw.rglob("*.csv"))[0]
    lines = changed.read_text(encoding="utf-8").splitlines()
    changed.write_text("\n".join(lines[:-1]) + "\nnot,a,poll\n", encoding="utf-8")  # its last poll gone, a bad line
    [stats] = [s for s in run_ingest(engine, config, "zhejiang", str(raw)) if s.table == TABLE]
    assert (stats.rows_quarantined, stats.rows_kept) == (1, stats.rows_read - 1)
    assert carry.left_for(config, HOURS[0]) is None

    scans = []
    original = parser.carried_state
    for module in (parser, rebuild):  # the pass's state and the rates' rebuild each scan through it
        monkeypatch.setattr(module, "carried_state", lambda earlier, firsts=None: scans.append(firsts) or original(earlier, firsts))
    run_ingest(engine, config, "zhejiang", str(_hour(tmp_path, HOURS[1], seed=64)))
    assert scans[:1] == [None]  # the stored hour scanned for its state, as before
    rates = spark.read.format("delta").load(config.table_path("silver", "zj_port_rates"))
    assert_same_rows(rates, port_rates(_bronze(spark, config)), ignoreColumnOrder=True)
