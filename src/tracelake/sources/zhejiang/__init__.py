"""Zhejiang Lab cluster_2000_A100: the --raw folder is the release's `cluster_2000_A100/`
(topology workbook, trafficinfo/<hour>/…, taskinfo/<task>/…)."""

from __future__ import annotations

from pathlib import Path

from tracelake.contract import TableInput, combined_plan
from tracelake.sources.zhejiang import correlate, hourly, ports, tasklogs, topology

PARTS = (topology, ports, hourly, tasklogs, correlate)
DERIVED = [entry for part in PARTS for entry in part.DERIVED]


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return combined_plan(PARTS, raw_dir, staging, "Zhejiang files (cluster_2000_A100.xlsx, trafficinfo/, taskinfo/)")
