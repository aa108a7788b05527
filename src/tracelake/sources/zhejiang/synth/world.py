"""The generator's ground truth: tasks placed on real servers, their iterations, the network
episodes around them, and the load every monitored port carries at any instant.

Everything the files show is derived from this one model, so the per-port counters, the hourly
port/link/nic/flow files and the task logs agree: an iteration's all-reduce is a burst on its
NICs' access ports (and, for a task spanning server groups, on its leafs' spine uplinks); a
congestion episode saturates a port and stretches the all-reduce of the iterations that cross
it; a loss episode adds packet loss (port.csv), NAKs and RTT (flow.csv) and slows them less;
decoys do the same on ports no task uses and slow nothing; checkpoint iterations are slow with
no network cause. A world of 3 tasks or more also has interference episodes: a second task's
burst through a leaf another task also crosses saturates one of that leaf's spine uplinks and
stretches the other task's all-reduce, so the victim's slowdown has an aggressor in flow.csv.
Times are UTC epoch seconds.
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass, field
from datetime import UTC

import numpy as np

from tracelake.sources.zhejiang.clock import hour_start_utc
from tracelake.sources.zhejiang.layout import MGMT_PORT, UPLINK_PORTS
from tracelake.sources.zhejiang.synth.cluster import Cluster, Nic, Server, leaf_number, switch_folder

UPLINKS = UPLINK_PORTS  # the generator's name for them
MGMT = MGMT_PORT
GBPS = {"200": 200e9, "400": 400e9, "mgmt": 1e9}
SIZES = (4, 2, 8, 4, 16, 2, 32, 8)
MODELS = ("llama2-7b", "llama2-13b", "qwen-14b", "baichuan2-7b", "llama2-70b", "internlm-20b")
EPISODES_PER_TASK_HOUR = 7
MIN_ON_PATH = 21  # the correlation tests want at least 20 episodes on task paths
SPINES = 10
SAVE_STEPS = 500  # checkpoint interval, as in the real task and generate_tasks
INTERFERENCE_MIN_TASKS = 3  # fewer tasks: no interference, and the world of earlier releases byte for byte
INTERFERENCE_PER_HOUR = 2
AGGRESSOR_BURST = 0.85  # the aggressor's NICs on the shared leaf, as a fraction of their line rate (< Rules.sat_util)
INTERFERENCE_GAP_S = 90.0
# the per-port counters' collector outage opens every hour (synth.ports.OUTAGE_END_MS): there the
# correlation reads port.csv minutes, where the aggressor's busy access port reads as saturated
OUTAGE_S = 360


def port_speed(port: str) -> float:
    if port.startswith("FourHundredGigE"):
        return GBPS["400"]
    if port.startswith("TwoHundredGigE"):
        return GBPS["200"]
    return GBPS["mgmt"]


def spine_name(n: int) -> str:
    return f"NH-DC-NM129-E{n:02d}-ROCE-spine-{n}.GPU.S9825"


def uplink_peer(leaf: str, port: str) -> tuple[str, str]:
    """Leaf uplink FourHundredGigE1/0/<33..62> -> (spine, spine port): 3 links per spine."""
    p = int(port.rsplit("/", 1)[1]) - 33
    spine, k = p // 3 + 1, p % 3
    return spine_name(spine), f"FourHundredGigE1/0/{(leaf_number(leaf) - 1) * 3 + k + 1}"


@dataclass
class Iteration:
    index: int
    start: float
    end: float
    comm_start: float
    comm_end: float
    causes: list[str] = field(default_factory=list)


@dataclass
class Task:
    task_id: str
    job: str
    style: str
    servers: list[Server]            # node-rank order
    gpus_per_host: int
    start: float                     # pod start (first pod)
    first_step_start: float
    base_iter_s: float
    comm_frac: float
    save_steps: int
    burst_util: float
    iterations: list[Iteration] = field(default_factory=list)

    @property
    def nics(self) -> list[Nic]:
        return [n for s in self.servers for n in s.nics]

    @property
    def leafs(self) -> list[str]:
        return sorted({n.leaf for n in self.nics}, key=leaf_number)

    @property
    def crosses_spine(self) -> bool:
        return len({s.group for s in self.servers}) > 1

    @property
    def path_ports(self) -> set[tuple[str, str]]:
        ports = {(n.leaf, n.access_port) for n in self.nics}
        if self.crosses_spine:
            ports |= {(leaf, up) for leaf in self.leafs for up in UPLINKS}
        return ports

    @property
    def end(self) -> float:
        return self.iterations[-1].end


@dataclass
class Episode:
    ident: str
    kind: str                        # congestion | loss
    leaf: str
    port: str
    direction: str                   # in | out | both (switch view)
    start: float
    end: float
    level: float                     # utilisation (congestion, interference) or loss fraction (loss)
    task_id: str | None              # the task whose path it is on (the victim); None for a decoy
    aggressor: str | None = None     # interference: the task whose burst saturates the port

    def overlaps(self, a: float, b: float) -> bool:
        return self.start < b and a < self.end


@dataclass
class _Component:
    """Bursts a port carries: sorted windows with a utilisation each (both directions)."""

    starts: np.ndarray
    ends: np.ndarray
    levels: np.ndarray


class World:
    def __init__(self, cluster: Cluster, hours: list[str], n_tasks: int, scale: float, seed: int):
        self.cluster, self.hours, self.scale, self.seed = cluster, hours, scale, seed
        self.rng = random.Random(seed)
        self.t0 = hour_start_utc(hours[0]).timestamp()
        self.t1 = self.t0 + 3600 * len(hours)
        self.tasks = self._place_tasks(n_tasks)
        # interference has a random stream of its own, so the draws of everything else stay as
        # they were: a world of fewer tasks is the same world, byte for byte, as before it existed
        irng = random.Random(f"interference|{seed}") if n_tasks >= INTERFERENCE_MIN_TASKS else None
        if irng is not None:
            self._share_a_leaf(irng)
        self.episodes = self._schedule_episodes()
        self.interference: list[Episode] = []
        if irng is not None:
            self.interference = self._schedule_interference(irng)
        for task in self.tasks:
            self._simulate(task)
        self.decoys = self._schedule_decoys()
        self.components = self._components()
        self.bursts = self._bursts()
        self.monitored = self._monitored_ports()

    # ------------------------------------------------------------ placement
    def _place_tasks(self, n_tasks: int) -> list[Task]:
        free = list(self.cluster.servers)
        cap = max(2, int(32 * self.scale))
        tasks = []
        span = self.t1 - self.t0
        for k in range(n_tasks):
            size = min(SIZES[k % len(SIZES)], cap, len(free))
            if size < 1:
                break
            if k % 3 == 1:  # one group: all traffic stays under the leafs (rail-optimised)
                by_group: dict[int, list[Server]] = {}
                for s in free:
                    by_group.setdefault(s.group, []).append(s)
                fits = [g for g, ss in sorted(by_group.items()) if len(ss) >= size]
                pool = by_group[self.rng.choice(fits)] if fits else free
            else:
                pool = free
            chosen = self.rng.sample(pool, size)
            if k % 3 != 1 and size > 1 and len({s.group for s in chosen}) == 1:
                others = [s for s in free if s.group != chosen[0].group and s not in chosen]
                if others:
                    chosen[-1] = self.rng.choice(others)
            for s in chosen:
                free.remove(s)
            # checkpoints come every SAVE_STEPS iterations (as in generate_tasks and the real
            # task): start early enough that one falls in the traffic window
            base = round(self.rng.uniform(18, 40), 3)
            setup = self.rng.uniform(90, 240)
            ckpt_at = self.t0 + self.rng.uniform(0.3, 0.7) * span
            start = math.floor(ckpt_at - SAVE_STEPS * base - setup)
            model = MODELS[k % len(MODELS)]
            tasks.append(Task(
                task_id="", job=f"{model}-{self.rng.getrandbits(20):05x}",
                style="hf" if k % 2 == 0 else "megatron",
                servers=chosen, gpus_per_host=8, start=start,
                first_step_start=start + setup,
                base_iter_s=base, comm_frac=self.rng.uniform(0.25, 0.4),
                save_steps=SAVE_STEPS,
                burst_util=self.rng.uniform(0.55, 0.8),
            ))
        from datetime import datetime
        taken: set[str] = set()
        for task in tasks:
            while True:  # a folder is YYYYMMDD-HHMM-N: a second task of that minute and size starts later
                stamp = datetime.fromtimestamp(task.start, UTC)
                task.task_id = f"{stamp:%Y%m%d-%H%M}-{len(task.servers)}"
                if task.task_id not in taken:
                    break
                task.start += 60
                task.first_step_start += 60
            taken.add(task.task_id)
        return tasks

    # ------------------------------------------------------------ episodes
    def _schedule_episodes(self) -> list[Episode]:
        episodes: list[Episode] = []
        hours = len(self.hours)
        for task in self.tasks:
            lo = max(self.t0, task.first_step_start) + 60
            hi = self.t1 - 60
            share = EPISODES_PER_TASK_HOUR * hours * (hi - lo) / (self.t1 - self.t0)
            wanted = max(math.ceil(share), math.ceil(MIN_ON_PATH / len(self.tasks)))
            count = max(1, min(wanted, int((hi - lo) // 200)))  # room for 60–150 s apart
            slot = (hi - lo) / count
            for i in range(count):
                length = self.rng.uniform(60, 150)
                begin = lo + i * slot + self.rng.uniform(0, max(1.0, slot - length - 20))
                kind = "congestion" if self.rng.random() < 0.55 else "loss"
                nic = self.rng.choice(task.nics)
                if kind == "congestion" and task.crosses_spine and self.rng.random() < 0.4:
                    leaf, port, direction = self.rng.choice(task.leafs), self.rng.choice(UPLINKS), "out"
                else:
                    leaf, port = nic.leaf, nic.access_port
                    direction = self.rng.choice(["in", "out"]) if kind == "congestion" else "both"
                level = self.rng.uniform(0.95, 1.0) if kind == "congestion" else self.rng.uniform(0.002, 0.02)
                episodes.append(Episode(
                    f"ep{len(episodes) + 1:03d}", kind, leaf, port, direction,
                    round(begin, 3), round(begin + length, 3), round(level, 4), task.task_id,
                ))
        return episodes

    # ------------------------------------------------------------ interference
    def _nics_on(self, task: Task, leaf: str) -> int:
        return sum(1 for n in task.nics if n.leaf == leaf)

    def _interference_pairs(self) -> list[tuple[Task, Task, str]]:
        """(victim, aggressor, shared leaf) of two spine-crossing tasks, where the aggressor has
        at least as many NICs on the leaf as the victim: its burst then outweighs the victim's
        own traffic through the leaf, whose uplink the flows do not name (ECMP)."""
        crossing = [t for t in self.tasks if t.crosses_spine]
        return [(v, a, leaf) for v in crossing for a in crossing if a is not v
                for leaf in v.leafs if self._nics_on(a, leaf) >= self._nics_on(v, leaf) > 0]

    def _share_a_leaf(self, rng: random.Random) -> None:
        """Make sure two spine-crossing tasks share a leaf: when none do, one server of the last
        such task is swapped for an idle server in a rail group of the first."""
        crossing = [t for t in self.tasks if t.crosses_spine]
        if len(crossing) < 2 or self._interference_pairs():
            return
        victim, aggressor = crossing[0], crossing[-1]
        taken = {s.sysname for t in self.tasks for s in t.servers}
        idle = [s for s in self.cluster.servers if s.sysname not in taken]
        groups = [s.group for s in victim.servers]
        for group in sorted(set(groups), key=lambda g: (groups.count(g), g)):  # fewest victim NICs on its leafs first
            pool = [s for s in idle if s.group == group]
            for k in reversed(range(len(aggressor.servers))):
                rest = aggressor.servers[:k] + aggressor.servers[k + 1:]
                if pool and len({s.group for s in rest} | {group}) > 1:
                    aggressor.servers[k] = rng.choice(pool)
                    return

    def _checkpoints(self) -> dict[str, list[tuple[float, float]]]:
        """Each task's checkpoint iterations (start, end) as _simulate will make them with the
        interference scheduled so far: a trial run from the same state of the main random stream,
        which is then put back as it was."""
        state = self.rng.getstate()
        spans = {task.task_id: [(it.start, it.end) for it in self._iterations(task) if "checkpoint" in it.causes]
                 for task in self.tasks}
        self.rng.setstate(state)
        return spans

    def _schedule_interference(self, rng: random.Random) -> list[Episode]:
        """INTERFERENCE_PER_HOUR episodes an hour, whole minutes long (flow.csv counts by the
        minute), each on a pair of _interference_pairs: the aggressor's burst saturates an uplink
        of the shared leaf, and the victim is slowed. The iterations it slows have no other
        cause: it keeps INTERFERENCE_GAP_S from the victim's other episodes (port.csv's loss
        minutes reach past an episode and would compete for the blame), from the aggressor's
        uplink congestions (as strong a suspect as the saturated uplink) and from both tasks'
        checkpoint saves (quiet slow iterations, never the network's), and lies outside the
        collector outage that opens each hour (OUTAGE_S). The saves move as the
        victim is slowed, so an episode that comes to meet one is left out, until none does."""
        pairs = self._interference_pairs()
        if not pairs:
            return []
        rng.shuffle(pairs)
        busy: dict[str, list[tuple[float, float]]] = {}
        for e in self.episodes:
            busy.setdefault(e.task_id, []).append((e.start, e.end))
            if e.port in UPLINKS:
                busy.setdefault(f"{e.task_id}|uplink", []).append((e.start, e.end))

        def clear(start: float, end: float, spans: list[tuple[float, float]]) -> bool:
            return all(end + INTERFERENCE_GAP_S <= a or b + INTERFERENCE_GAP_S <= start for a, b in spans)

        found: list[Episode] = []
        for i in range(INTERFERENCE_PER_HOUR * len(self.hours)):
            victim, aggressor, leaf = pairs[i % len(pairs)]
            lo = max(self.t0, victim.first_step_start, aggressor.first_step_start) + 60
            hi = self.t1 - 60
            self.interference = found
            saves = self._checkpoints()
            for _ in range(200):
                start = 60 * math.ceil(rng.uniform(lo, max(lo, hi - 180)) / 60)
                end = start + 60 * rng.choice((2, 3))
                taken = [(e.start, e.end) for e in found if {e.task_id, e.aggressor} & {victim.task_id, aggressor.task_id}]
                spans = (busy.get(victim.task_id, []) + busy.get(f"{aggressor.task_id}|uplink", []) + taken
                         + saves[victim.task_id] + saves[aggressor.task_id])
                hour_s = (start - self.t0) % 3600
                if end <= hi and OUTAGE_S <= hour_s <= 3600 - (end - start) and clear(start, end, spans):
                    break
            else:
                continue
            found.append(Episode(f"if{len(found) + 1:03d}", "interference", leaf, rng.choice(UPLINKS), "out",
                                 float(start), float(end), round(rng.uniform(0.95, 1.0), 4),
                                 victim.task_id, aggressor.task_id))
        while True:  # the saves as the victims' slowdowns leave them
            self.interference = found
            saves = self._checkpoints()
            kept = [e for e in found if clear(e.start, e.end, saves[e.task_id] + saves[e.aggressor])]
            if len(kept) == len(found):
                break
            found = kept
        for n, e in enumerate(found, start=1):
            e.ident = f"if{n:03d}"
        self.interference = []
        return found

    def _schedule_decoys(self) -> list[Episode]:
        on_path = set().union(*(t.path_ports for t in self.tasks)) if self.tasks else set()
        task_servers = {s.sysname for t in self.tasks for s in t.servers}
        idle_nics = [n for s in self.cluster.servers if s.sysname not in task_servers for n in s.nics]
        decoys = []
        n = max(3, len(self.episodes) // 3)
        for i in range(n):
            kind = "congestion" if i % 2 == 0 else "loss"
            quiet_leafs = [lf for lf in self.cluster.leafs
                           if not any((lf, u) in on_path for u in UPLINKS)]
            if i % 3 == 2 and quiet_leafs:  # an uplink of a leaf no spine-crossing task uses
                leaf, port = self.rng.choice(quiet_leafs), self.rng.choice(UPLINKS)
            else:
                nic = self.rng.choice(idle_nics)
                leaf, port = nic.leaf, nic.access_port
            assert (leaf, port) not in on_path
            length = self.rng.uniform(60, 180)
            begin = self.rng.uniform(self.t0 + 30, self.t1 - length - 30)
            level = self.rng.uniform(0.95, 1.0) if kind == "congestion" else self.rng.uniform(0.002, 0.02)
            decoys.append(Episode(f"decoy{i + 1:03d}", kind, leaf, port,
                                  "out" if kind == "congestion" else "both",
                                  round(begin, 3), round(begin + length, 3), round(level, 4), None))
        return decoys

    # ------------------------------------------------------------ iterations
    def _simulate(self, task: Task) -> None:
        task.iterations = self._iterations(task)

    def _iterations(self, task: Task) -> list[Iteration]:
        """Iterations until past the traffic window: compute, then the all-reduce; an episode on
        the task's path stretches the all-reduce, a checkpoint adds a pause with no traffic."""
        mine = [e for e in self.episodes + self.interference if e.task_id == task.task_id]
        iterations: list[Iteration] = []
        t, i = task.first_step_start, 0
        while t < self.t1 + 120:
            i += 1
            compute = task.base_iter_s * (1 - task.comm_frac) * self.rng.uniform(0.985, 1.015)
            comm = task.base_iter_s * task.comm_frac * self.rng.uniform(0.97, 1.03)
            comm_start, causes = t + compute, []
            for e in mine:
                if e.overlaps(comm_start, comm_start + comm):
                    stretch = 1 + (e.level * 2.0 if e.kind != "loss" else 0.5 + 50 * e.level)
                    comm *= stretch
                    causes.append(e.ident)
            pause = 0.0
            if i > 1 and i % task.save_steps == 1:  # saved after step 500: step 501 is the slow one
                pause = task.base_iter_s * self.rng.uniform(0.6, 0.9)
                causes.append("checkpoint")
            end = comm_start + comm + pause
            iterations.append(Iteration(i, round(t, 3), round(end, 3), round(comm_start, 3),
                                        round(comm_start + comm, 3), causes))
            t = end
        return iterations

    # ------------------------------------------------------------ loads
    def _components(self) -> dict[tuple[str, str], list[_Component]]:
        comps: dict[tuple[str, str], list[_Component]] = {}
        for task in self.tasks:
            its = task.iterations
            starts = np.array([it.comm_start for it in its])
            ends = np.array([it.comm_end for it in its])
            nominal = np.array([task.base_iter_s * task.comm_frac for _ in its])
            # the same bytes over a stretched all-reduce: a lower rate
            levels = task.burst_util * np.minimum(1.0, nominal * 1.03 / (ends - starts))
            for nic in task.nics:
                comps.setdefault((nic.leaf, nic.access_port), []).append(_Component(starts, ends, levels))
            if task.crosses_spine:
                for leaf in task.leafs:
                    on_leaf = sum(1 for n in task.nics if n.leaf == leaf)
                    share = on_leaf * GBPS["200"] * 0.5 / (len(UPLINKS) * GBPS["400"])
                    for up in UPLINKS:
                        weight = 0.5 + self._unit(leaf, up, "ecmp")
                        comps.setdefault((leaf, up), []).append(
                            _Component(starts, ends, levels * share * weight))
        return comps

    def _bursts(self) -> dict[tuple[str, str], list[Episode]]:
        """The interference episodes each access port of an aggressor's NIC on the shared leaf
        carries the burst of."""
        by_id = {t.task_id: t for t in self.tasks}
        bursts: dict[tuple[str, str], list[Episode]] = {}
        for e in self.interference:
            for nic in by_id[e.aggressor].nics:
                if nic.leaf == e.leaf:
                    bursts.setdefault((nic.leaf, nic.access_port), []).append(e)
        return bursts

    def _unit(self, *key: str) -> float:
        """A deterministic number in [0, 1) per key and seed (independent of call order)."""
        return (zlib.crc32("|".join((str(self.seed),) + key).encode()) % 100000) / 100000.0

    def background(self, leaf: str, port: str) -> tuple[float, float, float]:
        if port == MGMT:
            return 0.0005, 0.0008, 0.0
        scale = 0.008 if port in UPLINKS else 0.03
        return (0.002 + scale * self._unit(leaf, port, "in"),
                0.002 + scale * self._unit(leaf, port, "out"),
                2 * math.pi * self._unit(leaf, port, "phase"))

    def port_util(self, leaf: str, port: str, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Utilisation of a switch port as fractions of its line rate, (in, out), at instants t.
        `in` is what the port receives: for an access port, what the NIC sends."""
        t = np.asarray(t, dtype=float)
        b_in, b_out, phase = self.background(leaf, port)
        wave = 1 + 0.3 * np.sin(2 * np.pi * t / 900.0 + phase)
        u_in, u_out = b_in * wave, b_out * wave
        for comp in self.components.get((leaf, port), []):
            idx = np.searchsorted(comp.starts, t, side="right") - 1
            safe = np.clip(idx, 0, None)
            inside = (idx >= 0) & (t < comp.ends[safe])
            add = np.where(inside, comp.levels[safe], 0.0)
            u_in, u_out = u_in + add, u_out + add
        for e in self.bursts.get((leaf, port), []):  # at least the burst, below saturation: the
            inside = (t >= e.start) & (t < e.end)   # aggressor is busy, not blocked
            u_in = np.where(inside, np.maximum(u_in, AGGRESSOR_BURST), u_in)
            u_out = np.where(inside, np.maximum(u_out, AGGRESSOR_BURST), u_out)
        for e in self.episodes_at(leaf, port):
            if e.kind == "loss":
                continue
            inside = (t >= e.start) & (t < e.end)
            level = e.level - 0.02 * np.sin(t)  # not a flat line
            if e.direction in ("in", "both"):
                u_in = np.where(inside, np.maximum(u_in, level), u_in)
            if e.direction in ("out", "both"):
                u_out = np.where(inside, np.maximum(u_out, level), u_out)
        return np.clip(u_in, 0, 1), np.clip(u_out, 0, 1)

    def episodes_at(self, leaf: str, port: str) -> list[Episode]:
        return [e for e in self.episodes + self.decoys + self.interference if e.leaf == leaf and e.port == port]

    def loss_fraction(self, leaf: str, port: str, t: np.ndarray) -> np.ndarray:
        out = np.zeros_like(np.asarray(t, dtype=float))
        for e in self.episodes_at(leaf, port):
            if e.kind == "loss":
                out = np.where((t >= e.start) & (t < e.end), np.maximum(out, e.level), out)
        return out

    # ------------------------------------------------------------ what gets written
    def _monitored_ports(self) -> list[tuple[str, str]]:
        """Ports with per-port files and port.csv rows: the tasks' access ports, their leafs'
        uplinks (all 30 at scale >= 1, else the ones with episodes plus a few), the management
        port, every episode and decoy port, and a few idle access ports."""
        ports: set[tuple[str, str]] = set()
        task_leafs = sorted({lf for t in self.tasks for lf in t.leafs}, key=leaf_number)
        n_up = len(UPLINKS) if self.scale >= 1 else max(2, round(len(UPLINKS) * self.scale))
        for task in self.tasks:
            ports |= {(n.leaf, n.access_port) for n in task.nics}
        for leaf in task_leafs:
            ports |= {(leaf, up) for up in UPLINKS[:n_up]}
            ports.add((leaf, MGMT))
            idle = self.cluster.idle_ports.get(leaf, ())
            ports |= {(leaf, p) for p in idle[: max(1, round(4 * self.scale))]}
        ports |= {(e.leaf, e.port) for e in self.episodes + self.decoys + self.interference}
        return sorted(ports, key=lambda lp: (leaf_number(lp[0]), lp[1]))

    def monitored_by_folder(self) -> list[tuple[str, str]]:
        return [(switch_folder(leaf), port) for leaf, port in self.monitored]

    def load(self, folder: str, port: str, epoch_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The per-port writer's callback: (in, out) utilisation as fractions of line rate."""
        leaf = folder.replace("_GPU_S9825", ".GPU.S9825")
        return self.port_util(leaf, port, epoch_s)
