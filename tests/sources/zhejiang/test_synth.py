"""Zhejiang generator: a release-shaped folder whose layers agree, and its ground truth."""

from __future__ import annotations

import csv
import importlib.util
import json
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import shared

from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang import synth as gen
from tracelake.sources.zhejiang.synth.cluster import WORKBOOK
from tracelake.sources.zhejiang.synth.world import UPLINKS
from tracelake.sources.zhejiang.xlsx import read_sheets

HAVE_WRITERS = all(importlib.util.find_spec(f"tracelake.sources.zhejiang.synth.{m}") for m in ("tasks", "ports"))


def _stand_ins(monkeypatch):
    """Temporary stand-ins for the task and per-port writers (other modules): record the calls."""
    calls = {"tasks": [], "ports": []}

    def write_task(root, spec, seed):
        calls["tasks"].append(spec)
        folder = Path(root) / spec["task_id"]
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def write_port_hour(root, hour, ports, load, seed):
        calls["ports"].append((hour, list(ports), load))
        return []

    tasks = types.SimpleNamespace(HostSpec=lambda *a: a, TaskSpec=lambda **k: k, write_task=write_task)
    ports = types.SimpleNamespace(write_port_hour=write_port_hour)
    monkeypatch.setattr(gen, "_task_writer", lambda: tasks)
    monkeypatch.setattr(gen, "_port_writer", lambda: ports)
    return calls


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    calls = _stand_ins(mp)
    out = tmp_path_factory.mktemp("zj")
    written = gen.generate(out, 0.05, 3, hours=1, tasks=3, topology="synthetic")
    mp.undo()
    return out, written, calls, json.loads((out / gen.MANIFEST).read_text(encoding="utf-8"))


def test_layout_and_the_self_contained_workbook(world_dir):
    out, written, _, truth = world_dir
    names = sorted(str(p.relative_to(out)) for p in written)
    assert names == [WORKBOOK, "ground_truth.json", *sorted(f"taskinfo/{t['task_id']}" for t in truth["tasks"]),
                     *[f"trafficinfo/2024052400/2024052400_{k}.csv" for k in ("flow", "link", "nic", "port")]]
    sheets = read_sheets(out / WORKBOOK)
    assert [len(sheets["cluster topology"]), len(sheets["GPU NIC info"])] == [1013, 1041]
    assert (out / "trafficinfo" / "2024052400" / ".DS_Store").is_file()
    assert truth["topology"] == "synthetic" and truth["window_utc"] == ["2024-05-23T16:00:00.000Z", "2024-05-23T17:00:00.000Z"]


def test_ground_truth_has_tasks_episodes_decoys_and_quiet_slow_iterations(world_dir):
    _, _, calls, truth = world_dir
    tasks = {t["task_id"]: t for t in truth["tasks"]}
    assert len(tasks) == 3 and {t["style"] for t in tasks.values()} == {"hf", "megatron"}
    plain = [e for e in truth["episodes"] if e["kind"] != "interference"]
    assert len(plain) == 21 and len(truth["decoys"]) == 7
    w0, w1 = (_ts(x) for x in truth["window_utc"])
    paths = {}
    for t in tasks.values():
        its = t["iterations"]
        assert _ts(its[0]["start_utc"]) < w1 and _ts(its[-1]["end_utc"]) > w1  # overlaps the traffic
        assert [r["rank"] for r in t["ranks"]] == list(range(8 * t["n_hosts"]))
        ports = {(n["switch"], n["access_port"]) for h in t["hosts"] for n in h["nics"]}
        if t["crosses_spine"]:
            ports |= {(s, u) for s in t["switches"] for u in UPLINKS}
        paths[t["task_id"]] = ports
    for e in truth["episodes"]:
        assert (e["switch"], e["port"]) in paths[e["task_id"]]
        assert e["on_task_path"] and e["slowed_iterations"], e["id"]
        for hit in e["slowed_iterations"]:
            for it in tasks[hit["task_id"]]["iterations"]:
                if it["iteration"] in hit["iterations"]:  # its all-reduce crossed the episode
                    assert _ts(it["comm_start_utc"]) < _ts(e["end_utc"]) and _ts(e["start_utc"]) < _ts(it["comm_end_utc"])
    every_path = set().union(*paths.values())
    for d in truth["decoys"]:
        assert (d["switch"], d["port"]) not in every_path and d["slowed_iterations"] == [] and d["task_id"] is None
    quiet = truth["quiet_slow_iterations"]
    # one save a task; here the victim's interference moved one into a plain episode of its own
    assert len(quiet) >= 2 and {q["reason"] for q in quiet} == {"checkpoint"}
    for q in quiet:
        base = tasks[q["task_id"]]["base_iteration_s"]
        assert q["duration_s"] > 1.5 * base
    # the writers were asked for exactly these tasks and ports
    assert [s["task_id"] for s in calls["tasks"]] == list(tasks)
    spec = calls["tasks"][0]
    assert spec["iteration_ends"][0] == datetime.fromtimestamp(_ts(tasks[spec["task_id"]]["iterations"][0]["end_utc"]), UTC)
    [(hour, ports, load)] = calls["ports"]
    monitored = {(m["switch"].replace(".GPU.S9825", "_GPU_S9825"), m["port"]) for m in truth["monitored_ports"]}
    assert hour == "2024052400" and set(ports) == monitored
    assert {(n["switch_folder"], n["access_port"]) for t in tasks.values() for h in t["hosts"] for n in h["nics"]} <= monitored


def test_hourly_files_show_the_tasks_and_the_episodes(world_dir):
    out, _, calls, truth = world_dir
    hour = out / "trafficinfo" / "2024052400"
    flows, ports = _csv(hour / "2024052400_flow.csv"), _csv(hour / "2024052400_port.csv")
    for t in truth["tasks"]:
        ips = {n["nic_ip"] for h in t["hosts"] for n in h["nics"]}
        intra = {(f["SourceIp"], f["DestIp"]) for f in flows if f["SourceIp"] in ips and f["DestIp"] in ips}
        assert len(intra) == 4 * t["n_hosts"] if t["n_hosts"] > 2 else len(intra) == 8
    by_port: dict[tuple[str, str], list[dict]] = {}
    for row in ports:
        by_port.setdefault((row["DeviceName"], row["PortName"]), []).append(row)
    [(_, _, load)] = calls["ports"]
    import numpy as np
    for e in truth["episodes"] + truth["decoys"]:
        rows = by_port[(e["switch"], e["port"])]
        s, t = _ts(e["start_utc"]), _ts(e["end_utc"])
        # a minute row covers (Time - 60 s, Time]; 1 s steps, so overlaps of >= 1 s
        touched = [r for r in rows if _minute_end(r["Time"]) > s + 1 and _minute_end(r["Time"]) - 60 < t - 1]
        inside = [r for r in touched if s + 60 <= _minute_end(r["Time"]) <= t]
        assert touched, e["id"]
        if e["kind"] == "loss":
            assert all(int(r["InPktsLoss"]) + int(r["OutPktsLoss"]) > 0 for r in touched), e["id"]
            assert all(int(r["InPktsLoss"]) + int(r["OutPktsLoss"]) == 0 for r in rows if r not in touched
                       and not any(o is not e and o["port"] == e["port"] and o["switch"] == e["switch"]
                                   for o in truth["episodes"] + truth["decoys"]))
        else:
            col = "InUseRatio" if e["direction"] == "in" else "OutUseRatio"
            assert all(float(r[col]) > 90 for r in inside), e["id"]
            assert max(float(r[col]) for r in touched) > 45, e["id"]  # >= 60 s over <= 2 minutes
            u_in, u_out = load(e["switch_folder"], e["port"], np.array([(s + t) / 2]))
            assert max(u_in[0], u_out[0]) > 0.9  # the per-port writer sees the same load
    # loss on a task port shows as NAKs on its queue pairs in that minute
    loss = [e for e in truth["episodes"] if e["kind"] == "loss" and e["port"].startswith("TwoHundred")]
    nic_ip = {(n["switch"], n["access_port"]): n["nic_ip"] for t in truth["tasks"] for h in t["hosts"] for n in h["nics"]}
    naks = [e for e in loss if any(int(f["NakPkts"]) > 0 and nic_ip[(e["switch"], e["port"])] in (f["SourceIp"], f["DestIp"])
                                   for f in flows)]
    assert loss and naks == loss


def test_three_tasks_or_more_bring_interference_episodes(world_dir):
    """A second task's burst through a leaf the victim also crosses saturates one of its uplinks
    and slows the victim's iterations whose all-reduce runs there; the aggressor is not slowed."""
    out, _, _, truth = world_dir
    tasks = {t["task_id"]: t for t in truth["tasks"]}
    interference = [e for e in truth["episodes"] if e["kind"] == "interference"]
    assert [(e["id"], e["direction"], e["level_unit"]) for e in interference] == [
        ("if001", "out", "utilisation 0-1"), ("if002", "out", "utilisation 0-1")]
    flows = _csv(out / "trafficinfo" / "2024052400" / "2024052400_flow.csv")
    for e in interference:
        victim, aggressor = tasks[e["victim_task"]], tasks[e["aggressor_task"]]
        assert e["task_id"] == victim["task_id"] != aggressor["task_id"] and e["port"] in UPLINKS
        assert victim["crosses_spine"] and aggressor["crosses_spine"]
        assert e["switch"] in victim["switches"] and e["switch"] in aggressor["switches"]
        assert e["slowed_iterations"] == [{"task_id": victim["task_id"], "iterations": e["iterations"]}]
        assert e["iterations"] and not any(e["id"] in it["causes"] for it in aggressor["iterations"])
        s, t = _ts(e["start_utc"]), _ts(e["end_utc"])
        assert s % 60 == 0 and t - s in (120, 180)  # whole flow.csv minutes
        for it in victim["iterations"]:
            crossed = _ts(it["comm_start_utc"]) < t and s < _ts(it["comm_end_utc"])
            assert (it["iteration"] in e["iterations"]) == crossed
        # in the episode's minutes the aggressor sends far more through the leaf than the victim
        ips = {name: {n["nic_ip"] for h in tasks[name]["hosts"] for n in h["nics"]} for name in tasks}
        sent = {name: _through_leaf(flows, ips[name], e["switch"], s, t) for name in (victim["task_id"], aggressor["task_id"])}
        assert sent[aggressor["task_id"]] > 2 * sent[victim["task_id"]] > 0


def _through_leaf(flows: list[dict], ips: set[str], switch: str, start: float, end: float) -> int:
    """Packets of the flows between two of `ips` that cross `switch` to another leaf, in the
    minutes ending within (start, end]."""
    return sum(int(f["WritePkts"]) + int(f["ReadPkts"]) + int(f["SendPkts"]) for f in flows
               if f["SourceIp"] in ips and f["DestIp"] in ips and f["SourceSwitch"] != f["DestSwitch"]
               and switch in (f["SourceSwitch"], f["DestSwitch"]) and start < _minute_end(f["Time"]) <= end)


def test_fewer_than_three_tasks_make_the_world_of_the_release_before(tmp_path):
    """No interference below 3 tasks, and every file but the workbook (whose zip entries carry
    the time of writing) is byte for byte what the generator wrote before interference existed
    (the demo's world: its README figures stand); digest taken from commit 78c01cd."""
    import hashlib

    gen.generate(tmp_path, 0.02, 1, hours=1, tasks=2, topology="synthetic")
    truth = json.loads((tmp_path / gen.MANIFEST).read_text())
    assert {e["kind"] for e in truth["episodes"]} == {"congestion", "loss"}
    digest = hashlib.sha256()
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".xlsx"):
        digest.update(str(path.relative_to(tmp_path)).encode() + b"\0" + path.read_bytes())
    assert digest.hexdigest() == "8743bb808a45758bd4655732719e99b17b530fff024bf0ac4f8ff5c1596280ad"


def _minute_end(text: str) -> float:
    from tracelake.sources.zhejiang.clock import CST
    date, clock = text.split(" ")
    marker, hms = clock[:2], clock[2:]
    h, m, s = (int(x) for x in hms.split(":"))
    h = h + 12 if marker == "下午" and h < 12 else (0 if marker == "上午" and h == 12 else h)
    y, mo, d = (int(x) for x in date.split("/"))
    return datetime(y, mo, d, h, m, s, tzinfo=CST).timestamp()


def test_same_seed_same_files_other_seed_other_world(monkeypatch, tmp_path, world_dir):
    _stand_ins(monkeypatch)
    out, _, _, truth = world_dir
    again = tmp_path / "again"
    gen.generate(again, 0.05, 3, hours=1, tasks=3, topology="synthetic")
    for rel in ("ground_truth.json", "trafficinfo/2024052400/2024052400_flow.csv", "trafficinfo/2024052400/2024052400_nic.csv"):
        assert (again / rel).read_bytes() == (out / rel).read_bytes(), rel
    other = tmp_path / "other"
    gen.generate(other, 0.05, 4, hours=1, tasks=3, topology="synthetic")
    assert json.loads((other / gen.MANIFEST).read_text())["tasks"] != truth["tasks"]
    with pytest.raises(TracelakeError, match="at least 1"):
        gen.generate(tmp_path / "x", 0.05, 1, hours=0)
    with pytest.raises(TracelakeError, match="YYYYMMDDHH"):
        gen.generate(tmp_path / "x", 0.05, 1, start="2024-05-24")
    with pytest.raises(TracelakeError, match="does not exist"):
        gen.generate(tmp_path / "x", 0.05, 1, topology=tmp_path / "nope.xlsx")


def test_tasks_sit_on_real_servers_of_the_real_workbook(monkeypatch, tmp_path):
    real = shared("zhejiang", WORKBOOK)
    _stand_ins(monkeypatch)
    monkeypatch.setenv("TRACELAKE_ZJ_TOPOLOGY", str(real))
    gen.generate(tmp_path, 0.05, 5, hours=1, tasks=3)
    assert (tmp_path / WORKBOOK).read_bytes() == real.read_bytes()
    truth = json.loads((tmp_path / gen.MANIFEST).read_text())
    assert truth["topology"] == "real"
    rows = read_sheets(real)["cluster topology"]
    by_nic = {(r[6], r[2]): (r[1], r[5], r[0]) for r in rows[1:]}  # (sysname, nicname) -> ip, switch, port
    for t in truth["tasks"]:
        for h in t["hosts"]:
            for n in h["nics"]:
                assert by_nic[(h["sysname"], n["netdev"])] == (n["nic_ip"], n["switch"], n["access_port"])


@pytest.mark.skipif(not HAVE_WRITERS, reason="generate_tasks / generate_ports (other helpers) not there yet")
def test_with_the_real_writers_tasks_and_ports_are_on_disk(tmp_path):
    gen.generate(tmp_path, 0.05, 2, hours=1, tasks=3, topology="synthetic")
    truth = json.loads((tmp_path / gen.MANIFEST).read_text())
    folders = sorted(p.name for p in (tmp_path / "taskinfo").iterdir())
    assert folders == sorted(t["task_id"] for t in truth["tasks"])
    hour = tmp_path / "trafficinfo" / "2024052400"
    for t in truth["tasks"]:
        for h in t["hosts"]:
            for n in h["nics"]:
                folder = hour / n["switch_folder"]
                p, s = n["access_port"].rsplit("/", 1)[1].split(":")
                leaf = n["switch"].split("-ROCE-")[1].split(".")[0]
                assert (folder / f"{leaf}_{p}_{s}.csv").is_file()


@pytest.mark.skipif(importlib.util.find_spec("tracelake.sources.zhejiang.synth.tasks") is None,
                    reason="generate_tasks (another helper's module) not there yet")
def test_with_the_real_task_writer_the_manifest_tasks_are_in_taskinfo(monkeypatch, tmp_path):
    calls = _stand_ins(monkeypatch)
    monkeypatch.setattr(gen, "_task_writer", lambda: __import__("tracelake.sources.zhejiang.synth.tasks", fromlist=["x"]))
    gen.generate(tmp_path, 0.05, 2, hours=1, tasks=3, topology="synthetic")
    truth = json.loads((tmp_path / gen.MANIFEST).read_text())
    assert sorted(p.name for p in (tmp_path / "taskinfo").iterdir()) == sorted(t["task_id"] for t in truth["tasks"])
    for t in truth["tasks"]:
        listing = (tmp_path / "taskinfo" / t["task_id"] / "pod-node-starttime.log").read_text().splitlines()
        pods = [line.split() for line in listing]
        assert [p[1] for p in pods] == [h["host_ip"] for h in t["hosts"]]  # master first, in node-rank order
        assert [p[2] for p in pods] == [f"nm129-gpu-{h['sysname'].rsplit('-', 1)[1]}" for h in t["hosts"]]
        master = next((tmp_path / "taskinfo" / t["task_id"]).glob(f"{t['job']}-master.log")).read_text()
        if t["style"] == "hf":  # the checkpoint iteration in the traffic window is in the log
            assert "tmp-checkpoint-500" in master
    assert len(calls["ports"]) == 1
