"""Who slowed whom: the parties whose traffic crossed a shared port's leaf while a slow iteration
ran (gold.zj_iteration_interference), and per victim task the parties that were top on the port
its slowdowns were blamed on (gold.zj_task_interference).

A shared port is a leaf's spine uplink: every task crossing the leaf may use it, while a task's
access ports are its own. flow.csv names each RoCE queue pair's ends and their leafs but not the
uplink ECMP chose, so a party's traffic is counted at the leaf: the inter-leaf flow rows
(source_switch <> dest_switch) with that leaf at either end.

Rules (defaults of correlate.Rules; the same text is in the tables' schemas):
  shared ports  per slow iteration of gold.zj_iteration_network (is_slow, with an interval),
                the uplinks on its task's path that carry its traffic (silver.zj_task_paths)
                and are its suspect port (is_blamed) or were saturated in its window: the 0.5 s
                counters' util_max >= sat_util (silver.zj_iteration_counters) or port.csv's
                minute utilisation >= minute_sat_util (silver.zj_iteration_port_minutes).
  owners        a NIC IP belongs to a task of silver.zj_task_ranks (nic_ip) from its first
                iteration's start - OWNER_PAD_S to its last iteration's end + OWNER_PAD_S, cut
                at the start of the next task on that NIC (NICs are reused, one task at a time);
                a task without iterations owns none. A flow row is owned at its `time`.
  party         the task owning both ends, or one end when the other end is no task's (a storage
                server: a checkpoint write); any other flow row (IPs of no known task, or of
                two tasks) is 'unattributed'. The iteration's own task is a party too (party_kind
                'victim'; another task's is 'task').
  weight        a flow row covers the minute before its time; its packets (read + write + send)
                count in proportion to the part of that minute inside the iteration's window:
                packets x overlap_s / 60, as if spread evenly over the minute. (The correlation
                counts port.csv minutes whole, as a loss or a peak cannot be split in time; a
                packet count can, and a minute that only grazes the window weighs little.)
  share         a party's weighted packets / all parties' through the leaf in the window; the
                top party (is_top, party_rank 1) has the most, ties by party name. Flow rows
                without packets are left out: no party is named without traffic there.

Interval joins go through time buckets keyed by the leaf (correlate.overlap_join), never a
cross join; the flow rows are cut to the leafs of the shared ports before the join.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracelake.api.exact import exact_mean, exact_sum
from tracelake.sources.zhejiang.clock import cst_hour
from tracelake.sources.zhejiang.transforms.correlate import Rules, overlap_join

UNATTRIBUTED = "unattributed"
RULES = Rules()  # the correlation's defaults: the same saturation thresholds and bucket width
OWNER_PAD_S = 60  # a flow minute ending this close to a task's window is its traffic (NCCL setup, the last all-reduce)
KEYS = ["task_id", "iteration", "device_name", "port_name"]
LEAF = ["task_id", "iteration", "device_name"]


def _seconds(n: int) -> Column:
    return F.expr(f"INTERVAL {n} SECONDS")


def shared_ports(gold: DataFrame, paths: DataFrame, counters: DataFrame, port_minutes: DataFrame,
                 rules: Rules = RULES) -> DataFrame:
    """(slow iteration, shared port) pairs: task_id, iteration, device_name, port_name, start_ts,
    end_ts, slowdown_s, is_blamed, util_max, minute_util_max (rules in the module docstring)."""
    slow = gold.filter(F.col("is_slow") & F.col("start_ts").isNotNull() & F.col("end_ts").isNotNull()
                       & (F.col("start_ts") < F.col("end_ts")))
    uplinks = F.broadcast(paths.filter((F.col("role") == "uplink") & F.col("carries_task_traffic"))
                          .select("task_id", "device_name", "port_name").distinct())
    its = F.broadcast(slow.select("task_id", "iteration"))

    def on_uplinks(evidence: DataFrame, *columns: str) -> DataFrame:
        return (evidence.select(*KEYS, *columns).join(its, ["task_id", "iteration"], "left_semi")
                .join(uplinks, ["task_id", "device_name", "port_name"], "left_semi"))

    levels = on_uplinks(counters, "util_max").join(on_uplinks(port_minutes, "minute_util_max"), KEYS, "full")
    blamed = (slow.filter(F.col("suspect_port_name").isNotNull())
              .select("task_id", "iteration", F.col("suspect_device_name").alias("device_name"),
                      F.col("suspect_port_name").alias("port_name"), F.lit(True).alias("is_blamed"))
              .join(uplinks, ["task_id", "device_name", "port_name"], "left_semi"))
    saturated = ((F.col("util_max") >= F.lit(rules.sat_util))
                 | (F.col("minute_util_max") >= F.lit(rules.minute_sat_util)))
    ports = (levels.join(blamed, KEYS, "full")
             .filter(F.coalesce(F.col("is_blamed"), F.lit(False)) | F.coalesce(saturated, F.lit(False))))
    windows = slow.select("task_id", "iteration", "start_ts", "end_ts",
                          (F.col("duration_s") - F.col("baseline_s")).alias("slowdown_s"))
    return ports.join(windows, ["task_id", "iteration"]).select(
        *KEYS, "start_ts", "end_ts", "slowdown_s", F.coalesce(F.col("is_blamed"), F.lit(False)).alias("is_blamed"),
        "util_max", "minute_util_max")


def nic_owners(ranks: DataFrame, paths: DataFrame) -> DataFrame:
    """nic_ip, task_id, owned_from_ts, owned_to_ts: which task a NIC IP belongs to when (rules
    in the module docstring); the spans of one IP do not overlap. A few rows per task."""
    windows = (paths.filter(F.col("window_start_ts").isNotNull() & F.col("window_end_ts").isNotNull())
               .select("task_id", "window_start_ts", "window_end_ts").distinct())
    nics = ranks.filter(F.col("nic_ip").isNotNull()).select("task_id", "nic_ip").distinct().join(windows, "task_id")
    start = F.col("window_start_ts") - _seconds(OWNER_PAD_S)
    following = F.lead(start).over(Window.partitionBy("nic_ip").orderBy(start, "task_id"))
    end = F.col("window_end_ts") + _seconds(OWNER_PAD_S)
    owned = nics.select("nic_ip", "task_id", start.alias("owned_from_ts"),
                        F.least(end, F.coalesce(following, end)).alias("owned_to_ts"))
    return owned.filter(F.col("owned_from_ts") < F.col("owned_to_ts"))


def leaf_traffic(flows: DataFrame, owners: DataFrame, leafs: DataFrame) -> DataFrame:
    """The inter-leaf flow rows with packets at each of their two leafs that is one of `leafs`
    (device_name), with their party: device_name, party, time, packets, r_start, r_end (the
    minute before time)."""
    packets = (F.coalesce(F.col("read_pkts"), F.lit(0)) + F.coalesce(F.col("write_pkts"), F.lit(0))
               + F.coalesce(F.col("send_pkts"), F.lit(0)))
    ends = (flows.filter(F.col("source_switch").isNotNull() & F.col("dest_switch").isNotNull()
                         & (F.col("source_switch") != F.col("dest_switch")))
            .select(F.explode(F.array("source_switch", "dest_switch")).alias("device_name"), "source_ip", "dest_ip",
                    "time", packets.alias("packets"))
            .filter(F.col("packets") > 0)
            .join(F.broadcast(leafs.select("device_name").distinct()), "device_name", "left_semi"))

    def owner(ip: str, alias: str) -> tuple[DataFrame, Column]:
        named = owners.select(F.col("nic_ip").alias(f"{alias}_ip"), F.col("task_id").alias(alias),
                              F.col("owned_from_ts").alias(f"{alias}_from"), F.col("owned_to_ts").alias(f"{alias}_to"))
        return F.broadcast(named), ((F.col(ip) == F.col(f"{alias}_ip")) & (F.col("time") > F.col(f"{alias}_from"))
                                    & (F.col("time") <= F.col(f"{alias}_to")))

    src, on_src = owner("source_ip", "_src")
    dst, on_dst = owner("dest_ip", "_dst")
    owned = ends.join(src, on_src, "left").join(dst, on_dst, "left")
    s, d = F.col("_src"), F.col("_dst")
    party = (F.when(s.isNotNull() & (d.isNull() | (d == s)), s)
             .when(s.isNull() & d.isNotNull(), d)
             .otherwise(F.lit(UNATTRIBUTED)))
    return owned.select("device_name", party.alias("party"), "time", "packets",
                        (F.col("time") - _seconds(60)).alias("r_start"), F.col("time").alias("r_end"))


def iteration_interference(ports: DataFrame, traffic: DataFrame, rules: Rules = RULES) -> DataFrame:
    """gold.zj_iteration_interference from shared_ports `ports` and leaf_traffic `traffic`: one
    row per (slow iteration, shared port, party) with traffic through the port's leaf in the
    iteration's window (rules in the module docstring)."""
    windows = ports.select(*LEAF, F.col("start_ts").alias("l_start"), F.col("end_ts").alias("l_end")).distinct()
    pairs = overlap_join(windows, traffic, ["device_name"], rules.bucket_s)
    per_minute = pairs.groupBy(*LEAF, "party", "time").agg(
        F.sum("packets").alias("_packets"), F.max("overlap_s").alias("_overlap_s"),
        F.count(F.lit(1)).alias("_rows"))
    per_party = per_minute.groupBy(*LEAF, "party").agg(
        exact_sum(F.col("_packets") * F.col("_overlap_s") / F.lit(60.0)).alias("packets"),
        exact_sum(F.col("_overlap_s")).alias("overlap_s"),
        F.sum("_rows").cast("int").alias("flow_rows"))
    leaf = Window.partitionBy(*LEAF)
    ranked = per_party.select(
        "*", (F.col("packets") / exact_sum(F.col("packets"), leaf)).alias("share"),
        F.row_number().over(leaf.orderBy(F.col("packets").desc(), "party")).cast("int").alias("party_rank"))
    kind = (F.when(F.col("party") == F.col("task_id"), F.lit("victim"))
            .when(F.col("party") == UNATTRIBUTED, F.lit(UNATTRIBUTED)).otherwise(F.lit("task")))
    return ranked.join(ports, LEAF).select(
        "task_id", "iteration", cst_hour(F.col("start_ts")).alias("hour_cst"), "start_ts", "end_ts", "slowdown_s",
        "device_name", "port_name", "is_blamed", "util_max", "minute_util_max", "party", kind.alias("party_kind"),
        "packets", "share", "overlap_s", "flow_rows", "party_rank", (F.col("party_rank") == 1).alias("is_top"))


def interference(gold: DataFrame, paths: DataFrame, ranks: DataFrame, counters: DataFrame, port_minutes: DataFrame,
                 flows: DataFrame, rules: Rules = RULES) -> DataFrame:
    """gold.zj_iteration_interference from its inputs (the whole build)."""
    ports = shared_ports(gold, paths, counters, port_minutes, rules)
    return iteration_interference(ports, leaf_traffic(flows, nic_owners(ranks, paths), ports), rules)


def task_interference(rows: DataFrame) -> DataFrame:
    """gold.zj_task_interference: per (victim task, other party) the victim's slow iterations
    where the party was top on the shared port the iteration is blamed on, and the seconds of
    slowdown they hold (duration_s - baseline_s). An iteration has one suspect port, so it
    counts once, for one party."""
    top = rows.filter(F.col("is_top") & F.col("is_blamed") & (F.col("party_kind") != "victim"))
    return top.groupBy("task_id", "party", "party_kind").agg(
        F.count(F.lit(1)).cast("int").alias("slow_iterations"),
        F.coalesce(exact_sum(F.col("slowdown_s")), F.lit(0.0)).alias("slowdown_s"),
        exact_mean(F.col("share")).alias("mean_share"),
        F.min("share").alias("min_share"),
        F.countDistinct(F.concat_ws(" ", "device_name", "port_name")).cast("int").alias("ports"),
        F.min("start_ts").alias("first_start_ts"), F.max("end_ts").alias("last_end_ts"),
    )
