"""`tracelake generate zhejiang`: a release-shaped folder whose layers agree with each other.

out/
  cluster_2000_A100.xlsx             the real workbook copied (TRACELAKE_ZJ_TOPOLOGY or
                                     ../shared/data), else the built-in synthetic one
  trafficinfo/<hour>/<hour>_{flow,nic,link,port}.csv   (or <hour>.xlsx), hours in CST
  trafficinfo/<hour>/<switch folder>/<port>.csv         per-port 0.5 s counters (generate_ports)
  taskinfo/<task>/…                                     task logs (generate_tasks)
  ground_truth.json                  tasks, placements, iterations, episodes (interference among
                                     them, with 3 tasks or more), decoys, quiet slow iterations:
                                     the answers for the correlation work
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang.layout import TRAFFIC
from tracelake.sources.zhejiang.synth.cluster import (
    WORKBOOK,
    every_port_by_folder,
    load_cluster,
    switch_folder,
    write_cluster_workbook,
)
from tracelake.sources.zhejiang.synth.hourly import HourlyWriter
from tracelake.sources.zhejiang.synth.truth import held_against_truth  # noqa: F401 - the registry asks the generator
from tracelake.sources.zhejiang.synth.world import Episode, Task, World

MANIFEST = "ground_truth.json"
DEFAULT_START = "2024052400"  # the real sample hour (CST)
GPUS_TO_NIC = 2  # A100 HGX: GPU{0,1} -> NIC[0], {2,3} -> [1], {4,5} -> [2], {6,7} -> [3]


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def hour_list(start: str, hours: int) -> list[str]:
    if not re.fullmatch(r"\d{10}", start):
        raise TracelakeError(f"start hour must be YYYYMMDDHH (China time), got {start!r}")
    first = datetime.strptime(start, "%Y%m%d%H")
    return [f"{first + timedelta(hours=h):%Y%m%d%H}" for h in range(hours)]


# ---------------------------------------------------------------- the other writers

def _writer(name: str):
    import importlib

    try:
        return importlib.import_module(f"tracelake.sources.zhejiang.synth.{name}")
    except ModuleNotFoundError as exc:
        raise TracelakeError(f"the zhejiang generator needs tracelake.sources.zhejiang.synth.{name}, which is missing") from exc


def _task_writer():
    return _writer("tasks")


def _port_writer():
    return _writer("ports")


def write_tasks(world: World, out: Path, seed: int) -> list[Path]:
    mod = _task_writer()
    written = []
    for k, task in enumerate(world.tasks):
        hosts = tuple(mod.HostSpec(s.sysname, s.host_ip, tuple(n.rdma for n in s.nics)) for s in task.servers)
        spec = mod.TaskSpec(
            task_id=task.task_id, job=task.job, style=task.style, hosts=hosts,
            gpus_per_host=task.gpus_per_host, start=_dt(task.start),
            iteration_ends=tuple(_dt(it.end) for it in task.iterations),
            first_step_start=_dt(task.first_step_start),
        )
        written.append(Path(mod.write_task(out / "taskinfo", spec, seed + k)))
    return written


def write_ports(world: World, out: Path, seed: int, every_port: bool = False,
                hours: list[str] | None = None) -> list[Path]:
    mod = _port_writer()
    written = []
    ports = world.monitored_by_folder()
    if every_port:
        ports = sorted(set(ports) | set(every_port_by_folder()))
    for h, hour in enumerate(world.hours):
        if hours is None or hour in hours:
            written += [Path(p) for p in mod.write_port_hour(
                out, hour, ports, world.load, seed + h)]  # writes out/trafficinfo/<hour>/...
    return written


# ---------------------------------------------------------------- manifest

def _episode(e: Episode, world: World) -> dict:
    slowed = []
    for task in world.tasks:
        hits = [it.index for it in task.iterations if e.ident in it.causes]
        if hits:
            slowed.append({"task_id": task.task_id, "iterations": hits})
    entry = {
        "id": e.ident, "kind": e.kind, "switch": e.leaf, "switch_folder": switch_folder(e.leaf),
        "port": e.port, "direction": e.direction, "start_utc": _iso(e.start), "end_utc": _iso(e.end),
        "level": e.level, "level_unit": "loss fraction" if e.kind == "loss" else "utilisation 0-1",
        "on_task_path": e.task_id is not None, "task_id": e.task_id, "slowed_iterations": slowed,
    }
    if e.kind == "interference":  # the victim is task_id; the iterations it slowed, as the issue names them
        entry |= {"victim_task": e.task_id, "aggressor_task": e.aggressor,
                  "iterations": [i for hit in slowed for i in hit["iterations"]]}
    return entry


def _task(task: Task) -> dict:
    hosts, ranks = [], []
    for node_rank, server in enumerate(task.servers):
        hosts.append({
            "node_rank": node_rank, "sysname": server.sysname, "host_ip": server.host_ip,
            "group": server.group,
            "nics": [{"index": i, "rdma": n.rdma, "netdev": n.netdev, "nic_ip": n.nic_ip, "switch": n.leaf,
                      "switch_folder": n.folder, "access_port": n.access_port}
                     for i, n in enumerate(server.nics)],
        })
        for local in range(task.gpus_per_host):
            nic = server.nics[local // GPUS_TO_NIC]
            ranks.append({"rank": node_rank * task.gpus_per_host + local, "node_rank": node_rank,
                          "local_rank": local, "sysname": server.sysname, "rdma": nic.rdma,
                          "nic_ip": nic.nic_ip, "switch": nic.leaf, "access_port": nic.access_port})
    base = task.base_iter_s
    return {
        "task_id": task.task_id, "job": task.job, "style": task.style, "n_hosts": len(task.servers),
        "gpus_per_host": task.gpus_per_host, "start_utc": _iso(task.start),
        "first_step_start_utc": _iso(task.first_step_start), "end_utc": _iso(task.end),
        "base_iteration_s": base, "save_steps": task.save_steps, "crosses_spine": task.crosses_spine,
        "switches": task.leafs, "hosts": hosts, "ranks": ranks,
        "iterations": [{"iteration": it.index, "start_utc": _iso(it.start), "end_utc": _iso(it.end),
                        "duration_s": round(it.end - it.start, 3),
                        "comm_start_utc": _iso(it.comm_start), "comm_end_utc": _iso(it.comm_end),
                        "causes": it.causes} for it in task.iterations],
    }


def manifest(world: World, seed: int, scale: float, topology: str) -> dict:
    quiet = [
        {"task_id": t.task_id, "iteration": it.index, "reason": "checkpoint",
         "start_utc": _iso(it.start), "end_utc": _iso(it.end), "duration_s": round(it.end - it.start, 3)}
        for t in world.tasks for it in t.iterations if it.causes == ["checkpoint"]
    ]
    notes = ("times UTC; congestion/loss episodes on task paths slow the iterations listed in "
             "slowed_iterations; decoys touch only ports no task uses; quiet slow iterations "
             "are checkpoint saves with no network cause.")
    if world.interference:
        notes += (" Interference episodes (kind interference): the aggressor_task's burst through a leaf "
                  "the victim_task also crosses saturates the uplink `port` and slows the victim's "
                  "`iterations`.")
    return {
        "generator": "tracelake.sources.zhejiang.synth", "seed": seed, "scale": scale,
        "topology": topology, "hours_cst": world.hours,
        "window_utc": [_iso(world.t0), _iso(world.t1)],
        "notes": notes,
        "tasks": [_task(t) for t in world.tasks],
        "episodes": [_episode(e, world) for e in world.episodes + world.interference],
        "decoys": [_episode(e, world) for e in world.decoys],
        "quiet_slow_iterations": quiet,
        "monitored_ports": [{"switch": leaf, "port": port} for leaf, port in world.monitored],
    }


# ---------------------------------------------------------------- entry point

def follows_reference(reference: Path) -> str | None:
    """What generate takes of the real release folder: its topology workbook, when it has one."""
    workbook = Path(reference) / WORKBOOK
    return f"the real topology from {workbook}" if workbook.is_file() else None


def generate(out: Path, scale: float, seed: int, hours: int = 1, tasks: int = 3,
             start: str = DEFAULT_START, topology: str | Path | None = None,
             hourly_format: str = "csv", reference: str | Path | None = None, ports: str = "monitored",
             only_hour: str | None = None) -> list[Path]:
    """Write the folder; `topology="synthetic"` ignores any real workbook, `hourly_format="xlsx"`
    writes each hour's four files as the sheets of <hour>.xlsx. `ports="all"` writes the
    per-port files of every port of every switch (a real hour's volume, ~11.5 M rows) instead
    of the monitored ones; `only_hour` writes the traffic of that one hour of the world (the
    workbook, tasks and manifest as always), so a long world can be generated hour by hour
    with bounded disk use."""
    if hours < 1 or tasks < 1:
        raise TracelakeError("--hours and --tasks must be at least 1")
    if ports not in ("monitored", "all"):
        raise TracelakeError(f"--ports must be monitored or all, got {ports!r}")
    if hourly_format not in ("csv", "xlsx"):
        raise TracelakeError(f"hourly_format must be csv or xlsx, got {hourly_format!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if topology is None and reference is not None and (Path(reference) / WORKBOOK).is_file():
        topology = Path(reference) / WORKBOOK  # the real release's workbook (conf raw_roots.zhejiang)
    cluster, workbook = load_cluster(topology)
    world = World(cluster, hour_list(start, hours), tasks, scale, seed)
    if only_hour is not None and only_hour not in world.hours:
        raise TracelakeError(f"--only-hour {only_hour} is not one of the world's hours {world.hours[0]}..{world.hours[-1]}")
    chosen = world.hours if only_hour is None else [only_hour]
    written = [write_cluster_workbook(cluster, workbook, out)]
    writer = HourlyWriter(world)
    for hour in chosen:
        hour_dir = out / TRAFFIC / hour
        written += writer.write_hour(hour, hour_dir, hourly_format)
        (hour_dir / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")  # macOS junk, as released
    written += write_ports(world, out, seed, every_port=ports == "all", hours=chosen)
    written += write_tasks(world, out, seed)
    path = out / MANIFEST
    path.write_text(json.dumps(manifest(world, seed, scale, cluster.source), indent=1) + "\n", encoding="utf-8")
    written.append(path)
    return written
