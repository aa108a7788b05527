"""AcmeTrace: Seren/Kalos job CSVs and the DCGM/Prometheus/IPMI utilization CSVs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracelake.api.contract import TableInput
    from tracelake.api.source import Source


def release_data_dir(raw_dir: Path) -> Path:
    """`--raw` may be the release's data/ folder or the cloned repository around it."""
    from tracelake.io.storetree import as_folder

    raw_dir = as_folder(raw_dir)
    data = raw_dir / "data"
    if data.is_dir() and ((data / "job_trace").is_dir() or (data / "utilization").is_dir()):
        return data
    return raw_dir


def read_in_place(relative: str) -> bool:
    """Whether the engine's tasks read the raw file at `relative` at its URL (from a store it is
    never copied): every file. The utilization CSVs' headers come from ranged reads of their
    start, the tasks read them (a `.gz` inflated as it streams); the job CSVs stream through this
    process once, for a header repeated inside (io.text.read_lines), and a `.gz` one is unpacked
    to staging; what the plan ignores (the release's util_pkl) is never fetched."""
    return True


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    from tracelake.api.contract import combined_plan
    from tracelake.sources.acme import jobs, utilization

    return combined_plan([jobs.plan, utilization.plan], release_data_dir(raw_dir), staging,
                         "AcmeTrace files (trace_seren.csv, trace_kalos.csv, utilization CSVs)")


def declare() -> Source:
    """This source's declaration, built when the registry first asks (the package's top
    imports nothing heavy)."""
    from tracelake.api.source import Source

    # silver.jobs and gold.jobs_* read every job source: tracelake.crosstrace
    return Source("acme", plan, in_place=read_in_place)

