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


QUIRK_REASON = "duplicate Time row"  # what the parser says of a cell whose Time its series repeats


def held_against_truth(spark, raw_dir: Path) -> str | None:
    """The demo's line on a lake built from generated utilization files: the rows set aside are
    the generator's injected repeated Times (utilization/manifest.json counts them), not a fault
    of the parser; None for files the generator did not write."""
    import json

    manifest = Path(raw_dir) / "utilization" / "manifest.json"
    if not manifest.is_file():
        return None
    injected = json.loads(manifest.read_text(encoding="utf-8"))
    parts = []
    for table in ("acme_utilization", "acme_power"):
        [(total, quirks)] = spark.sql(
            f"SELECT count(*), count_if(array_contains(reasons, '{QUIRK_REASON}')) FROM quarantine.{table}").collect()
        parts.append(f"bronze.{table} {quirks:,} of {total:,} quarantined "
                     f"({injected[f'bronze.{table}']['duplicate_cells']:,} injected)")
    return "generated quirks, repeated Times the AcmeTrace generator injects and the parser sets aside: " + ", ".join(parts)
