"""Writes trafficinfo/<hour>/<hour>_{flow,nic,link,port}.csv (or <hour>.xlsx) from the World.

Formats as documented (docs/formats/zhejiang.md §4) with the release's quirks: misspelt and duplicated
headers, China-local 上午/下午 times (flow.csv in the 12-hour form, 上午12:.. at midnight; the
others with a zero-padded 24-hour hour, 上午00:..), nic counters as cumulative float text
(`1.826184052268872e+16`, `496472930239.0`), link octets and packets over mismatched windows.
Some encoding noise a Windows export has: flow.csv with a BOM, port.csv with CRLF.
All values come from World.port_util integrated over 1 s steps, so a minute in port.csv equals
the per-port counters' bytes in that minute up to sampling noise.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tracelake.sources.zhejiang.clock import format_cst, hour_start_utc
from tracelake.sources.zhejiang.synth.cluster import Nic, leaf_number
from tracelake.sources.zhejiang.synth.world import UPLINKS, Episode, World, port_speed, uplink_peer
from tracelake.sources.zhejiang.xlsx import write_workbook

FLOW_HEADER = ("SourceServer,DestServer,SourceSwitch,DestSwitch,Time,SourceIp,DestIp,SourceQp,DestQp,Rtt,"
               "ReadPkts,WritePkts,SendPkts,NakPkts")
NIC_HEADER = ("SaveTime,DeviceName,Ip,PortName,ReceivedBytes,TransmittedBytes,ReceivedPacketsByPort,"
              "ReceiveddPacketsByUnicast,TransmittedPacketsByPort,TransmitteddPacketsByUnicast")
LINK_HEADER = ("DeviceName,IfAbbreviatedName,DstDevice,DstPort,StartTime,InUcastPkts,Ip,IfOperStatus,InOctets,InPkts,"
               "InMuticastPkts,InBrdcastPkts,InSpeed,InPktSpeed,InUseRatio,InErrorRatio,OutOctets,OutPkts,"
               "OutMuticastPkts,OutBrdcastPkts,OutSpeed,OutPktSpeed,OutUseRatio,EcnMarkedCount,OutBrdcastPkts")
PORT_HEADER = "DeviceName,PortName,Time,InBytes,InUseRatio,InSpeed,InPktsLoss,OutBytes,OutUseRatio,OutSpeed,OutPktsLoss"
PKT = 4096  # RoCE MTU payload
STORE_LEAF = "NH-DC-NM224-J05-ROCE-ST-leaf-1.GPU.S9825"


def _ratio(value: float) -> str:
    """Percent text as the exports mix it: `0`, `0.5`, `2.74`, `100`."""
    r = round(value, 2)
    return str(int(r)) if r == int(r) else f"{r}"


def _lost(octets: int, loss: float) -> int:
    """Packets lost in a minute a loss episode touches: at least one."""
    return max(1, int(octets / PKT * loss))


def _abbrev(port: str) -> str:
    return port.replace("FourHundredGigE", "400GE").replace("TwoHundredGigE", "200GE")


@dataclass(frozen=True)
class Qp:
    src_server: str
    dst_server: str
    src: Nic | None
    dst_leaf: str
    dst_ip: str
    dst_access: str | None
    src_qp: int
    dst_qp: int
    rtt_ns: int
    share: float          # of the source NIC's sent bytes
    task_id: str | None


class HourlyWriter:
    """One per generated world: caches 1 s utilisation per port over the whole window."""

    def __init__(self, world: World):
        self.w = world
        self.grid = np.arange(world.t0 - 60, world.t1) + 0.5  # 1 s steps, one minute of lead-in
        self._util: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self.qps = self._queue_pairs()

    def util(self, leaf: str, port: str) -> tuple[np.ndarray, np.ndarray]:
        key = (leaf, port)
        if key not in self._util:
            self._util[key] = self.w.port_util(leaf, port, self.grid)
        return self._util[key]

    def _rng(self, *key: str) -> np.random.Generator:
        return np.random.default_rng(zlib.crc32("|".join((str(self.w.seed),) + key).encode()))

    def _minute(self, m: float) -> slice:
        """1 s grid cells of the minute ending at m: (m - 60, m]."""
        i = int(m - 60 - (self.w.t0 - 60))
        return slice(i, i + 60)

    # ------------------------------------------------------------ queue pairs
    def _queue_pairs(self) -> list[Qp]:
        rng = self._rng("qps")
        qps: list[Qp] = []

        def qpn() -> int:
            return int(rng.integers(1000, 2**24))

        for task in self.w.tasks:
            servers = task.servers
            if len(servers) < 2:
                continue
            for k, server in enumerate(servers):
                peer = servers[(k + 1) % len(servers)]
                for rail in range(4):
                    a, b = server.nics[rail], peer.nics[rail]
                    for _ in range(2):
                        qps.append(Qp(server.sysname, peer.sysname, a, b.leaf, b.nic_ip, b.access_port,
                                      qpn(), qpn(), int(rng.integers(4000, 9000)), 0.5, task.task_id))
        task_hosts = {s.sysname for t in self.w.tasks for s in t.servers}
        idle = [s for s in self.w.cluster.servers if s.sysname not in task_hosts]
        decoy_nics = {(e.leaf, e.port) for e in self.w.decoys}
        sources = [s for s in idle if any((n.leaf, n.access_port) in decoy_nics for n in s.nics)]
        n_bg = max(2, round(20 * self.w.scale))
        picks = list(rng.choice(len(idle), size=min(n_bg, len(idle)), replace=False))
        sources += [idle[int(i)] for i in picks]
        for server in sources:
            rail = next((r for r, n in enumerate(server.nics) if (n.leaf, n.access_port) in decoy_nics),
                        int(rng.integers(0, 4)))
            peer = idle[int(rng.integers(0, len(idle)))]
            if peer.sysname == server.sysname:
                continue
            a, b = server.nics[rail], peer.nics[rail]
            qps.append(Qp(server.sysname, peer.sysname, a, b.leaf, b.nic_ip, b.access_port,
                          qpn(), qpn(), int(rng.integers(4000, 9000)), 0.2, None))
        for task in self.w.tasks:  # checkpoint writes go to storage servers outside the topology
            for k, server in enumerate(task.servers):
                store = 1 + (leaf_number(server.nics[0].leaf) + k) % 8
                qps.append(Qp(server.sysname, f"NH-DC-NM224-J05-28U-STORE-{store}", server.nics[0],
                              STORE_LEAF, f"10.107.250.{store}", None, qpn(), qpn(),
                              int(rng.integers(6000, 12000)), 0.0, f"{task.task_id}#ckpt"))
        return qps

    # ------------------------------------------------------------ rows
    def port_rows(self, minutes: np.ndarray) -> list[list[object]]:
        rows = []
        for leaf, port in self.w.monitored:
            u_in, u_out = self.util(leaf, port)
            speed = port_speed(port) / 8
            for m in minutes:
                sl = self._minute(m)
                in_b, out_b = int(u_in[sl].sum() * speed), int(u_out[sl].sum() * speed)
                loss = self.w.loss_fraction(leaf, port, self.grid[sl]).mean()
                lost_in, lost_out = (_lost(in_b, loss), _lost(out_b, loss)) if loss > 0 else (0, 0)
                rows.append([leaf, port, format_cst(m, "24h"), in_b, _ratio(in_b / 60 / speed * 100),
                             in_b // 60, lost_in, out_b, _ratio(out_b / 60 / speed * 100),
                             out_b // 60, lost_out])
        return rows

    def _link_values(self, leaf: str, port: str, sl: slice, flip: bool) -> list[object]:
        u_in, u_out = self.util(leaf, port)
        if flip:
            u_in, u_out = u_out, u_in
        speed = port_speed(port) / 8
        values: list[object] = []
        for u in (u_in, u_out):
            rate = int(u[sl].mean() * speed)
            pkt_rate = rate // PKT
            values.append((rate, pkt_rate, u[sl].mean()))
        (ir, ip, iu), (orate, op, ou) = values
        loss = self.w.loss_fraction(leaf, port, self.grid[sl]).mean()
        busy = max(iu, ou)
        ecn = int(op * 60 * (busy - 0.8) * 0.05) if busy > 0.8 else 0
        return [ip * 139 - 90 if ip * 139 > 90 else 0, None, "up", ir * 215, ip * 139, 90, 0, ir, ip,
                _ratio(iu * 100), _ratio(loss * 100), orate * 215, op * 139, 90, int(op * 139 * 1.02),
                orate, op, _ratio(ou * 100), ecn, 0]

    def link_rows(self, minutes: np.ndarray) -> list[list[object]]:
        rows = []
        access = {(n.leaf, n.access_port): s.sysname for t in self.w.tasks for s in t.servers for n in s.nics}
        for leaf, port in self.w.monitored:
            leaf_ip = self.w.cluster.leaf_ips.get(leaf, f"10.107.208.{110 + leaf_number(leaf)}")
            for m in minutes:
                sl, when = self._minute(m), format_cst(m + 4, "24h")
                if port in UPLINKS:
                    spine, spine_port = uplink_peer(leaf, port)
                    v = self._link_values(leaf, port, sl, flip=False)
                    rows.append([leaf, _abbrev(port), spine, spine_port, when, v[0], leaf_ip, *v[2:]])
                    s_ip = f"10.107.208.{100 + int(spine.rsplit('-', 1)[1].split('.')[0])}"
                    v = self._link_values(leaf, port, sl, flip=True)
                    rows.append([spine, _abbrev(spine_port), leaf, port, when, v[0], s_ip, *v[2:]])
                elif (leaf, port) in access:
                    v = self._link_values(leaf, port, sl, flip=False)
                    rows.append([leaf, _abbrev(port), access[(leaf, port)], "", when, v[0], leaf_ip, *v[2:]])
        return rows

    def nic_rows(self, minutes: np.ndarray) -> list[list[object]]:
        task_servers = [s for t in self.w.tasks for s in t.servers]
        names = {s.sysname for s in task_servers}
        extra = [s for s in self.w.cluster.servers if s.sysname not in names][: max(1, round(8 * self.w.scale))]
        rows = []
        for server in task_servers + extra:
            delay = 2 + int(self._rng(server.sysname, "delay").integers(0, 4))
            for nic in server.nics:
                u_in, u_out = self.util(nic.leaf, nic.access_port)
                rate = port_speed(nic.access_port) / 8
                rx, tx = np.cumsum(u_out) * rate, np.cumsum(u_in) * rate  # NIC RX = port out
                rng = self._rng(nic.nic_ip, "offset")
                rx0, tx0 = rng.uniform(1.2e16, 2.0e16), rng.uniform(1.2e16, 2.0e16)
                for m in minutes:
                    at = m + delay + int(self._rng(nic.nic_ip, str(m)).integers(0, 2))
                    i = int(at - self.grid[0])
                    r, t = rx0 + rx[i], tx0 + tx[i]
                    rp, tp = float(int(r / 4160)), float(int(t / 4160))
                    rows.append([format_cst(at, "24h"), server.sysname, server.host_ip, nic.rdma,
                                 repr(float(r)), repr(float(t)), repr(rp), repr(rp - 7.0), repr(tp), repr(tp - 5.0)])
        return rows

    def _path_episodes(self, qp: Qp) -> list[tuple[str, str]]:
        ports = [(qp.src.leaf, qp.src.access_port)]
        if qp.dst_access:
            ports.append((qp.dst_leaf, qp.dst_access))
        if qp.src.leaf != qp.dst_leaf:
            ports += [(leaf, up) for leaf in (qp.src.leaf, qp.dst_leaf) for up in UPLINKS]
        return ports

    def flow_rows(self, minutes: np.ndarray) -> list[list[object]]:
        rows = []
        spans = {t.task_id: (t.first_step_start, t.end) for t in self.w.tasks}
        pauses = {t.task_id: [(it.comm_end, it.end) for it in t.iterations if "checkpoint" in it.causes]
                  for t in self.w.tasks}
        by_port: dict[tuple[str, str], list[Episode]] = {}
        for e in self.w.episodes + self.w.decoys + self.w.interference:
            by_port.setdefault((e.leaf, e.port), []).append(e)
        for qp in self.qps:
            u_in, _ = self.util(qp.src.leaf, qp.src.access_port)
            rate = port_speed(qp.src.access_port) / 8
            path = [e for p in self._path_episodes(qp) for e in by_port.get(p, [])]
            rng = self._rng(str(qp.src_qp), qp.dst_ip)
            for m in minutes:
                a, b = m - 60, m
                if qp.task_id and qp.task_id.endswith("#ckpt"):
                    windows = pauses[qp.task_id[:-5]]
                    busy = sum(max(0.0, min(b, e) - max(a, s)) for s, e in windows)
                    if busy <= 0:
                        continue
                    writes = int(busy * 2.5e9 / PKT)
                elif qp.task_id:
                    s, e = spans[qp.task_id]
                    if not (s < b and a < e):
                        continue
                    writes = int(u_in[self._minute(m)].sum() * rate * qp.share / PKT)
                else:
                    writes = int(u_in[self._minute(m)].sum() * rate * qp.share / PKT)
                rtt, naks = qp.rtt_ns * rng.uniform(0.9, 1.15), 0
                for e in path:
                    overlap = max(0.0, min(b, e.end) - max(a, e.start)) / 60
                    if overlap <= 0:
                        continue
                    if e.kind != "loss":  # congestion, interference
                        rtt *= 1 + overlap * rng.uniform(8, 25)
                    else:
                        rtt *= 1 + overlap * rng.uniform(2, 5)
                        naks += int(writes * e.level * overlap) + 1
                rows.append([qp.src_server, qp.dst_server, qp.src.leaf, qp.dst_leaf, format_cst(m, "12h"),
                             qp.src.nic_ip, qp.dst_ip, qp.src_qp, qp.dst_qp, int(rtt), 0, writes,
                             int(rng.integers(0, 3)), naks])
        return rows

    # ------------------------------------------------------------ files
    def write_hour(self, hour: str, hour_dir: Path, fmt: str = "csv") -> list[Path]:
        start = hour_start_utc(hour).timestamp()
        minutes = start + 60 * np.arange(60)
        kinds = {
            "flow": (FLOW_HEADER, self.flow_rows(minutes)),
            "nic": (NIC_HEADER, self.nic_rows(minutes)),
            "link": (LINK_HEADER, self.link_rows(minutes)),
            "port": (PORT_HEADER, self.port_rows(minutes)),
        }
        hour_dir.mkdir(parents=True, exist_ok=True)
        if fmt == "xlsx":
            sheets = {k: [h.split(","), *[[("" if v is None else v) for v in r] for r in rows]]
                      for k, (h, rows) in kinds.items()}
            return [write_workbook(hour_dir / f"{hour}.xlsx", sheets)]
        written = []
        for kind, (header, rows) in kinds.items():
            text = "\n".join([header, *(",".join("" if v is None else str(v) for v in r) for r in rows)]) + "\n"
            path = hour_dir / f"{hour}_{kind}.csv"
            if kind == "flow":
                path.write_text("\ufeff" + text, encoding="utf-8")
            elif kind == "port":
                path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
            else:
                path.write_text(text, encoding="utf-8")
            written.append(path)
        return written
