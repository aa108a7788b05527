"""AcmeTrace: Seren/Kalos job CSVs and the DCGM/Prometheus/IPMI utilization CSVs."""

from __future__ import annotations

from pathlib import Path

from tracelake.sources.acme import jobs, utilization
from tracelake.contract import Derived, TableInput, combined_plan

PARTS = (jobs, utilization)
DERIVED: list[Derived] = []  # silver.jobs and gold.jobs_* read every job source: tracelake.crosstrace


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return combined_plan(PARTS, raw_dir, staging, "AcmeTrace files (trace_seren.csv, trace_kalos.csv, utilization CSVs)")
