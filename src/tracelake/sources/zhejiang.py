"""Zhejiang Lab cluster_2000_A100: the --raw folder is the release's `cluster_2000_A100/`
(topology workbook, trafficinfo/<hour>/…, taskinfo/<task>/…)."""

from __future__ import annotations

from pathlib import Path

from tracelake.errors import TracelakeError
from tracelake.sources import TableInput
from tracelake.zhejiang import correlate, hourly, ports, tasklogs, topology

PARTS = (topology, ports, hourly, tasklogs, correlate)
DERIVED = [entry for part in PARTS for entry in part.DERIVED]


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    inputs = [item for part in PARTS for item in part.plan(raw_dir, staging)]
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no Zhejiang files (cluster_2000_A100.xlsx, trafficinfo/, taskinfo/)")
    return inputs
