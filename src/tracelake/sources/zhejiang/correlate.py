"""Zhejiang cross-layer correlation tables: task paths, per-iteration network evidence and a
per-task summary. No raw files of its own; its tables are derived from the task, topology and
traffic parts.

A network input that is not in the lake yet (no traffic ingested) is read as an empty table of
its schema, so every iteration still gets a row: coverage 0, suspect_reason 'none'.
Rules: tracelake.sources.zhejiang.transforms.correlate.
"""

from __future__ import annotations

from pathlib import Path

from tracelake.contract import TableInput, derived
from tracelake.sources.zhejiang.transforms.correlate import iteration_network, task_network_summary, task_paths

PATHS = "silver.zj_task_paths"
ITERATION_NETWORK = "gold.zj_iteration_network"
SUMMARY = "gold.zj_task_network_summary"
NETWORK_INPUTS = ("silver.zj_port_rates", "bronze.zj_port_minute", "bronze.zj_flow", "bronze.zj_link")


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return []


DERIVED = [
    derived(PATHS, task_paths, ("silver.zj_task_ranks",), optional=("silver.zj_task_iterations",)),
    derived(ITERATION_NETWORK, iteration_network, (PATHS, "silver.zj_task_iterations"), optional=NETWORK_INPUTS),
    derived(SUMMARY, task_network_summary, (ITERATION_NETWORK,)),
]
