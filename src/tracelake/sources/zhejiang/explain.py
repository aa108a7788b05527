"""`tracelake explain TASK ITERATION`: the chain behind one iteration's verdict, in a terminal.

gold.zj_iteration_network says whether the network explains a slow iteration and at which port;
this page says why: the iteration's duration against its baseline and run segment, every port
of the task's path with its evidence beside the port's typical level (the correlation's own
path_port_evidence, recomputed for this one iteration from the stored evidence tables), the
rule that picked the suspect or the one that stopped it, the parties on a shared port where the
interference table is in the lake, and what was missing from the window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.tables import read_tables
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang.clock import shift_hour
from tracelake.sources.zhejiang.transforms.correlate import Rules, carrying_ports, path_port_evidence

ITERATIONS, PATHS = "silver.zj_task_iterations", "silver.zj_task_paths"
NETWORK, INTERFERENCE = "gold.zj_iteration_network", "gold.zj_iteration_interference"
COUNTERS, PORT_MINUTES = "silver.zj_iteration_counters", "silver.zj_iteration_port_minutes"
NEAREST = 3  # iterations named when the one asked for has no record
RULES = Rules()  # the correlation's defaults: the rules its gold table was built with


@dataclass(frozen=True)
class Chain:
    """Everything the page prints, collected from the lake (kept apart from the wording so a
    test can hold the figures)."""

    verdict: dict
    record: dict
    ports: list[dict]  # path_port_evidence rows of the iteration, with the port's leaf
    path: list[dict]  # the ports carrying the task's traffic: role, device_name, port_name, leaf
    parties: list[dict]  # gold.zj_iteration_interference rows of the iteration ([] without the table)
    interference_built: bool


def _rows(frame: DataFrame) -> list[dict]:
    return [r.asDict() for r in frame.collect()]


def _missing(spark: SparkSession, config: Config, task: str, iteration: int, network: DataFrame) -> TracelakeError:
    tasks = sorted(r.task_id for r in network.select("task_id").distinct().collect())
    if task not in tasks:
        from difflib import get_close_matches

        near = get_close_matches(task, tasks, n=3, cutoff=0.5) or tasks[:3]
        return TracelakeError(f"explain: no task {task} in gold.zj_iteration_network of the lake at "
                              f"{config.lake_root}; tasks there: {', '.join(near)}{', …' if len(tasks) > 3 else ''}")
    mine = network.filter(F.col("task_id") == task).select("iteration")
    below = [r.iteration for r in mine.filter(F.col("iteration") < iteration).orderBy(F.col("iteration").desc())
             .limit(NEAREST).collect()]
    above = [r.iteration for r in mine.filter(F.col("iteration") > iteration).orderBy("iteration")
             .limit(NEAREST).collect()]
    near = sorted(below + above, key=lambda i: (abs(i - iteration), i))[:NEAREST]
    return TracelakeError(f"explain: task {task} has no record ending at iteration {iteration} (a record names "
                          f"the last step it covers); nearest: {', '.join(map(str, sorted(near)))}")


def collect(spark: SparkSession, config: Config, task: str, iteration: int, rules: Rules = RULES) -> Chain:
    network, iterations, paths, counters, minutes, parties = read_tables(
        spark, config, NETWORK, ITERATIONS, PATHS, COUNTERS, PORT_MINUTES, INTERFERENCE)
    if network is None or iterations is None or paths is None:
        raise TracelakeError(f"explain: the lake at {config.lake_root} has no correlation tables "
                             "(gold.zj_iteration_network): ingest zhejiang, with its task logs, first")
    mine = (F.col("task_id") == task) & (F.col("iteration") == iteration)
    verdict = network.filter(mine).collect()
    if not verdict:
        raise _missing(spark, config, task, iteration, network)
    record = iterations.filter(mine).first()
    task_only = F.col("task_id") == task
    paths, iterations = paths.filter(task_only), iterations.filter(task_only)
    empty = {name: spark.createDataFrame([], frame_schema) for name, frame_schema in (
        (COUNTERS, "task_id string, iteration int, hour_cst string, device_name string, port_name string, "
                   "counter_rows bigint, rated_s double, util_max double, util_mean double, hot_s double, "
                   "busy_s double, gbps double"),
        (PORT_MINUTES, "task_id string, iteration int, hour_cst string, device_name string, port_name string, "
                       "minute_rows bigint, loss_pkts bigint, minute_util_max double, rtt_max_ns bigint, "
                       "flow_rtts_ns array<bigint>"))}
    counters = counters.filter(task_only) if counters is not None else empty[COUNTERS]
    minutes = minutes.filter(task_only) if minutes is not None else empty[PORT_MINUTES]
    hour = verdict[0].asDict().get("hour_cst")  # none in a lake migrated from before it, until its next build
    if hour is not None:  # the typical levels read the hours within typical_hours only
        around = [shift_hour(hour, d) for d in range(-rules.typical_hours, rules.typical_hours + 1)]
        counters, minutes = (f.filter(F.col("hour_cst").isin(around)) for f in (counters, minutes))
    only = spark.createDataFrame([(task, iteration)], "task_id string, iteration int")
    leafs = paths.select("device_name", "port_name", "leaf").distinct()
    evidence = path_port_evidence(paths, iterations, counters, minutes, rules, only=only)
    ports = _rows(evidence.join(leafs, ["device_name", "port_name"], "left"))
    path = _rows(carrying_ports(paths).join(leafs, ["device_name", "port_name"], "left"))
    found = _rows(parties.filter(mine)) if parties is not None else []
    return Chain(verdict[0].asDict(), record.asDict() if record else {}, ports, path, found, parties is not None)


# ---------------------------------------------------------------- wording

def _n(value, digits: int = 2, unit: str = "") -> str:
    return "–" if value is None else f"{value:.{digits}f}{unit}"


def _pct(value) -> str:
    return "–" if value is None else f"{value * 100:.0f}%"


def _port(row: dict) -> str:
    return f"{row.get('leaf') or row['device_name']} {row['port_name']}"


def _natural(text: str) -> tuple:
    """Leaf-5 before Leaf-13, port 1/0/9 before 1/0/10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _ts(value) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _header(chain: Chain, rules: Rules) -> list[str]:
    v, r = chain.verdict, chain.record
    steps = r.get("iterations_in_record") or 1
    covers = f"steps {v['iteration'] - steps + 1}–{v['iteration']} in one record" if steps > 1 else "one step"
    segment = r.get("restarts_before", 0)
    run = f"run segment {segment + 1} ({segment} restart{'s' if segment != 1 else ''} before it" + (
        "; the first record after a restart" if r.get("after_restart") else "") + ")"
    slow = "slow" if v["is_slow"] else "not slow"
    lines = [f"task {v['task_id']}, iteration {v['iteration']} ({covers}), {run}",
             f"  {_ts(v['start_ts'])} -> {_ts(v['end_ts'])} UTC",
             f"  duration {_n(v['duration_s'])} s, baseline {_n(v['baseline_s'])} s (lower quartile of the "
             f"{2 * rules.baseline_k + 1} records around it in its segment), slowdown {_n(v['slowdown'])}x: {slow} "
             f"(slow at >= {rules.slow_factor:.2f}x)"]
    if v["is_checkpoint"]:
        lines.append("  a checkpoint was saved inside it")
    if v["comm_busy_s"] is not None:
        shaped = {True: "yes", False: "no", None: "cannot tell"}[v["network_shaped"]]
        lines.append(f"  communication: {_n(v['comm_busy_s'])} s busy on its access ports against a baseline of "
                     f"{_n(v['comm_busy_baseline_s'])} s; the extra time spent communicating: {shaped}")
    return lines


def _evidence(chain: Chain, rules: Rules) -> list[str]:
    v = chain.verdict
    suspect = (v["suspect_device_name"], v["suspect_port_name"])
    header = ("  port (role)", "counted", "util max (typ)", "time >= 0.90 (typ)", "loss pkts (typ)",
              "minute util (typ)", "elevated flows")
    body = []
    for p in sorted(chain.ports, key=lambda p: (p["role"] != "access", _natural(_port(p)))):
        mark = "* " if (p["device_name"], p["port_name"]) == suspect else "  "
        body.append((f"{mark}{_port(p)} ({p['role']})", "yes" if p["counted"] else "no",
                     f"{_n(p['util_max'])} ({_n(p['typical_util_max'])})",
                     f"{_pct(p['hot_share'])} ({_pct(p['typical_hot_share'])})",
                     f"{'–' if p['loss_pkts'] is None else p['loss_pkts']} ({_n(p['typical_loss_pkts'], 0)})",
                     f"{_n(p['minute_util_max'])} ({_n(p['typical_minute_util_max'])})",
                     str(p["elevated_flows"] or 0)))
    if not body:
        return [f"evidence: no counter, port.csv or flow row of its {len(chain.path)} path ports overlaps it"]
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    fmt = "".join(f"{{:<{w}}}  " for w in widths)
    return [f"evidence on the task's path ({len(chain.path)} ports carry its traffic, {len(body)} with data; "
            f"typical = the port's median over the task's iterations within {rules.typical_hours} hours; * the suspect):",
            fmt.format(*header).rstrip(),
            *(fmt.format(*row).rstrip() for row in body)]


def _why(chain: Chain, rules: Rules) -> list[str]:
    v = chain.verdict
    if v["suspect_reason"] != "none":
        port = next((p for p in chain.ports if (p["device_name"], p["port_name"]) ==
                     (v["suspect_device_name"], v["suspect_port_name"])), None)
        where = f"{v['suspect_device_name']} {v['suspect_port_name']}"
        line = f"suspect: {v['suspect_reason']} at {where} (score {_n(v['suspect_score'])})"
        if port is None:
            return [line]
        reason = v["suspect_reason"]
        if reason.endswith("saturation") and port["counted"]:
            why = (f"its counters reached {_n(port['util_max'])} utilisation against a typical {_n(port['typical_util_max'])}, "
                   f"{_pct(port['hot_share'])} of the rated time at >= {rules.sat_util:.2f} against a typical "
                   f"{_pct(port['typical_hot_share'])}")
        elif reason.endswith("saturation"):
            why = (f"its counters rated too little of the iteration; port.csv's minute utilisation reached "
                   f"{_n(port['minute_util_max'])} against a typical {_n(port['typical_minute_util_max'])}")
        elif reason == "loss":
            why = (f"{port['loss_pkts']} packets lost in the overlapping minutes against a typical "
                   f"{_n(port['typical_loss_pkts'], 0)}")
        else:
            why = f"it carried the most flows with an RTT >= {rules.rtt_factor:g}x its typical largest ({port['elevated_flows']})"
        order = ("the task's own access ports come before shared uplinks, saturation before loss, RTT last"
                 if reason != "access_saturation" else "an access port no other task uses comes first")
        return [line, f"  why: {why}; {order}"]
    if not v["is_slow"]:
        return [f"no suspect: not slow ({_n(v['slowdown'])}x the baseline), so nothing to explain"]
    if v["coverage"] == 0:
        return ["no suspect: no network data overlaps it (coverage 0)"]
    if chain.record.get("after_restart"):
        return ["no suspect: the first record after a restart, whose warm-up is never blamed on the network"]
    if v["network_shaped"] is False:
        extra = (v["duration_s"] or 0) - (v["baseline_s"] or 0)
        grew = (v["comm_busy_s"] or 0) - (v["comm_busy_baseline_s"] or 0)
        return [f"no suspect: its path stayed quiet: communication grew by {_n(grew)} s, "
                f"less than {rules.min_comm_share:.0%} of its extra {_n(extra)} s"
                + (" (a checkpoint save)" if v["is_checkpoint"] else "")]
    return ["no suspect: no path port showed saturation, loss or elevated RTT beyond its typical level"]


def _parties(chain: Chain) -> list[str]:
    if not chain.interference_built:
        return []
    if not chain.parties:
        return ["shared ports: no other party's traffic was attributed on its shared ports"]
    lines = ["parties on its shared ports (share of the inter-leaf traffic in the overlapping minutes):"]
    by_port: dict[tuple, list[dict]] = {}
    for p in chain.parties:
        by_port.setdefault((p["device_name"], p["port_name"]), []).append(p)
    for (device, port), rows in sorted(by_port.items()):
        leaf = next((q.get("leaf") for q in chain.path if (q["device_name"], q["port_name"]) == (device, port)), None)
        lines.append(f"  {leaf or device} {port}:")
        for p in sorted(rows, key=lambda p: (-(p["share"] or 0), p["party"])):
            top = "  <- top" if p["is_top"] else ""
            lines.append(f"    {p['party']:<28} {_pct(p['share']):>5}{top}")
    return lines


def _coverage(chain: Chain) -> list[str]:
    v = chain.verdict
    seen = {(p["device_name"], p["port_name"]) for p in chain.ports
            if p["counter_rows"] is not None or p["minute_rows"] is not None}
    missing = [f"{_port(p)} ({p['role']})" for p in sorted(chain.path, key=lambda p: (p["role"] != "access", _natural(_port(p))))
               if (p["device_name"], p["port_name"]) not in seen]
    line = (f"coverage {_n(v['coverage'])}: {v['ports_with_data']} of {v['ports_expected']} path ports with counters "
            f"or port.csv rows, {v['nics_with_flows']} of {v['nics_expected']} NICs seen in intra-task flows")
    if not missing:
        return [line]
    shown = ", ".join(missing[:6]) + (f", and {len(missing) - 6} more" if len(missing) > 6 else "")
    return [line, f"  no data from: {shown}"]


def render(chain: Chain, rules: Rules = RULES) -> list[str]:
    sections = [_header(chain, rules), _evidence(chain, rules), _why(chain, rules), _parties(chain), _coverage(chain)]
    lines: list[str] = []
    for section in (s for s in sections if s):
        if lines:
            lines.append("")
        lines += section
    return lines


def explain(spark: SparkSession, config: Config, task: str, iteration: int) -> list[str]:
    """The page's lines for one iteration of one task."""
    return render(collect(spark, config, task, iteration))
