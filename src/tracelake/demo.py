"""`tracelake demo`: ingest what this machine has — the real releases when ../shared/data (or
the configured raw roots) holds them, generated files otherwise — and print headline numbers."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tracelake.config import Config
from tracelake.engine import Engine
from tracelake.registry import generate
from tracelake.ingest import TableStats
from tracelake.pipeline import Step, run_ingest
from tracelake.sources.itp import ELASTICFLOW_ARCHIVE, RAW_ARCHIVE

HEADLINES = {
    "ITP jobs / distinct ids / GPU-hours":
        "SELECT count(*), count(DISTINCT job_id), round(sum(duration * num_gpu) / 3600, 1) FROM bronze.itp_jobs",
    "ElasticFlow rows by variant":
        "SELECT concat_ws(' ', collect_list(concat(variant, '=', n))) FROM "
        "(SELECT variant, count(*) AS n FROM bronze.elasticflow_jobs GROUP BY variant ORDER BY variant)",
    "Zeus gold rows / rows without a reached target":
        "SELECT count(*), sum(CASE WHEN time_to_accuracy_s IS NULL THEN 1 ELSE 0 END) "
        "FROM gold.zeus_time_energy_to_accuracy",
}


@dataclass
class DemoSummary:
    stats: list[TableStats]
    lines: list[str]


def _itp_dir(config: Config, work: Path) -> tuple[Path, str]:
    real = Path(config.raw_roots.get("itp", ""))
    if (real / RAW_ARCHIVE).is_file() and (real / ELASTICFLOW_ARCHIVE).is_file():
        return real, f"real ITP/ElasticFlow archives from {real}"
    generate("itp", work / "itp", scale=0.05, seed=1)
    return work / "itp", "generated ITP/ElasticFlow archives (no real release found)"


def _zeus_dir(config: Config, work: Path) -> tuple[Path, str]:
    target = work / "zeus"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    real = Path(config.raw_roots.get("zeus", ""))
    copied = sorted(real.glob("summary_*.csv")) if real.is_dir() else []
    for path in copied:
        shutil.copy2(path, target / path.name)
    generate("zeus", target, scale=0.05, seed=1)
    origin = f"real Zeus traces from {real}" if copied else "generated Zeus traces"
    return target, origin + " + generated Alibaba groups (not public)"


def run_demo(engine: Engine, config: Config, step: Step) -> DemoSummary:
    work = Path(config.lake_root) / "_demo_raw"
    itp_dir, itp_origin = _itp_dir(config, work)
    zeus_dir, zeus_origin = _zeus_dir(config, work)
    stats = run_ingest(engine, config, "itp", str(itp_dir), step)
    stats += run_ingest(engine, config, "zeus", str(zeus_dir), step)
    lines = [f"inputs: {itp_origin}; {zeus_origin}", f"lake: {config.lake_root}"]
    for label, sql in HEADLINES.items():
        values = engine.spark.sql(sql).collect()[0]
        lines.append(f"{label}: {' / '.join(str(v) for v in values)}")
    lines.append('next: tracelake query "SELECT * FROM quarantine.itp_jobs" · tracelake tables')
    return DemoSummary(stats, lines)
