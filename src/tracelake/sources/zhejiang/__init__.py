"""Zhejiang Lab cluster_2000_A100: the --raw folder is the release's `cluster_2000_A100/`
(topology workbook, trafficinfo/<hour>/…, taskinfo/<task>/…)."""

from __future__ import annotations

from pathlib import Path

from tracelake.contract import TableInput
from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang import correlate, hourly, ports, tasklogs, topology
from tracelake.sources.zhejiang.layout import parse_hours

PARTS = (topology, ports, hourly, tasklogs, correlate)
DERIVED = [entry for part in PARTS for entry in part.DERIVED]


TRAFFIC_PARTS = (ports, hourly)  # the parts that read trafficinfo/<hour>/


def plan(raw_dir: Path, staging: Path, hours: str | None = None) -> list[TableInput]:
    """Every part's inputs; with `hours` (`H` or `FROM..TO`, CST folder names) the traffic parts
    read only those hour folders, and the workbook and task folders are read as always (an
    unchanged one commits nothing)."""
    chosen = parse_hours(hours) if hours else None
    inputs = [item for part in PARTS if part not in TRAFFIC_PARTS for item in part.plan(raw_dir, staging)]
    inputs += [item for part in TRAFFIC_PARTS for item in part.plan(raw_dir, staging, chosen)]
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no Zhejiang files (cluster_2000_A100.xlsx, trafficinfo/, taskinfo/)")
    return inputs
