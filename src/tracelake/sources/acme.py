"""AcmeTrace: Seren/Kalos job CSVs and the DCGM/Prometheus/IPMI utilization CSVs."""

from __future__ import annotations

from pathlib import Path

from tracelake.acme import jobs, utilization
from tracelake.errors import TracelakeError
from tracelake.sources import TableInput

PARTS = (jobs, utilization)
DERIVED = [entry for part in PARTS for entry in part.DERIVED]


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    inputs = [item for part in PARTS for item in part.plan(raw_dir, staging)]
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no AcmeTrace files (trace_seren.csv, trace_kalos.csv, utilization CSVs)")
    return inputs
