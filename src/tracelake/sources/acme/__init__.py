"""AcmeTrace: Seren/Kalos job CSVs and the DCGM/Prometheus/IPMI utilization CSVs."""

from __future__ import annotations

from pathlib import Path

from tracelake.api.contract import TableInput, combined_plan
from tracelake.api.source import Source
from tracelake.sources.acme import jobs, utilization

PARTS = (jobs, utilization)


def release_data_dir(raw_dir: Path) -> Path:
    """`--raw` may be the release's data/ folder or the cloned repository around it."""
    data = raw_dir / "data"
    if data.is_dir() and ((data / "job_trace").is_dir() or (data / "utilization").is_dir()):
        return data
    return raw_dir


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return combined_plan([part.plan for part in PARTS], release_data_dir(raw_dir), staging,
                         "AcmeTrace files (trace_seren.csv, trace_kalos.csv, utilization CSVs)")


# silver.jobs and gold.jobs_* read every job source: tracelake.crosstrace
SOURCE = Source("acme", plan, generator="tracelake.sources.acme.synth")
