"""Zhejiang cross-task interference: the parties whose traffic crossed a shared port's leaf while a
slow iteration ran (gold.zj_iteration_interference), and per victim task the parties top on its
blamed shared ports (gold.zj_task_interference).

(a) hand-built frames, every figure worked out by hand; (b) a generated world of 3 tasks with
interference episodes among plain episodes and decoys, held against its ground truth and against
the shares computed here from bronze.zj_flow and the ground truth's NIC IPs; (c) a world of another
seed and task mix, whose every aggressor is named top; (d) an hourly ingest rebuilds only what the
hour changed, with the rows of a whole build.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_config
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.delta.catalog import read_tables
from tracelake.delta.maintenance import history
from tracelake.run.pipeline import run_ingest
from tracelake.run.registry import generate
from tracelake.run.settled import RECORD
from tracelake.sources.zhejiang.synth.truth import check_against_truth
from tracelake.sources.zhejiang.transforms.interference import interference, task_interference

T0 = datetime(2024, 5, 23, 16, 0, 0, tzinfo=UTC)  # 2024052400 CST
LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1.GPU.S9825"
LEAF5 = "NH-DC-NM129-D03-ROCE-Leaf-5.GPU.S9825"
LEAF9 = "NH-DC-NM129-F02-ROCE-Leaf-9.GPU.S9825"
LEAF13 = "NH-DC-NM129-H03-ROCE-Leaf-13.GPU.S9825"
STORE = "NH-DC-NM224-J05-ROCE-ST-leaf-1.GPU.S9825"
U33, U40, ACCESS = "FourHundredGigE1/0/33", "FourHundredGigE1/0/40", "TwoHundredGigE1/0/1:1"
NICS = {  # ip -> (task, leaf)
    "10.107.222.1": ("v", LEAF1), "10.107.226.1": ("v", LEAF5),
    "10.107.222.2": ("a", LEAF1), "10.107.226.2": ("a", LEAF5), "10.107.222.3": ("a", LEAF1),
    "10.107.222.4": ("b", LEAF1), "10.107.230.4": ("b", LEAF9),
    "10.107.230.5": ("c", LEAF9), "10.107.234.5": ("c", LEAF13),
    "10.107.222.6": ("d", LEAF1), "10.107.226.6": ("d", LEAF5),
    "10.107.222.7": ("z", LEAF1),  # a task without iterations: it owns no NIC
}
UNKNOWN_1, UNKNOWN_5, STORAGE = "10.107.222.99", "10.107.226.99", "10.107.250.1"
LEAF_OF = {ip: leaf for ip, (_, leaf) in NICS.items()} | {UNKNOWN_1: LEAF1, UNKNOWN_5: LEAF5, STORAGE: STORE}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _frames(spark):
    """Victim v crosses Leaf-1 and Leaf-5; a, b and an unknown server send through Leaf-1 too;
    c never crosses it; d's rows carry no packets; b's NIC 10.107.222.4 belonged to the task
    `old` until b started. Iterations of v: 1 not slow (Leaf-1 U33 saturated all the same), 2
    blamed on Leaf-1 U33, 3 blamed on an access port with Leaf-1 U40 (counters) and Leaf-5 U40
    (port.csv minute) saturated, 4 slow with nothing saturated, 5 blamed on Leaf-5 U33 with no
    flow in its window; b's 7 blamed on Leaf-1 U33."""
    windows = {"v": (at(-600), at(1200)), "a": (at(-600), at(1200)), "b": (at(130), at(1200)),
               "c": (at(-600), at(1200)), "d": (at(-600), at(1200)), "old": (at(-3600), at(30)), "z": (None, None)}
    ranks = [(task, ip) for ip, (task, _) in NICS.items()] + [("old", "10.107.222.4")]
    uplinks = {"v": (LEAF1, LEAF5), "b": (LEAF1, LEAF9)}
    paths = [(t, "uplink", leaf, port, True, *windows[t]) for t, leafs in uplinks.items() for leaf in leafs
             for port in (U33, U40)]
    paths += [(t, "access", LEAF1, f"TwoHundredGigE1/0/{k}:1", True, *windows[t]) for k, t in enumerate(windows)]
    gold = [("v", 1, at(-100), at(-40), 60.0, 60.0, False, None, None),
            ("v", 2, at(30), at(90), 60.0, 40.0, True, LEAF1, U33),
            ("v", 3, at(200), at(260), 60.0, 40.0, True, LEAF5, ACCESS),
            ("v", 4, at(400), at(460), 60.0, 40.0, True, None, None),
            ("v", 5, at(600), at(660), 60.0, 40.0, True, LEAF5, U33),
            ("b", 7, at(500), at(530), 30.0, 20.0, True, LEAF1, U33)]
    counters = [("v", 1, LEAF1, U33, 0.99), ("v", 2, LEAF1, U33, 0.97), ("v", 3, LEAF1, U40, 0.95),
                ("v", 3, LEAF5, U33, 0.5), ("v", 4, LEAF1, U33, 0.5), ("b", 7, LEAF1, U33, 0.92)]
    minutes = [("v", 3, LEAF5, U40, 0.7), ("v", 4, LEAF5, U40, 0.4)]

    def flow(src: str, dst: str, seconds: int, write: int, read: int = 0, send: int = 0):
        return LEAF_OF[src], LEAF_OF[dst], src, dst, at(seconds), read, write, send

    flows = [
        # v's iteration 2, (30, 90]: the minutes ending at 60 and 120 overlap it 30 s each
        flow("10.107.222.2", "10.107.226.2", 60, 600), flow("10.107.222.2", "10.107.226.2", 120, 1200),
        flow("10.107.222.2", STORAGE, 60, 200),                    # a's checkpoint write: a's
        flow("10.107.222.1", "10.107.226.1", 60, 300), flow("10.107.222.1", "10.107.226.1", 120, 300),
        flow("10.107.222.4", "10.107.230.4", 120, 0, read=100, send=20),
        flow("10.107.222.4", STORAGE, 60, 80),                     # the NIC still old's at 60 s
        flow(UNKNOWN_1, UNKNOWN_5, 60, 240),
        flow("10.107.222.2", "10.107.230.4", 120, 60),             # between two tasks: unattributed
        flow("10.107.230.5", "10.107.234.5", 60, 5000),            # c: not through Leaf-1
        flow("10.107.222.2", "10.107.222.3", 60, 9999),            # within Leaf-1: no uplink
        flow("10.107.222.6", "10.107.226.6", 60, 0),               # d: no packets
        # v's iteration 3, (200, 260]: minutes ending at 240 (40 s) and 300 (20 s)
        flow("10.107.222.1", "10.107.226.1", 240, 600), flow("10.107.222.1", "10.107.226.1", 300, 600),
        flow("10.107.222.2", "10.107.226.2", 300, 300),
        # b's iteration 7, (500, 530]: the minute ending at 540 overlaps it 30 s
        flow(UNKNOWN_1, UNKNOWN_5, 540, 400), flow("10.107.222.7", UNKNOWN_5, 540, 40),
        flow("10.107.222.4", "10.107.230.4", 540, 100),
    ]
    return (
        spark.createDataFrame(gold, "task_id string, iteration int, start_ts timestamp, end_ts timestamp, duration_s double, "
                                    "baseline_s double, is_slow boolean, suspect_device_name string, suspect_port_name string"),
        spark.createDataFrame(paths, "task_id string, role string, device_name string, port_name string, "
                                     "carries_task_traffic boolean, window_start_ts timestamp, window_end_ts timestamp"),
        spark.createDataFrame(ranks, "task_id string, nic_ip string"),
        spark.createDataFrame(counters, "task_id string, iteration int, device_name string, port_name string, util_max double"),
        spark.createDataFrame(minutes, "task_id string, iteration int, device_name string, port_name string, "
                                       "minute_util_max double"),
        spark.createDataFrame(flows, "source_switch string, dest_switch string, source_ip string, dest_ip string, "
                                     "time timestamp, read_pkts bigint, write_pkts bigint, send_pkts bigint"),
    )


@pytest.fixture(scope="module")
def built(spark):
    rows = interference(*_frames(spark))
    return spark.createDataFrame(rows.collect(), rows.schema)


@pytest.mark.portable
def test_parties_get_their_weighted_packets_shares_and_the_top_flag(spark, built):
    got = built.select("task_id", "iteration", "hour_cst", "device_name", "port_name", "is_blamed", "util_max",
                       "minute_util_max", "slowdown_s", "party", "party_kind", "packets", "share", "overlap_s",
                       "flow_rows", "party_rank", "is_top")
    it2 = [("a", "task", 1000.0, 60.0, 3), ("v", "victim", 300.0, 60.0, 2), ("unattributed", "unattributed", 150.0, 60.0, 2),
           ("b", "task", 60.0, 30.0, 1), ("old", "task", 40.0, 30.0, 1)]
    it3 = [("v", "victim", 600.0, 60.0, 2), ("a", "task", 100.0, 20.0, 1)]
    it7 = [("unattributed", "unattributed", 220.0, 30.0, 2), ("b", "victim", 50.0, 30.0, 1)]
    expected = []
    for task, iteration, leaf, port, blamed, util, minute, slowdown, parties in (
            ("v", 2, LEAF1, U33, True, 0.97, None, 20.0, it2), ("v", 3, LEAF1, U40, False, 0.95, None, 20.0, it3),
            ("v", 3, LEAF5, U40, False, None, 0.7, 20.0, it3), ("b", 7, LEAF1, U33, True, 0.92, None, 10.0, it7)):
        total = sum(p[2] for p in parties)
        expected += [(task, iteration, "2024052400", leaf, port, blamed, util, minute, slowdown, party, kind, packets,
                      packets / total, overlap, rows, rank, rank == 1)
                     for rank, (party, kind, packets, overlap, rows) in enumerate(parties, start=1)]
    assert_same_rows(got, spark.createDataFrame(expected, got.schema))


@pytest.mark.portable
def test_no_party_is_named_without_traffic_through_the_leaf(built):
    named = {r.party for r in built.collect()}
    assert named == {"v", "a", "b", "old", "unattributed"}  # not c (elsewhere), d (no packets), z (no window)
    by_port = defaultdict(float)
    for r in built.collect():
        by_port[(r.task_id, r.iteration, r.device_name, r.port_name)] += r.share
    assert by_port == pytest.approx({k: 1.0 for k in by_port})


@pytest.mark.portable
def test_task_interference_counts_the_blamed_iterations_where_another_party_was_top(spark, built):
    got = task_interference(built)
    expected = spark.createDataFrame(
        [("v", "a", "task", 1, 20.0, 1000 / 1550, 1000 / 1550, 1, at(30), at(90)),
         ("b", "unattributed", "unattributed", 1, 10.0, 220 / 270, 220 / 270, 1, at(500), at(530))],
        got.schema)
    assert_same_rows(got, expected)  # v's iteration 3: its own traffic was top, on a port not blamed


# ---------------------------------------------------------------- (b) a generated world of 3 tasks

def _world(engine, root, scale=0.05, **kw):
    generate("zhejiang", root / "raw", scale=scale, hours=1, **kw)
    config = make_config(root / "lake")
    run_ingest(engine, config, "zhejiang", str(root / "raw"))
    truth = json.loads((root / "raw" / "ground_truth.json").read_text(encoding="utf-8"))
    return config, truth


def _rows(spark, config, *tables):
    return [[r.asDict() for r in frame.collect()] for frame in read_tables(spark, config, *tables)]


@pytest.fixture(scope="module")
def world(engine, tmp_path_factory):
    """3 tasks (two crossing the spine, sharing leafs), 21 plain episodes, 2 interference
    episodes, 7 decoys, the checkpoint saves, in one hour."""
    return _world(engine, tmp_path_factory.mktemp("zj-interference"), seed=7, tasks=3)


def _shares_from_flows(flows: pd.DataFrame, truth: dict, key: tuple, start, end) -> dict[str, float]:
    """The weighted packets of each party at a (task, iteration, leaf, port), from the flow rows
    and the ground truth's NIC IPs (each task owns its NICs over the whole hour here)."""
    owner = {n["nic_ip"]: t["task_id"] for t in truth["tasks"] for h in t["hosts"] for n in h["nics"]}
    through = flows[(flows.source_switch != flows.dest_switch)
                    & ((flows.source_switch == key[2]) | (flows.dest_switch == key[2]))]
    packets = defaultdict(float)
    for f in through.itertuples():
        overlap = (min(end, f.time) - max(start, f.time - pd.Timedelta(seconds=60))).total_seconds()
        sent = f.read_pkts + f.write_pkts + f.send_pkts
        if overlap <= 0 or sent <= 0:
            continue
        src, dst = owner.get(f.source_ip), owner.get(f.dest_ip)
        party = src if src and (dst is None or dst == src) else dst if src is None and dst else "unattributed"
        packets[party] += sent * overlap / 60
    return packets


def test_generated_aggressors_are_named_top_and_every_share_comes_from_the_flows(spark, world):
    config, truth = world
    gold, rows, per_task = _rows(spark, config, "gold.zj_iteration_network", "gold.zj_iteration_interference",
                                 "gold.zj_task_interference")
    interference = [e for e in truth["episodes"] if e["kind"] == "interference"]
    assert [(e["id"], len(e["iterations"])) for e in interference] == [("if001", 3), ("if002", 4)]
    check = check_against_truth(gold, truth, rows)
    assert (check.interference_found, check.aggressor_top, check.interference_slowed) == (("if001", "if002"), 7, 7)
    assert len(check.found) == check.injected == 23 and check.decoys_blamed == ()
    assert check.line().endswith("; interference: the aggressor named top in 2 of 2 episodes (7 of 7 slowed iterations)")
    # the interference-slowed iterations are blamed on the saturated uplink itself, with the aggressor's share
    top = {(r["task_id"], r["iteration"], r["device_name"], r["port_name"]): r for r in rows if r["is_top"]}
    for e in interference:
        for i in e["iterations"]:
            r = top[(e["victim_task"], i, e["switch"], e["port"])]
            assert r["is_blamed"] and r["party"] == e["aggressor_task"] and r["party_kind"] == "task"
            assert 0.7 < r["share"] < 0.8
    # every party's packets are the flow rows' through the leaf in the window, weighted by overlap
    [flows] = read_tables(spark, config, "bronze.zj_flow")
    flows = flows.select("source_switch", "dest_switch", "source_ip", "dest_ip", "time", "read_pkts", "write_pkts",
                         "send_pkts").toPandas()
    flows["time"] = pd.to_datetime(flows["time"], utc=True)
    # collected as epoch microseconds: a collected timestamp is a naive datetime in the process's zone
    [spans] = read_tables(spark, config, "gold.zj_iteration_interference")
    spans = {(r[0], r[1]): (pd.Timestamp(r[2], unit="us", tz="UTC"), pd.Timestamp(r[3], unit="us", tz="UTC"))
             for r in spans.select("task_id", "iteration", F.unix_micros("start_ts"), F.unix_micros("end_ts")).collect()}
    ports = defaultdict(dict)
    for r in rows:
        ports[(r["task_id"], r["iteration"], r["device_name"], r["port_name"])][r["party"]] = r
    for key, parties in ports.items():
        expected = _shares_from_flows(flows, truth, key, *spans[key[:2]])
        assert {p: r["packets"] for p, r in parties.items()} == pytest.approx(expected, rel=1e-9), key
    # 24 (iteration, shared port) pairs: 22 blamed on the port, 2 where it was only saturated
    assert (len(rows), len(ports), sum(r["is_blamed"] for r in rows if r["is_top"])) == (45, 24, 22)
    assert sorted((r["task_id"], r["party"], r["slow_iterations"]) for r in per_task) == [
        ("20240523-1318-2", "20240523-1326-2", 4), ("20240523-1326-2", "20240523-1318-2", 6)]


# ---------------------------------------------------------------- (c) another seed and task mix

def test_in_a_world_of_another_seed_and_task_mix_every_aggressor_is_named_top(spark, engine, tmp_path):
    """4 tasks, three of them crossing the spine: each interference episode's aggressor is the
    top party at its port in every iteration it slowed, and its victim's row in
    gold.zj_task_interference counts those iterations and their seconds."""
    config, truth = _world(engine, tmp_path, seed=13, tasks=4, scale=0.1)
    gold, rows, per_task = _rows(spark, config, "gold.zj_iteration_network", "gold.zj_iteration_interference",
                                 "gold.zj_task_interference")
    check = check_against_truth(gold, truth, rows)
    assert check.interference_injected >= 2
    assert len(check.interference_found) == check.interference_injected
    assert check.aggressor_top == check.interference_slowed > 0
    slowdown = {(r["task_id"], r["iteration"]): r["duration_s"] - r["baseline_s"] for r in gold}
    by_pair = {(r["task_id"], r["party"]): r for r in per_task}
    for e in truth["episodes"]:
        if e["kind"] == "interference":
            r = by_pair[(e["victim_task"], e["aggressor_task"])]
            assert r["slow_iterations"] >= len(e["iterations"])
            assert r["slowdown_s"] >= sum(slowdown[(e["victim_task"], i)] for i in e["iterations"]) - 1e-9
    # `tracelake explain` of one such iteration names the aggressor, top, with its share
    from tracelake.sources.zhejiang.explain import explain

    e = next(e for e in truth["episodes"] if e["kind"] == "interference")
    key = (e["victim_task"], e["iterations"][0], e["switch"], e["port"])
    share = next(r["share"] for r in rows if (r["task_id"], r["iteration"], r["device_name"], r["port_name"]) == key
                 and r["party"] == e["aggressor_task"])
    lines = explain(spark, config, *key[:2])
    section = lines[lines.index("parties on its shared ports (share of the inter-leaf traffic in the overlapping "
                                "minutes):"):]
    assert f"    {e['aggressor_task']:<28} {f'{share * 100:.0f}%':>5}  <- top" in section
    assert f"suspect: uplink_saturation at {e['switch']} {e['port']}" in "\n".join(lines)


# ---------------------------------------------------------------- (d) an hourly ingest

@pytest.mark.e2e
def test_an_hourly_ingest_rebuilds_only_what_the_hour_changed_and_equals_a_whole_build(engine, spark, config, tmp_path):
    """Tasks, workbook and hour 1 by a full ingest, then hour 2 by `--hours`: the interference is
    rewritten in the (task, hour) partitions the hour's flows and verdicts touch only, and equals
    a build from the whole lake."""
    from helpers import ingest_then_next_hour

    from tracelake.run.registry import all_derived

    hours, stats = ingest_then_next_hour(engine, config, tmp_path, scale=0.05, seed=21, tasks=5)
    raw = tmp_path / "raw"
    stored, per_task = read_tables(spark, config, "gold.zj_iteration_interference", "gold.zj_task_interference")
    every = {tuple(r) for r in stored.select("task_id", "hour_cst").distinct().collect()}
    touched = set(stats["gold.zj_iteration_interference"].partitions)
    # every partition of the new hour; of the hour before, only those with iterations within reach of it
    assert {p for p in every if p[1] == hours[1]} <= touched < every
    assert {hour for _, hour in every - touched} == {hours[0]}
    [item] = [d for d in all_derived() if d.table == "gold.zj_iteration_interference"]
    whole = item.build(spark, config)
    assert stored.count() > 0
    assert_same_rows(stored.select(*whole.columns), whole, checkRowOrder=False)
    assert_same_rows(per_task, task_interference(whole).select(*per_task.columns), checkRowOrder=False)
    assert stored.filter(F.col("party_kind") == "task").count() > 0
    # the same hour again, rebuilt (not skipped as settled), commits nothing: the sums do not
    # depend on the order rows arrive in, so an identical rebuild has the stored fingerprints
    tables = ("gold.zj_iteration_interference", "gold.zj_task_interference")
    versions = [history(engine, config.table_path(*t.split(".")), 1)[0].version for t in tables]
    (Path(config.lake_root) / RECORD).unlink()
    again = {s.table for s in run_ingest(engine, config, "zhejiang", str(raw), hours=hours[1])}
    assert "gold.zj_iteration_interference" in again
    assert [history(engine, config.table_path(*t.split(".")), 1)[0].version for t in tables] == versions
