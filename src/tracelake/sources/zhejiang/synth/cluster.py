"""The cluster the generator places tasks on: servers, their 4 RoCE NICs and leaf ports, from the
real topology workbook (docs/formats/zhejiang.md §2) or a built-in synthetic one of the same shape.

A server is placeable when both sheets describe all 4 of its NICs completely (§7 join path:
host IP + mlx5 -> netdev -> NIC IP, leaf, access port). The workbook's anomalies (empty cells,
hosts in one sheet only, deviant NIC maps) are kept in the synthetic one and skipped here.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang.layout import MGMT_PORT
from tracelake.sources.zhejiang.xlsx import read_sheets, write_workbook

WORKBOOK = "cluster_2000_A100.xlsx"
TOPOLOGY_ENV = "TRACELAKE_ZJ_TOPOLOGY"
TOPO_SHEET, NIC_SHEET = "cluster topology", "GPU NIC info"
TOPO_HEADER = ["accessport", "serverIP", "nicname", "portname", "switchIP", "switchname", "sysname"]
NIC_HEADER = ["GPU IP", "NIC name1", "NIC name 2"]
SUFFIX = ".GPU.S9825"
# Leaf-n racks (docs/formats/zhejiang.md §1) and the storage leafs
LEAF_RACKS = ["B03", "B04", "B05", "B06", "D03", "D04", "D05", "D06", "F02", "F03",
              "F04", "F05", "H03", "H04", "H05", "H06", "J01", "J02", "J03", "J04"]
ST_LEAFS = [f"NH-DC-NM224-J{4 + n:02d}-ROCE-ST-leaf-{n}{SUFFIX}" for n in range(1, 5)]
RDMA = ["mlx5_2", "mlx5_3", "mlx5_8", "mlx5_9"]
# netdev by rail (leaf position in its group of 4) for the two server types (§2.3)
RAIL_NETDEV = {"A": ["ens11np0", "ens10np0", "ens19np0", "ens18np0"],
               "B": ["ens24np0", "ens25np0", "ens30np0", "ens31np0"]}
RDMA_NETDEV = {"A": dict(zip(RDMA, ["ens10np0", "ens11np0", "ens18np0", "ens19np0"])),
               "B": dict(zip(RDMA, ["ens24np0", "ens25np0", "ens30np0", "ens31np0"]))}


def leaf_name(n: int) -> str:
    return f"NH-DC-NM129-{LEAF_RACKS[n - 1]}-ROCE-Leaf-{n}{SUFFIX}"


def every_port_by_folder() -> list[tuple[str, str]]:
    """(switch folder, port) of every port the release's per-port folders hold: per Leaf-n the
    management port, 30 ports × 2 breakout lanes and the 400G ports 31-64; per storage leaf the
    management port and 64 400G ports (2,160 files an hour, as in a real hour)."""
    ports = []
    for n in range(1, len(LEAF_RACKS) + 1):
        folder = switch_folder(leaf_name(n))
        ports.append((folder, MGMT_PORT))
        ports += [(folder, f"TwoHundredGigE1/0/{p}:{s}") for p in range(1, 31) for s in (1, 2)]
        ports += [(folder, f"FourHundredGigE1/0/{p}") for p in range(31, 65)]
    for device in ST_LEAFS:
        folder = switch_folder(device)
        ports.append((folder, MGMT_PORT))
        ports += [(folder, f"FourHundredGigE1/0/{p}") for p in range(1, 65)]
    return ports


def switch_folder(device: str) -> str:
    """Device name -> its per-port folder name (`.GPU.S9825` -> `_GPU_S9825`)."""
    return device.replace(SUFFIX, "_GPU_S9825")


def leaf_number(device: str) -> int:
    match = re.search(r"-[Ll]eaf-(\d+)", device)
    if not match:
        raise TracelakeError(f"not a leaf device name: {device}")
    return int(match.group(1))


def host_ip(host_num: int) -> str:
    return f"10.107.254.{host_num}" if host_num <= 240 else f"10.107.255.{host_num - 240}"


@dataclass(frozen=True)
class Nic:
    rdma: str          # mlx5_X, NCCL's name
    netdev: str        # ensXnp0
    nic_ip: str        # RoCE IP = topology serverIP
    leaf: str          # switchname
    access_port: str   # TwoHundredGigE1/0/p:s

    @property
    def folder(self) -> str:
        return switch_folder(self.leaf)


@dataclass(frozen=True)
class Server:
    sysname: str
    host_num: int
    host_ip: str
    nics: tuple[Nic, ...]  # NCCL's "NET/IB : Using" order: by mlx5 number

    @property
    def group(self) -> int:
        return (leaf_number(self.nics[0].leaf) - 1) // 4 + 1


@dataclass(frozen=True)
class Cluster:
    source: str                      # "real" or "synthetic"
    servers: tuple[Server, ...]      # placeable servers, by host number
    leafs: tuple[str, ...]           # GPU leaf device names, Leaf-1..n
    leaf_ips: dict[str, str]
    idle_ports: dict[str, tuple[str, ...]]  # leaf -> access ports of the topology's other rows
    sheets: dict[str, list[list[object]]]


# ---------------------------------------------------------------- synthetic workbook

def _group_hosts(group: int) -> list[int]:
    if group < 5:
        return list(range(60 * (group - 1) + 1, 60 * group + 1))
    return [n for n in range(241, 266) if n != 263]


def _server_type(host: int, group: int) -> str:
    if group in (1, 3):
        return "B" if group == 3 and host in range(171, 179) else "A"
    return "B"


def synthetic_sheets() -> dict[str, list[list[object]]]:
    """Both sheets in the real layout and size: 253 topology servers, 260 NIC-info hosts, with the
    real anomalies (GPU-153 half empty, GPU-228 without IPs, 121–130/132 only in NIC info,
    51/168/172/228 only in the topology, hosts 35 and 132 with deviant mlx5 maps)."""
    topo: list[list[object]] = [list(TOPO_HEADER)]
    nic: list[list[object]] = [list(NIC_HEADER)]
    for group in range(1, 6):
        for index, host in enumerate(_group_hosts(group)):
            kind = _server_type(host, group)
            rack = f"{'ACEGI'[group - 1]}{index // 6 + 1:02d}"
            sysname = f"NH-DC-NM129-{rack}-{[28, 20, 12][index % 3]}U-GPU-{host}"
            port = f"TwoHundredGigE1/0/{index // 2 + 1}:{index % 2 + 1}"
            if host not in (51, 168, 172, 228):
                mapping = dict(RDMA_NETDEV[kind])
                if host == 35:
                    mapping["mlx5_3"], mapping["mlx5_8"] = mapping["mlx5_8"], mapping["mlx5_3"]
                if host == 132:
                    mapping = {"mlx5_2": mapping["mlx5_2"], "mlx5_3": mapping["mlx5_3"],
                               "mlx5_4": mapping["mlx5_8"], "mlx5_7": mapping["mlx5_9"]}
                nic += [[host_ip(host), rdma, dev] for rdma, dev in mapping.items()]
            if host in range(121, 131) or host == 132:
                continue
            for rail, netdev in enumerate(RAIL_NETDEV[kind]):
                leaf = 4 * (group - 1) + rail + 1
                row = [port, f"10.107.{221 + leaf}.{host - 60 * (group - 1)}", netdev, port,
                       f"10.107.208.{110 + leaf}", leaf_name(leaf), sysname]
                if host == 153 and rail >= 2:
                    row[1] = row[2] = row[4] = ""
                if host == 228:
                    row[1] = row[4] = ""
                topo.append(row)
    return {TOPO_SHEET: topo, NIC_SHEET: nic}


# ---------------------------------------------------------------- loading

def _real_workbook(explicit: str | Path | None) -> Path | None:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise TracelakeError(f"topology workbook {path} does not exist")
        return path
    env = os.environ.get(TOPOLOGY_ENV)
    if env:
        if not Path(env).is_file():
            raise TracelakeError(f"{TOPOLOGY_ENV}={env}: no such workbook")
        return Path(env)
    return None


def _text(value: object) -> str:
    return "" if value is None else str(value).strip()


def _records(rows: list[list[object]], header: list[str], where: str) -> list[dict[str, str]]:
    if not rows:
        raise TracelakeError(f"{where}: empty sheet")
    names = [_text(v) for v in rows[0]]
    missing = [h for h in header if h not in names]
    if missing:
        raise TracelakeError(f"{where}: missing columns {missing}")
    return [{h: _text(row[names.index(h)]) if names.index(h) < len(row) else "" for h in header}
            for row in rows[1:]]


def cluster_from_sheets(sheets: dict[str, list[list[object]]], source: str) -> Cluster:
    for sheet in (TOPO_SHEET, NIC_SHEET):
        if sheet not in sheets:
            raise TracelakeError(f"topology workbook has no sheet '{sheet}'")
    topo = _records(sheets[TOPO_SHEET], TOPO_HEADER, TOPO_SHEET)
    nic_rows = _records(sheets[NIC_SHEET], NIC_HEADER, NIC_SHEET)
    by_host_ip: dict[str, dict[str, str]] = {}
    for r in nic_rows:
        by_host_ip.setdefault(r["GPU IP"], {})[r["NIC name1"]] = r["NIC name 2"]
    by_sysname: dict[str, list[dict[str, str]]] = {}
    leaf_ips: dict[str, str] = {}
    for r in topo:
        by_sysname.setdefault(r["sysname"], []).append(r)
        if r["switchIP"]:
            leaf_ips[r["switchname"]] = r["switchIP"]
    servers, used_ports = [], set()
    for sysname, rows in by_sysname.items():
        match = re.search(r"GPU-(\d+)$", sysname)
        if not match:
            continue
        num = int(match.group(1))
        rdma_map = by_host_ip.get(host_ip(num), {})
        by_netdev = {r["nicname"]: r for r in rows if r["nicname"]}
        nics = []
        for rdma in sorted(rdma_map, key=lambda d: int(d.split("_")[1])):
            row = by_netdev.get(rdma_map[rdma])
            if row and row["serverIP"] and row["switchname"] and row["accessport"]:
                nics.append(Nic(rdma, rdma_map[rdma], row["serverIP"], row["switchname"], row["accessport"]))
        if len(nics) == 4 and len({n.leaf for n in nics}) == 4:
            servers.append(Server(sysname, num, host_ip(num), tuple(nics)))
            used_ports.update((n.leaf, n.access_port) for n in nics)
    if not servers:
        raise TracelakeError("topology workbook: no server has 4 complete NIC rows")
    leafs = sorted({r["switchname"] for r in topo if r["switchname"]}, key=leaf_number)
    idle: dict[str, set[str]] = {leaf: set() for leaf in leafs}
    for r in topo:
        if r["switchname"] and (r["switchname"], r["accessport"]) not in used_ports:
            idle[r["switchname"]].add(r["accessport"])
    return Cluster(
        source=source,
        servers=tuple(sorted(servers, key=lambda s: s.host_num)),
        leafs=tuple(leafs),
        leaf_ips=leaf_ips,
        idle_ports={k: tuple(sorted(v)) for k, v in idle.items()},
        sheets=sheets,
    )


def load_cluster(topology: str | Path | None = None) -> tuple[Cluster, Path | None]:
    """The real workbook (argument or $TRACELAKE_ZJ_TOPOLOGY) when there is one,
    else the synthetic topology; `topology="synthetic"` forces the latter."""
    path = None if topology == "synthetic" else _real_workbook(topology)
    if path is None:
        return cluster_from_sheets(synthetic_sheets(), "synthetic"), None
    return cluster_from_sheets(read_sheets(path), "real"), path


def write_cluster_workbook(cluster: Cluster, source_path: Path | None, out: Path) -> Path:
    """Make the output self-contained: copy the real workbook, or write the synthetic one."""
    target = out / WORKBOOK
    if source_path is not None:
        shutil.copyfile(source_path, target)
    else:
        write_workbook(target, cluster.sheets)
    return target
