"""AcmeTrace: Seren/Kalos job CSVs and the DCGM/Prometheus/IPMI utilization CSVs."""

from __future__ import annotations

from pathlib import Path

from tracelake.acme import jobs, utilization
from tracelake.sources import TableInput, combined_plan

PARTS = (jobs, utilization)
DERIVED = [entry for part in PARTS for entry in part.DERIVED]


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    return combined_plan(PARTS, raw_dir, staging, "AcmeTrace files (trace_seren.csv, trace_kalos.csv, utilization CSVs)")
