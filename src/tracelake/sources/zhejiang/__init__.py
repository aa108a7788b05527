"""Zhejiang Lab cluster_2000_A100: the --raw folder is the release's `cluster_2000_A100/`
(topology workbook, trafficinfo/<hour>/…, taskinfo/<task>/…)."""

from __future__ import annotations

from pathlib import Path

from tracelake.api.contract import TableInput
from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang import correlate, hourly, ports, tasklogs, topology
from tracelake.sources.zhejiang.layout import parse_hours

PARTS = (topology, ports, hourly, tasklogs, correlate)
DERIVED = [entry for part in PARTS for entry in part.DERIVED]


TRAFFIC_PARTS = (ports, hourly)  # the parts that read trafficinfo/<hour>/


def plan(raw_dir: Path, staging: Path, hours: str | None = None) -> list[TableInput]:
    """Every part's inputs; with `hours` (`H` or `FROM..TO`, CST folder names) only the traffic of
    those hour folders: an hourly run then changes only time partitions, so the derived tables are
    rebuilt for those hours (and the tasks they touch) alone. The workbook and the task folders are
    ingested by a run without --hours (e.g. a daily one)."""
    if hours is not None:  # an empty --hours is refused by parse_hours, not read as 'all'
        chosen = parse_hours(hours)
        return [item for part in TRAFFIC_PARTS for item in part.plan(raw_dir, staging, chosen)]
    inputs = [item for part in PARTS if part not in TRAFFIC_PARTS for item in part.plan(raw_dir, staging)]
    inputs += [item for part in TRAFFIC_PARTS for item in part.plan(raw_dir, staging, None)]
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no Zhejiang files (cluster_2000_A100.xlsx, trafficinfo/, taskinfo/)")
    return inputs
