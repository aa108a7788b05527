"""AcmeTrace: Seren/Kalos job CSVs (+ ground-truth JSON) and utilization CSVs, in the documented
formats. The files are not public; see docs/formats/acmetrace.md."""

from __future__ import annotations

from pathlib import Path

from tracelake.sources.acme.synth import jobs as generate_jobs
from tracelake.sources.acme.synth import utilization as generate_util


def replaces(out: Path) -> list[Path]:
    """What generate writes over: the job CSVs and their ground truth, and the utilization
    folder (a real one would be mixed with generated series)."""
    return [out / "trace_seren.csv", out / "trace_kalos.csv", out / generate_jobs.GROUND_TRUTH, out / "utilization"]


def generate(out: Path, scale: float, seed: int) -> list[Path]:
    return generate_jobs.generate(out, scale, seed) + generate_util.generate(out, scale, seed)
