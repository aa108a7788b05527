"""Report section: Zhejiang tasks against the network, from gold.zj_iteration_network.

Per task one figure (PNG) on one UTC time axis: top, every iteration's duration with its
baseline, slow iterations marked by reason (the marker: saturation of an access port or an
uplink, loss, RTT; filled in the colour of the port blamed; hollow when nothing on the path
explains them, a square for a checkpoint save, or there is no network data); bottom, per iteration, the largest
utilisation (max of in/out, silver.zj_port_rates) of the most blamed ports and of the task's
busiest access port, with the blamed iterations shaded in their port's colour. The axis spans
the iterations that have network data, or the whole task when none has. Plus the per-task
summary table.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
from pyspark.sql import functions as F

from tracelake.api.section import Section
from tracelake.api.tables import read_tables, synthetic_tables
from tracelake.sources.zhejiang.transforms.correlate import overlap_join

MAX_TASKS = 6
MAX_PORTS = 6
COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
OTHER_PORT = "#e377c2"  # slow iterations blamed on a port the figure does not draw (grey is the access port's)
ACCESS_PORT = "#aaaaaa"
# a slow iteration's marker says its reason; its colour says the port blamed
MARKERS = {"access_saturation": "o", "uplink_saturation": "^", "loss": "X", "rtt": "D"}
GOLD_COLUMNS = ("iteration", "start_ts", "end_ts", "duration_s", "baseline_s", "is_slow", "is_checkpoint", "coverage",
                "access_util_max", "suspect_device_name", "suspect_port_name", "suspect_reason")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _naive(series: pd.Series) -> pd.Series:
    """UTC timestamps without a zone, which matplotlib's date axis takes as they are."""
    series = pd.to_datetime(series, utc=True)
    return series.dt.tz_convert("UTC").dt.tz_localize(None)


def _short(switch: str, port: str) -> str:
    leaf = switch.split("-ROCE-", 1)[-1].replace(".GPU.S9825", "")
    return f"{leaf} {port}"


def task_iterations(gold, task_id: str) -> pd.DataFrame:
    frame = gold.filter(F.col("task_id") == task_id).select(*GOLD_COLUMNS).toPandas()
    for col in ("start_ts", "end_ts"):
        frame[col] = _naive(frame[col])
    return frame.sort_values("iteration").reset_index(drop=True)


def plotted_window(its: pd.DataFrame) -> pd.DataFrame:
    """The iterations with network data, or all of them when none has any."""
    covered = its[its["coverage"] > 0]
    if covered.empty:
        return its
    lo, hi = covered["start_ts"].min(), covered["end_ts"].max()
    return its[(its["end_ts"] >= lo) & (its["start_ts"] <= hi)]


def suspect_ports(its: pd.DataFrame) -> list[tuple[str, str]]:
    blamed = its[its["suspect_reason"] != "none"]
    counts = blamed.groupby(["suspect_device_name", "suspect_port_name"]).size().sort_values(ascending=False)
    return [tuple(k) for k in counts.index[:MAX_PORTS]]


def port_levels(spark, rates, its: pd.DataFrame, ports: list[tuple[str, str]]) -> pd.DataFrame:
    """Each blamed port's largest utilisation (max of in/out) in every plotted iteration: the
    same bucketed interval join as the gold table, on the counters of those ports only."""
    columns = ["iteration", "device_name", "port_name", "util"]
    if rates is None or not ports or its.empty:
        return pd.DataFrame(columns=columns)
    left = spark.createDataFrame(
        [(int(r.iteration), sw, pt, pd.Timestamp(r.start_ts, tz="UTC").to_pydatetime(),
          pd.Timestamp(r.end_ts, tz="UTC").to_pydatetime())
         for r in its.itertuples() for sw, pt in ports],
        "iteration int, device_name string, port_name string, l_start timestamp, l_end timestamp")
    wanted = spark.createDataFrame(ports, "device_name string, port_name string")
    right = rates.join(wanted, ["device_name", "port_name"], "left_semi").filter(
        F.col("in_util").isNotNull()).select(
        "device_name", "port_name", F.col("interval_start_utc").alias("r_start"),
        F.col("save_time_utc").alias("r_end"), F.greatest("in_util", "out_util").alias("util"))
    pairs = overlap_join(left, right, ["device_name", "port_name"], 60)
    return pairs.groupBy("iteration", "device_name", "port_name").agg(F.max("util").alias("util")).toPandas()


def _segments(ax, its: pd.DataFrame, values: pd.Series, colour: str, label: str, lw: float = 1.4) -> None:
    """One horizontal segment per iteration, from its start to its end."""
    ax.hlines(values, its["start_ts"], its["end_ts"], colors=colour, lw=lw, label=label)


def crop_note(full: pd.DataFrame, shown: pd.DataFrame) -> str:
    """How plotted_window cropped a task's iterations, for the figure's title ("" when it did not)."""
    if len(shown) == len(full) or shown.empty:
        return ""
    return (f"showing iterations {int(shown['iteration'].min())}–{int(shown['iteration'].max())} of "
            f"{int(full['iteration'].min())}–{int(full['iteration'].max())}: those with network data")


def task_figure(task_id: str, its: pd.DataFrame, levels: pd.DataFrame, ports: list[tuple[str, str]],
                path: Path, synthetic: bool = False, cropped: str = "") -> Path:
    plt = _plt()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    colour = {p: COLOURS[i % len(COLOURS)] for i, p in enumerate(ports)}
    top.plot(its["end_ts"], its["duration_s"], color="black", lw=0.8, label="iteration duration (at its end)")
    top.plot(its["end_ts"], its["baseline_s"], color="black", lw=0.8, ls="--", label="baseline: lower quartile of 21")
    slow = its[its["is_slow"]]
    blamed = slow[slow["suspect_reason"] != "none"]
    quiet = slow[slow["suspect_reason"] == "none"]
    saves = quiet[quiet["is_checkpoint"]]
    quiet = quiet[~quiet["is_checkpoint"]]
    if len(saves):
        top.scatter(saves["end_ts"], saves["duration_s"], marker="s", facecolors="none", edgecolors="black", s=40,
                    zorder=3, label=f"slow, a checkpoint save ({len(saves)})")
    if len(quiet):
        top.scatter(quiet["end_ts"], quiet["duration_s"], facecolors="none", edgecolors="black", s=40, zorder=3,
                    label="slow, no network cause" if (quiet["coverage"] > 0).any() else "slow (no network data)")
    for _, it in blamed.iterrows():
        c = colour.get((it["suspect_device_name"], it["suspect_port_name"]), OTHER_PORT)
        for ax in (top, bottom):
            ax.axvspan(it["start_ts"], it["end_ts"], color=c, alpha=0.15, lw=0)
    for port in ports:
        mine = blamed[(blamed["suspect_device_name"] == port[0]) & (blamed["suspect_port_name"] == port[1])]
        for reason, rows in sorted(mine.groupby("suspect_reason")):
            top.scatter(rows["end_ts"], rows["duration_s"], color=colour[port], marker=MARKERS.get(reason, "o"),
                        s=40, zorder=3, label=f"slow, {reason} on {_short(*port)} ({len(rows)})")
    shown = pd.Series(list(zip(blamed["suspect_device_name"], blamed["suspect_port_name"])), index=blamed.index).isin(ports)
    others = blamed[~shown]
    if len(others):
        top.scatter(others["end_ts"], others["duration_s"], color=OTHER_PORT, s=40, zorder=3,
                    label=f"slow, blamed on another port ({len(others)})")
    top.set_ylabel("iteration duration (s)")
    title = f"task {task_id}{' (synthetic data)' if synthetic else ''}: iteration durations and the ports blamed for slow ones"
    top.set_title(title + (f"\n{cropped}" if cropped else ""), fontsize=10)
    top.grid(True, alpha=0.3)
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the plot: it covers nothing

    if its["coverage"].gt(0).any():
        _segments(bottom, its, its["access_util_max"], ACCESS_PORT, "busiest access port of the task", lw=1.0)
        for port in ports:
            mine = levels[(levels["device_name"] == port[0]) & (levels["port_name"] == port[1])]
            rows = its.merge(mine[["iteration", "util"]], on="iteration")
            _segments(bottom, rows, rows["util"], colour[port], _short(*port))
        bottom.set_ylim(0, 1.05)
        bottom.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        bottom.text(0.5, 0.5, "no network data overlaps this task's iterations", ha="center", va="center",
                    transform=bottom.transAxes, color="#666666")
    bottom.set_ylabel("largest utilisation\nin the iteration")
    bottom.set_xlabel("time (UTC)")
    bottom.grid(True, alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summary_table(summary: pd.DataFrame) -> str:
    cols = {"task_id": "task", "iterations": "iterations", "iterations_with_data": "with network data",
            "slow_iterations": "slow", "slow_with_data": "slow with data",
            "slow_explained_by_network": "explained by network", "share_explained_by_network": "share",
            "nic_gbps_median": "NIC Gb/s (median)", "top_suspect_ports": "top suspect ports",
            "top_interferer": "top interfering task"}
    head = "".join(f"<th>{html.escape(v)}</th>" for v in cols.values())
    rows = []
    for _, r in summary.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if c == "top_suspect_ports":
                text = "; ".join(v) if v is not None and len(v) else ""
            elif isinstance(v, float):
                text = "" if pd.isna(v) else f"{v:.2f}"
            else:
                text = str(v)
            cells.append(f"<td>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table><caption>Zhejiang tasks: slow iterations and the network</caption><tr>{head}</tr>"
            + "".join(rows) + "</table>")


def top_interferers(interference) -> dict[str, str]:
    """Per victim task, the other task that was top on its blamed shared ports in the most seconds
    of slowdown (gold.zj_task_interference), as 'TASK: N iterations, S s'."""
    if interference is None:
        return {}
    rows = interference.filter(F.col("party_kind") == "task").toPandas()
    named = {}
    for task_id, mine in rows.groupby("task_id"):
        top = mine.sort_values(["slowdown_s", "party"], ascending=[False, True]).iloc[0]
        n = int(top["slow_iterations"])
        named[task_id] = f"{top['party']}: {n} iteration{'s' if n != 1 else ''}, {top['slowdown_s']:.1f} s"
    return named


def render(engine, config, out_dir: Path) -> Section | None:
    summary, gold, rates, interference = read_tables(
        engine.spark, config, "gold.zj_task_network_summary", "gold.zj_iteration_network", "silver.zj_port_rates",
        "gold.zj_task_interference")
    if summary is None or gold is None:
        return None
    tasks = summary.toPandas().sort_values(["iterations_with_data", "task_id"], ascending=[False, True])
    tasks["top_interferer"] = tasks["task_id"].map(top_interferers(interference)).fillna("")
    synthetic = bool({"bronze.zj_task_log_events", "bronze.zj_port_counters"} & synthetic_tables(config))
    section = Section("Zhejiang: iteration slowdowns and the network" + (" (synthetic data)" if synthetic else ""))
    for task_id in tasks["task_id"][:MAX_TASKS]:
        every = task_iterations(gold, task_id)
        its = plotted_window(every)
        ports = suspect_ports(its)
        levels = port_levels(engine.spark, rates, its, ports)
        section.figures.append(task_figure(task_id, its, levels, ports, out_dir / f"zj_task_{task_id}.png",
                                           synthetic, crop_note(every, its)))
    section.tables_html.append(summary_table(tasks))
    section.notes.append(
        "A slow iteration (≥ 1.10 × the lower quartile of the 21 around it) is blamed on a port of its path "
        "only when "
        "that port's evidence exceeds its own typical level (saturation, loss, RTT) and the extra time was spent "
        "communicating; checkpoint-like pauses are not blamed. Rules: gold.zj_iteration_network (tracelake describe). "
        "A task's figure shows only the iterations that overlap network data when some do (its title says which).")
    if synthetic:
        section.notes.append("The traffic and task logs behind this page are synthetic: generated by "
                             "`tracelake generate zhejiang`, not the release's.")
    return section
