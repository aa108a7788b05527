"""`tracelake demo`: a tour of the product on what this machine has.

Every source is ingested: the real releases where ../shared/data (the configured raw roots)
holds them, generated files in the exact formats otherwise (AcmeTrace and the Zeus Alibaba groups
are not public; the real Zhejiang task and traffic hour do not overlap in time, so the
correlation runs on a generated hour of traffic with tasks in it). Then the cross-layer
correlation (part of the Zhejiang ingest), headline numbers, the slowest explained iterations
and the HTML report."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from tracelake.config import Config
from tracelake.engine import Engine
from tracelake.run.context import TableStats
from tracelake.run.pipeline import Step, run_ingest
from tracelake.run.registry import generate, truth_lines

# the public ITP/ElasticFlow release, as the tour looks for it (the itp source reads both)
ITP_ARCHIVES = ("raw-traces.tar.gz", "elasticflow-traces.tar.gz")
# generated data sizes: small enough for the whole tour to stay well under 3 minutes on 2 cores
ACME_SCALE = 0.01
ZEUS_SCALE = 0.05
ITP_SCALE = 0.05
ZJ_SCALE = 0.02
ZJ_TASKS = 2

HEADLINES = {
    "ITP jobs / distinct ids / GPU-hours":
        "SELECT count(*), count(DISTINCT job_id), round(sum(duration * num_gpu) / 3600, 1) FROM bronze.itp_jobs",
    "ElasticFlow rows by variant":
        "SELECT concat_ws(' ', collect_list(concat(variant, '=', n))) FROM "
        "(SELECT variant, count(*) AS n FROM bronze.elasticflow_jobs GROUP BY variant ORDER BY variant)",
    "Zeus gold rows / rows without a reached target":
        "SELECT count(*), sum(CASE WHEN time_to_accuracy_s IS NULL THEN 1 ELSE 0 END) "
        "FROM gold.zeus_time_energy_to_accuracy",
    "AcmeTrace jobs / GPU jobs / GPU-hours":
        "SELECT sum(jobs), sum(gpu_jobs), round(sum(gpu_hours), 1) FROM gold.jobs_characterization "
        "WHERE trace = 'acme'",
    "Cross-trace jobs by trace":
        "SELECT concat_ws(' ', collect_list(concat(trace, '=', n))) FROM "
        "(SELECT trace, count(*) AS n FROM silver.jobs GROUP BY trace ORDER BY trace)",
    "Zhejiang 0.5 s port counter rows / switch ports":
        "SELECT count(*), count(DISTINCT device_name, port_name) FROM silver.zj_port_rates",
    "Zhejiang iterations / slow / slow and explained":
        "SELECT count(*), sum(CASE WHEN is_slow THEN 1 ELSE 0 END), "
        "sum(CASE WHEN is_slow AND suspect_reason <> 'none' THEN 1 ELSE 0 END) FROM gold.zj_iteration_network",
}

SLOWEST = (
    "SELECT task_id, iteration, round(duration_s, 2) AS duration_s, round(slowdown, 2) AS slowdown, "
    "suspect_reason, suspect_device_name, suspect_port_name, round(suspect_score, 2) AS score "
    "FROM gold.zj_iteration_network WHERE is_slow AND suspect_reason <> 'none' "
    "ORDER BY slowdown DESC, task_id, iteration LIMIT 5"
)


@dataclass
class DemoSummary:
    stats: list[TableStats]
    lines: list[str]
    report: list[Path] = field(default_factory=list)


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _itp_dir(config: Config, work: Path) -> tuple[Path, str]:
    real = Path(config.raw_roots.get("itp", ""))
    if all((real / name).is_file() for name in ITP_ARCHIVES):
        return real, f"ITP/ElasticFlow: real archives ({real})"
    generate("itp", _fresh(work / "itp"), scale=ITP_SCALE, seed=1)
    return work / "itp", "ITP/ElasticFlow: generated (no real release found)"


def _zeus_dir(config: Config, work: Path) -> tuple[Path, str]:
    target = _fresh(work / "zeus")
    real = Path(config.raw_roots.get("zeus", ""))
    copied = sorted(real.glob("summary_*.csv")) if real.is_dir() else []
    for path in copied:
        shutil.copy2(path, target / path.name)
    generate("zeus", target, scale=ZEUS_SCALE, seed=1)
    origin = f"Zeus: real train/power traces ({real})" if copied else "Zeus: generated train/power traces"
    return target, origin + " + generated Alibaba groups (not public)"


def _acme_dir(work: Path) -> tuple[Path, str]:
    generate("acme", _fresh(work / "acme"), scale=ACME_SCALE, seed=1)
    return work / "acme", "AcmeTrace: generated Seren/Kalos jobs and utilization (not public)"


def _zhejiang_dir(work: Path) -> tuple[Path, str]:
    generate("zhejiang", _fresh(work / "zhejiang"), scale=ZJ_SCALE, seed=1, hours=1, tasks=ZJ_TASKS)
    return work / "zhejiang", (
        f"Zhejiang: generated hour of traffic with {ZJ_TASKS} training tasks in it (the real task and "
        "traffic hour do not overlap in time)"
    )


def _headlines(engine: Engine) -> list[str]:
    lines = []
    for label, sql in HEADLINES.items():
        try:
            values = engine.spark.sql(sql).collect()[0]
        except Exception as exc:  # noqa: BLE001 - a missing table is reported, not fatal
            lines.append(f"{label}: unavailable ({str(exc).splitlines()[0][:120]})")
            continue
        lines.append(f"{label}: {' / '.join(str(v) for v in values)}")
    return lines


def _slowest(engine: Engine) -> list[str]:
    rows = engine.spark.sql(SLOWEST).collect()
    if not rows:
        return ["slowest explained iterations: none found"]
    out = ["slowest explained iterations (gold.zj_iteration_network):"]
    for r in rows:
        out.append(
            f"  {r.task_id} iter {r.iteration}: {r.duration_s} s = {r.slowdown}x baseline -> "
            f"{r.suspect_reason} at {r.suspect_device_name} {r.suspect_port_name} (score {r.score})"
        )
    return out


def _local_home(config: Config) -> Path:
    """Where the demo's generated raw files and its report go: beside the lake, or for a lake on
    object storage in its staging folder on this machine (one per lake)."""
    return Path(config.staging_dir) / "demo" if "://" in config.lake_root else Path(config.lake_root)


def run_demo(engine: Engine, config: Config, step: Step) -> DemoSummary:
    work = _local_home(config) / "_demo_raw"
    plan = [
        ("itp", _itp_dir(config, work)),
        ("zeus", _zeus_dir(config, work)),
        ("acme", _acme_dir(work)),
        ("zhejiang", _zhejiang_dir(work)),
    ]
    stats: list[TableStats] = []
    for source, (raw_dir, _) in plan:
        stats += run_ingest(engine, config, source, str(raw_dir), step)
    report_dir = _local_home(config) / "_report"
    from tracelake.app.report import build_report

    with step("report: figures and HTML"):
        report = build_report(engine, config, report_dir)
    lines = ["inputs:"] + [f"  {origin}" for _, (_, origin) in plan]
    lines.append(f"lake: {config.lake_root}")
    lines += _headlines(engine)
    lines += _slowest(engine)
    for source, (raw_dir, _) in plan:
        lines += truth_lines(engine.spark, source, raw_dir)
    lines.append(f"report: {report[0]} ({len(report) - 1} figures)")
    lines.append('next: tracelake query "SELECT * FROM gold.zj_task_network_summary" · tracelake tables')
    return DemoSummary(_last_per_table(stats), lines, report)


def _last_per_table(stats: list[TableStats]) -> list[TableStats]:
    """A derived table rebuilt after several sources (silver.jobs) appears once, as it ended."""
    last = {s.table: s for s in stats}
    return [last[t] for t in dict.fromkeys(s.table for s in stats)]
