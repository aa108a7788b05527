"""Zhejiang Lab cluster_2000_A100: the --raw folder is the release's `cluster_2000_A100/`
(topology workbook, trafficinfo/<hour>/…, taskinfo/<task>/…)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.sources.zhejiang.layout import HOUR, TRAFFIC, parse_hours

if TYPE_CHECKING:
    from types import ModuleType

    from tracelake.api.contract import TableInput
    from tracelake.api.source import Source


def _parts() -> tuple[tuple[ModuleType, ...], tuple[ModuleType, ...]]:
    """Every part, and the parts that read trafficinfo/<hour>/ (the workbook and task logs go first)."""
    from tracelake.sources.zhejiang import correlate, hourly, interference, tasklogs, topology
    from tracelake.sources.zhejiang.ports import tables as ports

    return (topology, ports, hourly, tasklogs, correlate, interference), (ports, hourly)


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    """Every part's inputs: the workbook, the task folders and every hour folder."""
    from tracelake.api.contract import combined_plan

    every, traffic = _parts()
    parts = [part for part in every if part not in traffic] + list(traffic)
    return combined_plan([part.plan for part in parts], raw_dir, staging,
                         "Zhejiang files (cluster_2000_A100.xlsx, trafficinfo/, taskinfo/)")


def _plan_without_traffic(raw_dir: Path, staging: Path) -> list[TableInput]:
    from tracelake.api.contract import combined_plan

    every, traffic = _parts()
    return combined_plan([part.plan for part in every if part not in traffic], raw_dir, staging,
                         "Zhejiang files outside trafficinfo/ (cluster_2000_A100.xlsx, taskinfo/)")


def plan_hours(raw_dir: Path, staging: Path, hours: str) -> list[TableInput]:
    """Only the traffic of the hour folders `hours` names (`H` or `FROM..TO`, CST folder names):
    an hourly run then changes only time partitions, so the derived tables are rebuilt for those
    hours (and the tasks they touch) alone. `none` is the rest: the workbook and the task
    folders, which a daily run ingests beside hourly ones without listing any hour. An empty
    `hours` is refused by parse_hours."""
    chosen = parse_hours(hours)
    if not chosen:
        return _plan_without_traffic(raw_dir, staging)
    return [item for part in _parts()[1] for item in part.plan(raw_dir, staging, chosen)]


def hour_files(relative: str, hours: str) -> bool:
    """Whether `plan_hours(…, hours)` reads the raw file at `relative`: traffic of those hours
    (with `none`, every file outside trafficinfo/)."""
    parts = relative.split("/")
    if not _hours(hours):
        return parts[0] != TRAFFIC
    return len(parts) > 2 and parts[0] == TRAFFIC and parts[1] in _hours(hours)


_hours = functools.lru_cache(maxsize=4)(parse_hours)


def port_file(relative: str) -> bool:
    """Whether the raw file at `relative` sits in a switch folder (trafficinfo/<hour>/<switch>/):
    a port file, which the port pass's tasks read at its URL (io.objectstore.open_raw); from a store it is
    never copied."""
    parts = relative.split("/")
    return len(parts) == 4 and parts[0] == TRAFFIC


def declare() -> Source:
    """This source's declaration, built when the registry first asks (the package's top
    imports nothing heavy)."""
    from tracelake.api.source import Source

    derived = tuple(entry for part in _parts()[0] for entry in part.DERIVED)
    return Source("zhejiang", plan, derived, batch_by=HOUR, plan_batches=plan_hours,
                  batch_files=hour_files, in_place=port_file, report="tracelake.sources.zhejiang.report",
                  explain="tracelake.sources.zhejiang.explain")

