"""Report section: the AcmeTrace paper's job characterization, from the gold.jobs_* tables.

Figures (PNG): GPU-job run-time CDF by job type per cluster, GPU-time share by job type,
final-state shares, GPU-count CDF by jobs and by GPU time. Tables: the cross-trace GPU-job
duration comparison and per-cluster summaries. Clusters with job types and states (AcmeTrace)
get the per-type figures; every trace appears in the comparison table.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from tracelake.api.section import Section
from tracelake.api.tables import read_tables, synthetic_tables

TABLES = ("gold.jobs_characterization", "gold.jobs_duration_comparison",
          "gold.jobs_duration_quantiles", "gold.jobs_gpu_count_cdf")
TYPE_ORDER = ["Pretrain", "SFT", "MLLM", "Eval", "Debug", "Other", "unknown"]
STATE_ORDER = ["COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL", "RUNNING", "unknown"]
VISIBLE_SHARE = 0.005  # a bar narrower than this share is not seen: its legend entry says so
STATE_COLOURS = {"COMPLETED": "#4c9a2a", "FAILED": "#c0392b", "CANCELLED": "#e6a23c", "PREEMPTED": "#8e44ad",
                 "TIMEOUT": "#2c3e50", "NODE_FAIL": "#7f8c8d", "RUNNING": "#3498db", "unknown": "#bbbbbb"}


def _label(trace: str, cluster: str) -> str:
    return cluster if trace == "acme" else f"{trace} {cluster}"


SMALL_SAMPLE = 30  # a CDF of fewer jobs is drawn dotted, its legend saying so
TRACE_TABLES = {"acme": "bronze.acme_jobs", "itp": "bronze.itp_jobs", "elasticflow": "bronze.elasticflow_jobs"}


def synthetic_note(clusters: list[tuple[str, str]], synthetic: frozenset[str]) -> str:
    """For a figure's title: which of the clusters shown come from generated files."""
    made = [_label(t, c) for t, c in clusters if t in synthetic]
    return f" (synthetic data: {', '.join(made)})" if made else ""


def _ordered(values, order: list[str]) -> list[str]:
    return sorted(set(values), key=lambda v: (order.index(v) if v in order else len(order), v))


def _typed_clusters(char: pd.DataFrame) -> list[tuple[str, str]]:
    """(trace, cluster) pairs that record job types, i.e. where per-type figures mean something."""
    known = char[char["job_type"] != "unknown"]
    return sorted({(t, c) for t, c in zip(known["trace"], known["cluster"])}, key=lambda p: (p[0] != "acme", p))


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def duration_cdf_figure(quantiles: pd.DataFrame, clusters: list[tuple[str, str]], path: Path,
                        synthetic: frozenset[str] = frozenset()) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, len(clusters), figsize=(5.5 * len(clusters), 4), squeeze=False, sharey=True)
    for ax, (trace, cluster) in zip(axes[0], clusters):
        mine = quantiles[(quantiles["trace"] == trace) & (quantiles["cluster"] == cluster)]
        for job_type in _ordered(mine["job_type"], TYPE_ORDER + ["all"]):
            q = mine[mine["job_type"] == job_type].sort_values("q")
            n = int(q["gpu_jobs"].iloc[0])
            style = {"color": "black", "linestyle": "--"} if job_type == "all" else {}
            label = f"{job_type} (n={n:,})"
            if n < SMALL_SAMPLE:
                style = {**style, "linestyle": ":", "alpha": 0.7}
                label = f"{job_type} (n={n:,} < {SMALL_SAMPLE}: rough)"
            ax.step(q["duration_s"].clip(lower=1), q["quantile"], where="post", label=label, **style)
        ax.set_xscale("log")
        made = " (synthetic data)" if trace in synthetic else ""
        ax.set_title(f"{_label(trace, cluster)}{made}: GPU-job run time")
        ax.set_xlabel("run time (s, log)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0][0].set_ylabel("CDF")
    return _save(fig, path)


def _stacked_shares(ax, shares: pd.DataFrame, order: list[str], colours: dict[str, str] | None = None) -> None:
    """shares: index = bar labels, columns = categories, values in 0..1."""
    left = pd.Series(0.0, index=shares.index)
    cmap = _plt().get_cmap("tab10")
    for i, category in enumerate(_ordered(shares.columns, order)):
        values = shares[category]
        if not (values > 0).any():  # no bar to see: no legend entry either
            continue
        colour = (colours or {}).get(category, cmap(i % 10))
        label = category if values.max() >= VISIBLE_SHARE else f"{category} (< {100 * VISIBLE_SHARE:.1g}%)"
        ax.barh(shares.index, values, left=left, label=label, color=colour)
        for y, (v, start) in enumerate(zip(values, left)):
            if v >= 0.05:
                ax.text(start + v / 2, y, f"{100 * v:.1f}%", ha="center", va="center", fontsize=8, color="white")
        left = left + values
    ax.set_xlim(0, 1)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def gpu_time_share_figure(char: pd.DataFrame, clusters: list[tuple[str, str]], path: Path,
                          synthetic: frozenset[str] = frozenset()) -> Path:
    plt = _plt()
    shares = _share_table(char, clusters, "job_type", "gpu_hours")
    counts = _share_table(char, clusters, "job_type", "gpu_jobs")
    fig, axes = plt.subplots(2, 1, figsize=(9, 1.2 + 1.1 * len(clusters) * 2), squeeze=False)
    _stacked_shares(axes[0][0], counts, TYPE_ORDER)
    axes[0][0].set_title("Share of GPU jobs by job type" + synthetic_note(clusters, synthetic))
    _stacked_shares(axes[1][0], shares, TYPE_ORDER)
    axes[1][0].set_title("Share of GPU time by job type" + synthetic_note(clusters, synthetic))
    return _save(fig, path)


def final_state_figure(char: pd.DataFrame, clusters: list[tuple[str, str]], path: Path,
                       synthetic: frozenset[str] = frozenset()) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(9, 1.2 + 1.1 * len(clusters) * 2), squeeze=False)
    _stacked_shares(axes[0][0], _share_table(char, clusters, "final_state", "jobs"), STATE_ORDER, STATE_COLOURS)
    axes[0][0].set_title("Final state: share of all jobs" + synthetic_note(clusters, synthetic))
    _stacked_shares(axes[1][0], _share_table(char, clusters, "final_state", "gpu_jobs"), STATE_ORDER, STATE_COLOURS)
    axes[1][0].set_title("Final state: share of GPU jobs" + synthetic_note(clusters, synthetic))
    return _save(fig, path)


def gpu_count_cdf_figure(cdf: pd.DataFrame, clusters: list[tuple[str, str]], path: Path,
                         synthetic: frozenset[str] = frozenset()) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for trace, cluster in clusters:
        mine = cdf[(cdf["trace"] == trace) & (cdf["cluster"] == cluster)].sort_values("gpu_num")
        label = _label(trace, cluster)
        axes[0].step(mine["gpu_num"], mine["job_cdf"], where="post", label=label)
        axes[1].step(mine["gpu_num"], mine["gpu_time_cdf"], where="post", label=label)
    for ax, what in zip(axes, ("GPU jobs", "GPU time")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs per job (log2)")
        ax.set_title(f"GPU-count CDF by {what}" + synthetic_note(clusters, synthetic), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0].set_ylabel("cumulative share")
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def _share_table(char: pd.DataFrame, clusters: list[tuple[str, str]], by: str, measure: str) -> pd.DataFrame:
    """Rows: cluster labels (first cluster on top); columns: categories of `by`; values: shares."""
    rows = {}
    for trace, cluster in reversed(clusters):
        mine = char[(char["trace"] == trace) & (char["cluster"] == cluster)]
        sums = mine.groupby(by)[measure].sum()
        rows[_label(trace, cluster)] = sums / sums.sum() if sums.sum() else sums * 0.0
    return pd.DataFrame(rows).T.fillna(0.0)


def _html_table(frame: pd.DataFrame, caption: str) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for value in row:
            if isinstance(value, float):
                text = "" if pd.isna(value) else f"{value:,.1f}"
            elif isinstance(value, int):
                text = f"{value:,}"
            else:
                text = str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table><caption>{html.escape(caption)}</caption><tr>{head}</tr>"
            + "".join(body) + "</table>")


def comparison_table(comparison: pd.DataFrame) -> pd.DataFrame:
    frame = comparison.sort_values(["trace", "cluster"], key=lambda s: s.map(lambda v: (v == "all", v)))
    return pd.DataFrame({
        "trace": frame["trace"], "cluster": frame["cluster"], "GPU jobs": frame["gpu_jobs"].astype(int),
        "GPU-hours": frame["gpu_hours"], "median run time (s)": frame["duration_median_s"],
        "mean run time (s)": frame["duration_mean_s"], "p90 run time (s)": frame["duration_p90_s"],
    })


def type_summary(char: pd.DataFrame, clusters: list[tuple[str, str]]) -> pd.DataFrame:
    """Per cluster and job type: jobs, GPU jobs, GPU-hour share (%), failed share of GPU jobs (%)."""
    rows = []
    for trace, cluster in clusters:
        mine = char[(char["trace"] == trace) & (char["cluster"] == cluster)]
        total_hours = mine["gpu_hours"].sum()
        for job_type in _ordered(mine["job_type"], TYPE_ORDER):
            t = mine[mine["job_type"] == job_type]
            gpu_jobs = int(t["gpu_jobs"].sum())
            failed = int(t.loc[t["final_state"] == "FAILED", "gpu_jobs"].sum())
            rows.append({
                "cluster": _label(trace, cluster), "job type": job_type, "jobs": int(t["jobs"].sum()),
                "GPU jobs": gpu_jobs,
                "GPU-hour share (%)": 100.0 * t["gpu_hours"].sum() / total_hours if total_hours else float("nan"),
                "failed GPU jobs (%)": 100.0 * failed / gpu_jobs if gpu_jobs else float("nan"),
            })
    return pd.DataFrame(rows)


def render(engine, config, out_dir: Path) -> Section | None:
    frames = read_tables(engine.spark, config, *TABLES)
    if all(f is None for f in frames):
        return None
    char, comparison, quantiles, cdf = (None if f is None else f.toPandas() for f in frames)
    made = synthetic_tables(config)
    synthetic = frozenset(trace for trace, table in TRACE_TABLES.items() if table in made)
    section = Section("Jobs: AcmeTrace characterization and cross-trace comparison")
    clusters = _typed_clusters(char) if char is not None else []
    if clusters and quantiles is not None:
        section.figures.append(duration_cdf_figure(quantiles, clusters, out_dir / "jobs_duration_cdf_by_type.png",
                                                   synthetic))
    if clusters:
        section.figures.append(gpu_time_share_figure(char, clusters, out_dir / "jobs_gpu_time_share_by_type.png",
                                                     synthetic))
        section.figures.append(final_state_figure(char, clusters, out_dir / "jobs_final_state_shares.png", synthetic))
        section.tables_html.append(_html_table(type_summary(char, clusters), "Jobs per cluster and job type"))
    if cdf is not None and len(cdf):
        shown = clusters or sorted({(t, c) for t, c in zip(cdf["trace"], cdf["cluster"])})[:6]
        section.figures.append(gpu_count_cdf_figure(cdf, shown, out_dir / "jobs_gpu_count_cdf.png", synthetic))
    if comparison is not None:
        section.tables_html.append(_html_table(comparison_table(comparison), "GPU-job run time across traces"))
    section.notes.append(
        "Run time is end − start for every trace (AcmeTrace's released Kalos duration is end − submit). "
        "GPU jobs have gpu_num > 0; percentiles are exact. itp and elasticflow hold the same ITP jobs. "
        f"A run-time CDF of fewer than {SMALL_SAMPLE} jobs is drawn dotted, its legend saying n < {SMALL_SAMPLE}: rough."
    )
    if synthetic:
        section.notes.append("Synthetic data (generated by `tracelake generate`, not the release's): "
                             + ", ".join(sorted(synthetic)) + "; figure titles say which clusters.")
    return section
