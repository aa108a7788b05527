"""Zhejiang cross-layer correlation: is a training iteration's slowdown explained by the network?

Join path (docs/formats/zhejiang.md §7): task ranks → their leaf access ports and NIC IPs, plus the 30
spine uplinks (FourHundredGigE1/0/33–62) of every leaf the task touches (silver.zj_task_paths);
each iteration's interval is then matched against that path's network records.

Interval joins use time buckets, never a cross join: both sides get the bucket numbers
floor(t / bucket_s) their interval spans, are equi-joined on (key, bucket), and a pair is kept
only in its first common bucket (so a pair spanning two buckets counts once) and only when the
intervals overlap. The overlap in seconds weights every time average.

Time spans of the network records (all UTC):
  silver.zj_port_rates  a row with a rate covers (interval_start_utc, save_time_utc]; a row
                        without one (first, repeated, gap, no_new_data) is data at its poll instant only.
  bronze.zj_port_minute a row covers the minute before its `time`, (time − 60 s, time].
  bronze.zj_flow        the same minute before `time` (flow records are per minute [INF]).
  bronze.zj_link        the minute before `start_time` (the interval is undocumented).
Minute records count whole in every iteration they overlap (they cannot be split in time).

Rules of gold.zj_iteration_network (defaults in `Rules`; the same text is in its schema):
  baseline_s   lower quartile (baseline_q) of the durations of the 2k+1 records centred on the
               iteration within its run segment (k = baseline_k, itself included; fewer at a
               segment's ends; a restart starts a segment: silver.zj_task_restarts). Iteration time
               has a floor and slowdowns only add, so the quartile stays at the floor even when
               most neighbours are slowed (back-to-back episodes defeat a median).
  is_slow      slowdown = duration_s / baseline_s >= slow_factor.
  port evidence per (iteration, port), each measure compared with the port's own typical level:
               its median over the task's iterations that have it for that port and start within
               typical_hours hours of this one's start hour (all-reduce bursts make access ports
               busy in every iteration, so only the excess counts; a bounded stretch lets a
               new hour change only the verdicts near it, however long the task has run).
    counted     the port's counters give a rate for >= min_time_cover of the iteration (a
                collector outage or missing rows leave holes); shares are of that rated time.
    saturation  counted: util_max >= sat_util, util_max - typical >= min_util_excess, and the
                share of the rated time at >= sat_util exceeds its typical share by
                min_hot_share_excess. Not counted: the port.csv minute utilisation instead, at
                >= minute_sat_util and >= min_minute_util_excess above typical. Reason
                access_saturation or uplink_saturation by the port's role.
    loss        InPktsLoss + OutPktsLoss of the overlapping minutes >= min_loss_pkts and above
                the port's typical loss.
    rtt         the port carries the most elevated flows of the iteration, and strictly more
                than any other port: a flow is elevated when its Rtt >= rtt_factor x the port's
                typical largest Rtt. RTT names a NIC pair, not one port, so it is the weakest
                evidence and used only when no port shows saturation or loss.
  network_shaped  a slowdown caused by the network stretches the task's communication: the
               median over counted access ports of the seconds at >= busy_util (scaled to the
               whole iteration) must exceed its baseline (same window and quantile) by >= min_comm_share of
               the extra duration. A slow iteration whose path stays quiet (a checkpoint save)
               fails this and is blamed on no port. Null (test not applied) when no access port
               is counted or no communication is seen around it.
  suspect      only for a slow iteration with coverage > 0 that is not shown to be non-network
               (network_shaped true or null) and is not the first after a restart (its warm-up).
               Most specific evidence first: the task's own access
               ports (no other task uses them) before shared uplinks (the ECMP path of its flows is
               unknown, and another task may load them), saturation before loss on each; then
               rtt. Within a kind, the largest excess; ties by switch, port. Otherwise
               suspect_reason 'none' and no port. No data in the interval: coverage 0 and 'none'.
  coverage     (path ports with any counter or port.csv row in the interval + task NIC IPs seen
               in an intra-task flow row in the interval) / (path ports + NIC IPs), counting only
               what carries the task's traffic (see task_paths).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracelake.api.exact import exact_mean, exact_sum
from tracelake.sources.zhejiang.clock import cst_hour
from tracelake.sources.zhejiang.layout import UPLINK_PORTS
from tracelake.sources.zhejiang.transforms.hourly import full_port_name

MICROS = 1_000_000
POINT_US = 1000  # a record without a rate is data at its instant: a 1 ms span ending there


@dataclass(frozen=True)
class Rules:
    bucket_s: int = 60
    baseline_k: int = 10
    baseline_q: float = 0.25
    slow_factor: float = 1.10
    sat_util: float = 0.90
    min_util_excess: float = 0.10
    min_hot_share_excess: float = 0.20
    minute_sat_util: float = 0.60
    min_minute_util_excess: float = 0.30
    busy_util: float = 0.10
    min_comm_share: float = 0.5
    min_time_cover: float = 0.5
    rtt_factor: float = 3.0
    min_loss_pkts: int = 1
    top_ports: int = 5
    typical_hours: int = 3


# ---------------------------------------------------------------- the task's path

def _line_rate(port: Column) -> Column:
    return (F.when(port.startswith("FourHundredGigE"), F.lit(400_000_000_000))
            .when(port.startswith("TwoHundredGigE"), F.lit(200_000_000_000))
            .otherwise(F.lit(None).cast("bigint")))


def task_paths(ranks: DataFrame, iterations: DataFrame) -> DataFrame:
    """silver.zj_task_paths: per task, every access port its ranks use and the uplinks of every
    leaf it touches, with the task's window. An access port carries the task's traffic when the
    task spans more than one host (one host talks over NVLink); an uplink when the task spans
    more than one rail group (rail-optimised cabling keeps same-group traffic under its leaf)."""
    placed = ranks.filter(F.col("device_name").isNotNull() & F.col("port_name").isNotNull())
    shape = ranks.groupBy("task_id").agg(
        F.countDistinct(F.coalesce("host_name", "host_ip", "pod")).alias("hosts"),
        F.countDistinct("rail_group").alias("groups"))
    window = iterations.groupBy("task_id").agg(
        F.min("start_ts").alias("window_start_ts"), F.max("end_ts").alias("window_end_ts"))
    access = placed.groupBy("task_id", "device_name", "port_name").agg(
        F.min("leaf").alias("leaf"), F.min("rail_group").alias("rail_group"),
        F.min("nic_ip").alias("nic_ip"), F.min("host_name").alias("host_name"),
        F.count(F.lit(1)).cast("int").alias("ranks"),
    ).withColumn("role", F.lit("access"))
    leafs = placed.groupBy("task_id", "device_name").agg(
        F.min("leaf").alias("leaf"), F.min("rail_group").alias("rail_group"),
        F.count(F.lit(1)).cast("int").alias("ranks"))
    uplinks = leafs.select(
        "*", F.explode(F.array(*[F.lit(p) for p in UPLINK_PORTS])).alias("port_name"),
        F.lit(None).cast("string").alias("nic_ip"), F.lit(None).cast("string").alias("host_name"),
        F.lit("uplink").alias("role"))
    paths = access.unionByName(uplinks).join(shape, "task_id").join(window, "task_id", "left")
    carries = F.when(F.col("role") == "access", F.col("hosts") > 1).otherwise(F.col("groups") > 1)
    return paths.select(
        "task_id", "window_start_ts", "window_end_ts", "role", "device_name", "port_name", "leaf",
        "rail_group", "nic_ip", "host_name", "ranks", carries.alias("carries_task_traffic"),
        _line_rate(F.col("port_name")).alias("line_rate_bps"),
    )


# ---------------------------------------------------------------- bucketed interval join

def _buckets(df: DataFrame, start: str, end: str, width_us: int, first: str) -> DataFrame:
    lo = F.floor(F.unix_micros(F.col(start)) / F.lit(width_us))
    hi = F.floor(F.unix_micros(F.col(end)) / F.lit(width_us))
    return df.select("*", lo.alias(first), F.explode(F.sequence(lo, hi)).alias("_bucket"))


def overlap_join(left: DataFrame, right: DataFrame, on: list[str], bucket_s: int) -> DataFrame:
    """Pairs of rows with equal `on` keys whose intervals overlap, with `overlap_s`.

    `left` spans [l_start, l_end], `right` [r_start, r_end] (timestamps, start < end). Both are
    exploded to the buckets they touch and equi-joined on (on, bucket); a pair is kept in its
    first common bucket only, so it appears once however many buckets it shares."""
    width = int(bucket_s * MICROS)
    lb = _buckets(left, "l_start", "l_end", width, "_lb0")
    rb = _buckets(right, "r_start", "r_end", width, "_rb0")
    joined = lb.join(rb, [*on, "_bucket"])
    overlap_us = (F.least(F.unix_micros("l_end"), F.unix_micros("r_end"))
                  - F.greatest(F.unix_micros("l_start"), F.unix_micros("r_start")))
    return (joined.filter((F.col("_bucket") == F.greatest("_lb0", "_rb0"))
                          & (F.col("l_start") < F.col("r_end")) & (F.col("r_start") < F.col("l_end")))
            .withColumn("overlap_s", overlap_us / F.lit(float(MICROS)))
            .drop("_bucket", "_lb0", "_rb0"))


# ---------------------------------------------------------------- per (iteration, port) evidence

def _minute_span(ts: str) -> tuple[Column, Column]:
    return F.col(ts) - F.expr("INTERVAL 60 SECONDS"), F.col(ts)


def timed_iterations(iterations: DataFrame) -> DataFrame:
    """The iterations with an interval (both ends known, start before end): the only ones that
    can overlap evidence."""
    return iterations.filter(F.col("start_ts").isNotNull() & F.col("end_ts").isNotNull()
                             & (F.col("start_ts") < F.col("end_ts")))


def iteration_spans(iterations: DataFrame) -> DataFrame:
    """task_id, iteration, l_start, l_end of the timed iterations: the left side of an overlap join."""
    return timed_iterations(iterations).select(
        "task_id", "iteration", F.col("start_ts").alias("l_start"), F.col("end_ts").alias("l_end"))


def carrying_ports(paths: DataFrame) -> DataFrame:
    """task_id, role, device_name, port_name of the path ports that carry the task's traffic."""
    return paths.filter(F.col("carries_task_traffic")).select("task_id", "role", "device_name", "port_name")


def port_iterations(paths: DataFrame, iterations: DataFrame) -> DataFrame:
    """(task, iteration, port) for every iteration with an interval and every port carrying the
    task's traffic: the left side of every port join."""
    return timed_iterations(iterations).select(
        "task_id", "iteration", "duration_s", F.col("start_ts").alias("l_start"),
        F.col("end_ts").alias("l_end")).join(carrying_ports(paths), "task_id")


def counter_evidence(pi: DataFrame, rates: DataFrame, rules: Rules) -> DataFrame:
    """0.5 s counters per (task, iteration, port): utilisation max and time-weighted mean, seconds
    at ≥ sat_util (hot) and at ≥ busy_util (busy), achieved Gb/s, rows seen. The join and the
    aggregation key each (task, port) by a number (its rank among the path's few hundred), the
    names joined back on the result: one rebuild at the 15th hour of a two-task day, in process,
    3 + 3 runs alternated: 1.18-1.24 s and 1.9-2.0 s of the engine's CPU against 1.43-1.61 s and
    2.2-2.7 s keyed by the strings, the same rows."""
    keys = ["task_id", "device_name", "port_name"]
    # one partition of a few hundred rows; the literal only keeps the client from warning of it
    ranked = pi.select(*keys).distinct().select(*keys, F.row_number().over(
        Window.partitionBy(F.lit(0)).orderBy(*keys)).alias("_pid"))
    has_rate = F.col("interval_start_utc").isNotNull() & F.col("in_util").isNotNull()
    point = F.timestamp_micros(F.unix_micros("save_time_utc") - F.lit(POINT_US))
    r = rates.join(F.broadcast(ranked.drop("task_id")), ["device_name", "port_name"]).select(
        "_pid",
        F.when(has_rate, F.col("interval_start_utc")).otherwise(point).alias("r_start"),
        F.col("save_time_utc").alias("r_end"),
        F.when(has_rate, F.greatest("in_util", "out_util")).alias("util"),
        F.when(has_rate, F.greatest("in_bytes_per_s", "out_bytes_per_s")).alias("bytes_per_s"),
    )
    left = pi.join(F.broadcast(ranked), keys).select("_pid", "iteration", "l_start", "l_end")
    pairs = overlap_join(left, r, ["_pid"], rules.bucket_s)
    rated = F.col("util").isNotNull()
    ov = F.col("overlap_s")
    rated_s = exact_sum(F.when(rated, ov))
    per_pid = pairs.groupBy("_pid", "iteration").agg(
        F.count(F.lit(1)).alias("counter_rows"),
        rated_s.alias("rated_s"),
        F.max("util").alias("util_max"),
        (exact_sum(F.col("util") * ov) / rated_s).alias("util_mean"),
        exact_sum(F.when(F.col("util") >= rules.sat_util, ov).otherwise(F.lit(0.0))).alias("hot_s"),
        exact_sum(F.when(F.col("util") >= rules.busy_util, ov).otherwise(F.lit(0.0))).alias("busy_s"),
        (exact_sum(F.col("bytes_per_s") * ov) * 8 / rated_s / 1e9).alias("gbps"),
    )
    return per_pid.join(F.broadcast(ranked), "_pid").select(
        *keys[:1], "iteration", *keys[1:], "counter_rows", "rated_s", "util_max", "util_mean", "hot_s", "busy_s", "gbps")


def minute_evidence(pi: DataFrame, minutes: DataFrame, rules: Rules) -> DataFrame:
    """port.csv per (task, iteration, port): lost packets (in + out) and the largest minute
    utilisation (max of in, out) of the overlapping minutes."""
    wanted = pi.select("device_name", "port_name").distinct()
    start, end = _minute_span("time")
    m = minutes.join(F.broadcast(wanted), ["device_name", "port_name"], "left_semi").select(
        "device_name", "port_name", start.alias("r_start"), end.alias("r_end"),
        (F.coalesce("in_pkts_loss", F.lit(0)) + F.coalesce("out_pkts_loss", F.lit(0))).alias("lost"),
        (F.greatest("in_use_ratio", "out_use_ratio") / 100.0).alias("minute_util"))
    pairs = overlap_join(pi, m, ["device_name", "port_name"], rules.bucket_s)
    return pairs.groupBy("task_id", "iteration", "device_name", "port_name").agg(
        F.count(F.lit(1)).alias("minute_rows"), F.sum("lost").cast("bigint").alias("loss_pkts"),
        F.max("minute_util").alias("minute_util_max"))


def intra_task_flows(paths: DataFrame, flows: DataFrame) -> DataFrame:
    """Flow rows with both endpoints among one task's NIC IPs, with both endpoints' access ports."""
    nics = paths.filter((F.col("role") == "access") & F.col("nic_ip").isNotNull()).select(
        "task_id", "nic_ip", "device_name", "port_name")
    src = nics.select("task_id", F.col("nic_ip").alias("source_ip"),
                      F.col("device_name").alias("src_device"), F.col("port_name").alias("src_port"))
    dst = nics.select("task_id", F.col("nic_ip").alias("dest_ip"),
                      F.col("device_name").alias("dst_device"), F.col("port_name").alias("dst_port"))
    start, end = _minute_span("time")
    return (flows.select("source_ip", "dest_ip", "rtt_ns", "nak_pkts", start.alias("r_start"), end.alias("r_end"))
            .join(F.broadcast(src), "source_ip").join(F.broadcast(dst), ["task_id", "dest_ip"]))


def _flow_pairs(iterations: DataFrame, task_flows: DataFrame, rules: Rules) -> DataFrame:
    return overlap_join(iteration_spans(iterations), task_flows, ["task_id"], rules.bucket_s)


def flows_per_iteration(pairs: DataFrame) -> DataFrame:
    """Per iteration: RTT p99, NAKs and NIC IPs seen in the task's flows overlapping it."""
    return pairs.groupBy("task_id", "iteration").agg(
        F.percentile("rtt_ns", 0.99).cast("bigint").alias("flow_rtt_p99_ns"),
        F.sum("nak_pkts").cast("bigint").alias("flow_nak_pkts"),
        F.size(F.array_distinct(F.flatten(F.collect_list(F.array("source_ip", "dest_ip"))))).alias("nics_with_flows"),
    )


def flow_rtts_per_port(pairs: DataFrame) -> DataFrame:
    """Per iteration and access port: the largest RTT of the task's flows through the port and
    all of their RTTs (ascending, comma-separated: Sail 0.7.2 fails some writes of an array
    column read back from Parquet), from which flows_elevated counts those above the port's
    typical."""
    ends = pairs.select("task_id", "iteration", "rtt_ns", F.explode(F.array(
        F.struct(F.col("src_device").alias("device_name"), F.col("src_port").alias("port_name")),
        F.struct(F.col("dst_device").alias("device_name"), F.col("dst_port").alias("port_name")),
    )).alias("end")).select("task_id", "iteration", "rtt_ns", "end.device_name", "end.port_name")
    return ends.groupBy("task_id", "iteration", "device_name", "port_name").agg(
        F.max("rtt_ns").alias("rtt_max_ns"),
        F.array_join(F.sort_array(F.collect_list(F.col("rtt_ns").cast("bigint"))).cast("array<string>"), ",")
        .alias("flow_rtts_ns"))


def elevated_flows(rules: Rules) -> Column:
    """Flows through the port at >= rtt_factor x its typical largest RTT (typical_rtt_max_ns), from
    the row's RTT list; null where the row has no flow."""
    factor = F.lit(rules.rtt_factor)
    rtts = F.split(F.coalesce(F.col("flow_rtts_ns"), F.lit("")), ",")
    elevated = F.size(F.filter(rtts, lambda rtt: (F.length(rtt) > 0)
                               & (rtt.cast("bigint") >= factor * F.col("typical_rtt_max_ns"))))
    return F.when(F.col("rtt_max_ns").isNotNull(), elevated.cast("bigint"))


def link_evidence(paths: DataFrame, iterations: DataFrame, links: DataFrame, rules: Rules) -> DataFrame:
    """ECN-marked packets on the task's links (leaf side, and the spine side of its uplinks)."""
    ports = carrying_ports(paths).select("task_id", "device_name", "port_name").distinct()
    start, end = _minute_span("start_time")
    leaf_side = links.select(
        "device_name", full_port_name(F.col("if_abbreviated_name")).alias("port_name"),
        "ecn_marked_count", start.alias("r_start"), end.alias("r_end"))
    spine_side = links.filter(F.col("dst_port").isNotNull() & (F.length(F.trim("dst_port")) > 0)).select(
        F.col("dst_device").alias("device_name"), F.col("dst_port").alias("port_name"),
        "ecn_marked_count", start.alias("r_start"), end.alias("r_end"))
    marked = leaf_side.unionByName(spine_side).join(F.broadcast(ports), ["device_name", "port_name"])
    pairs = overlap_join(iteration_spans(iterations), marked, ["task_id"], rules.bucket_s)
    return pairs.groupBy("task_id", "iteration").agg(F.sum("ecn_marked_count").cast("bigint").alias("ecn_marks"))


# ---------------------------------------------------------------- baselines and suspects

def _centred(rules: Rules) -> Window:
    """The 2k+1 records centred on each, within its run segment (a restart starts another: the
    steps before and after it are different runs of the job)."""
    return (Window.partitionBy("task_id", "restarts_before").orderBy("iteration")
            .rowsBetween(-rules.baseline_k, rules.baseline_k))


def sliding_quantile(col: str, window: Window, q: float) -> Column:
    """Quantile q (linear between neighbours) of the non-null values in a sliding frame. Spark
    rejects percentile() over a frame, so it is taken from the sorted values the frame collects
    (middle); Sail 0.7 keeps nulls in a windowed collect_list (Spark drops them)."""
    return middle(F.collect_list(col).over(window), q)


def with_baseline(iterations: DataFrame, rules: Rules) -> DataFrame:
    """baseline_s: the lower quartile (baseline_q) of the durations of the 2k+1 records centred
    on each, itself included. An iteration has a floor and slowdowns only add to it, so a low
    quantile stays at the floor even when most neighbours are slowed (back-to-back episodes)."""
    base = sliding_quantile("duration_s", _centred(rules), rules.baseline_q)
    slowdown = F.col("duration_s") / F.col("baseline_s")
    return (iterations.select("task_id", "iteration", "start_ts", "end_ts", "duration_s", "is_checkpoint",
                              "restarts_before", "after_restart", base.alias("baseline_s"))
            .withColumn("slowdown", F.when(F.col("baseline_s") > 0, slowdown))
            .withColumn("is_slow", F.coalesce(F.col("slowdown") >= F.lit(rules.slow_factor), F.lit(False))))


PORT = ["task_id", "device_name", "port_name"]
PORT_KEYS = ["task_id", "iteration", "device_name", "port_name"]
TYPICAL = ("util_max", "hot_share", "loss_pkts", "minute_util_max")  # the typical_* levels verdicts read


def start_hour(ts: Column) -> Column:
    """The hour an instant lies in, as whole hours since the epoch: CST and UTC hours share their
    bounds, so it numbers the CST hour folders too."""
    return F.floor(F.unix_seconds(ts) / 3600)


def path_members(paths: DataFrame, iterations: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(the iterations with an interval: task_id, iteration, duration_s, _hour (start_hour); the
    ports carrying the task's traffic: task_id, role, device_name, port_name): port_iterations'
    two sides, joined to the evidence one at a time instead of as their product."""
    its = timed_iterations(iterations).select("task_id", "iteration", "duration_s",
                                              start_hour(F.col("start_ts")).alias("_hour"))
    return its, carrying_ports(paths)


def _hot_share(rules: Rules) -> tuple[Column, Column]:
    """(counted, hot_share) of a row with the counter evidence and its iteration's duration_s."""
    counted = F.coalesce(F.col("rated_s"), F.lit(0.0)) >= F.lit(rules.min_time_cover) * F.col("duration_s")
    return counted, F.when(counted, F.col("hot_s") / F.col("rated_s"))


def middle(values: Column, q: float = 0.5) -> Column:
    """Quantile q (linear between neighbours, as percentile's) of an array's non-null values;
    null when it has none."""
    ordered = F.array_sort(F.array_compact(values))
    pos = (F.size(ordered) - 1) * F.lit(q)
    lo, hi = F.floor(pos).cast("int"), F.ceil(pos).cast("int")
    low = F.get(ordered, lo)
    return F.when(F.size(ordered) > 0, low + (F.get(ordered, hi) - low) * (pos - lo))


def typical_levels(its: DataFrame, ports: DataFrame, counters: DataFrame, port_minutes: DataFrame,
                   rules: Rules) -> DataFrame:
    """Per (task, port, _hour) the typical level of each measure for the iterations starting in
    that hour: the median over the task's iterations that have it for that port and start within
    typical_hours of it (path_members' iterations and ports; the largest RTT over every row of
    port_minutes of a timed iteration). Each evidence table's values are gathered per hour once,
    and each hour's lists are handed to the 2 x typical_hours + 1 hours around it, so a row is
    moved once, not once per hour that reads it."""
    counted, hot_share = _hot_share(rules)
    on_path = ports.select(*PORT, F.lit(True).alias("_on_path"))
    timed = its.select("task_id", "iteration", "duration_s", "_hour", F.lit(True).alias("_timed"))
    member = F.coalesce(F.col("_on_path") & F.col("_timed"), F.lit(False))  # a row of port_iterations'
    around = F.explode(F.sequence(F.col("_hour") - rules.typical_hours, F.col("_hour") + rules.typical_hours))

    def levels(evidence: DataFrame, measures: dict[str, Column]) -> DataFrame:
        rows = (evidence.join(F.broadcast(on_path), PORT, "left")
                .join(F.broadcast(timed), ["task_id", "iteration"], "inner"))
        per_hour = rows.groupBy(*PORT, "_hour").agg(*[F.collect_list(c).alias(n) for n, c in measures.items()])
        spread = per_hour.select(*PORT, around.alias("_judged"), *measures)
        return spread.groupBy(*PORT, F.col("_judged").alias("_hour")).agg(
            *[middle(F.flatten(F.collect_list(n))).alias(f"typical_{n}") for n in measures])

    rated = levels(counters, {"util_max": F.when(member, F.col("util_max")), "hot_share": F.when(member, hot_share)})
    minutes = levels(port_minutes, {"loss_pkts": F.when(member, F.col("loss_pkts").cast("double")),
                                    "minute_util_max": F.when(member, F.col("minute_util_max")),
                                    "rtt_max_ns": F.col("rtt_max_ns").cast("double")})
    return rated.join(minutes, [*PORT, "_hour"], "full")


def port_evidence(its: DataFrame, ports: DataFrame, counters: DataFrame, port_minutes: DataFrame,
                  typical: DataFrame, rules: Rules) -> DataFrame:
    """One row per (task, iteration, port) of `its` x `ports` with any data, with each measure's
    typical level (typical_levels). Counter shares are of the time the counters rate (collector
    outages and missing rows leave holes) and only when they rate at least min_time_cover of the
    iteration (`counted`)."""
    wanted = F.broadcast(its.select("task_id", "iteration"))  # before the outer join: it keeps no filter
    counters, port_minutes = (f.join(wanted, ["task_id", "iteration"], "left_semi") for f in (counters, port_minutes))
    ev = (counters.join(port_minutes, PORT_KEYS, "full").join(F.broadcast(ports), PORT)
          .join(F.broadcast(its), ["task_id", "iteration"])
          .filter(F.col("counter_rows").isNotNull() | F.col("minute_rows").isNotNull()
                  | F.col("rtt_max_ns").isNotNull())
          .join(typical, [*PORT, "_hour"], "left"))
    counted, hot_share = _hot_share(rules)
    return ev.select(*PORT_KEYS, "role", "counter_rows", "minute_rows", "util_max", "util_mean", "gbps", "loss_pkts",
                     "minute_util_max", elevated_flows(rules).alias("elevated_flows"), counted.alias("counted"),
                     hot_share.alias("hot_share"),
                     F.when(counted, F.col("busy_s") / F.col("rated_s") * F.col("duration_s")).alias("busy_est_s"),
                     *[f"typical_{m}" for m in TYPICAL])


def _candidates(ev: DataFrame, rules: Rules) -> DataFrame:
    """The best suspect port of each iteration (whether or not the iteration is slow)."""
    def typical(measure: str) -> Column:
        return F.coalesce(F.col(f"typical_{measure}"), F.lit(0.0))

    counted = F.col("counted")
    sat_counters = (counted & (F.col("util_max") >= rules.sat_util)
                    & (F.col("util_max") - typical("util_max") >= rules.min_util_excess)
                    & (F.col("hot_share") - typical("hot_share") >= rules.min_hot_share_excess))
    sat_minutes = (~counted & (F.col("minute_util_max") >= rules.minute_sat_util)
                   & (F.col("minute_util_max") - typical("minute_util_max") >= rules.min_minute_util_excess))
    sat = F.coalesce(sat_counters, F.lit(False)) | F.coalesce(sat_minutes, F.lit(False))
    loss = F.coalesce((F.col("loss_pkts") >= rules.min_loss_pkts) & (F.col("loss_pkts") > typical("loss_pkts")),
                      F.lit(False))
    score = F.when(counted, F.col("hot_share") - typical("hot_share")).otherwise(
        F.col("minute_util_max") - typical("minute_util_max"))
    port_rows = ev.select(
        "task_id", "iteration", "device_name", "port_name",
        F.when(sat, F.concat(F.col("role"), F.lit("_saturation"))).when(loss, F.lit("loss")).alias("reason"),
        # the task's own access ports first (no other task uses them), then shared uplinks
        (F.when(F.col("role") == "access", 0).otherwise(2) + F.when(sat, 1).otherwise(2)).alias("rank"),
        F.when(sat, score).otherwise(F.col("loss_pkts") - typical("loss_pkts")).cast("double").alias("score"),
    ).filter(F.col("reason").isNotNull())
    # RTT names a NIC pair: blame a port only when it carries more elevated flows than any other
    per_iteration = Window.partitionBy("task_id", "iteration")
    rtt = (ev.filter(F.col("elevated_flows") > 0)
           .select("task_id", "iteration", "device_name", "port_name", "elevated_flows",
                   F.max("elevated_flows").over(per_iteration).alias("_top"))
           .filter(F.col("elevated_flows") == F.col("_top"))
           .withColumn("_ties", F.count(F.lit(1)).over(per_iteration))
           .filter(F.col("_ties") == 1)
           .select("task_id", "iteration", "device_name", "port_name", F.lit("rtt").alias("reason"),
                   F.lit(5).alias("rank"), F.col("elevated_flows").cast("double").alias("score")))
    best = Window.partitionBy("task_id", "iteration").orderBy(
        "rank", F.col("score").desc(), "device_name", "port_name")
    return (port_rows.unionByName(rtt).withColumn("_n", F.row_number().over(best)).filter(F.col("_n") == 1)
            .select("task_id", "iteration", F.col("device_name").alias("cand_switch"),
                    F.col("port_name").alias("cand_port"), F.col("reason").alias("cand_reason"),
                    F.col("score").alias("cand_score")))


def _per_iteration(ev: DataFrame) -> DataFrame:
    access, uplink = F.col("role") == "access", F.col("role") == "uplink"
    has_data = F.col("counter_rows").isNotNull() | F.col("minute_rows").isNotNull()
    return ev.groupBy("task_id", "iteration").agg(
        F.max(F.when(access, F.col("util_max"))).alias("access_util_max"),
        exact_mean(F.when(access, F.col("util_mean"))).alias("access_util_mean"),
        F.max(F.when(uplink, F.col("util_max"))).alias("uplink_util_max"),
        F.median(F.when(access, F.col("busy_est_s"))).alias("comm_busy_s"),
        F.median(F.when(access, F.col("gbps"))).alias("nic_gbps_median"),
        F.sum("loss_pkts").cast("bigint").alias("loss_pkts"),
        F.count(F.when(has_data, F.lit(1))).cast("int").alias("ports_with_data"),
    )


def _expected(paths: DataFrame) -> DataFrame:
    carrying = F.col("carries_task_traffic")
    return paths.groupBy("task_id").agg(
        F.count(F.when(carrying, F.lit(1))).cast("int").alias("ports_expected"),
        F.countDistinct(F.when(carrying & (F.col("role") == "access"), F.col("nic_ip")))
        .cast("int").alias("nics_expected"),
    )


def by_start_hour(evidence: DataFrame, iterations: DataFrame) -> DataFrame:
    """`evidence` with hour_cst, the CST hour folder its iteration starts in: the evidence
    tables are partitioned by (task_id, hour_cst), so an hourly ingest rewrites the few
    hours of a task it touches, not the task. A left join: evidence of an iteration without a
    start (none is made) would keep a null there and fail the gate, never vanish."""
    hours = iterations.select("task_id", "iteration", cst_hour(F.col("start_ts")).alias("hour_cst"))
    return evidence.join(hours, ["task_id", "iteration"], "left")


def iteration_counters(paths: DataFrame, iterations: DataFrame, rates: DataFrame, rules: Rules = Rules()) -> DataFrame:
    """silver.zj_iteration_counters: counter_evidence of every (iteration, path port). Each row
    depends only on the rate rows overlapping its iteration, so it is kept as a table and an
    hourly ingest recomputes only the iterations near its hours (the 0.5 s counters are the
    one network input too large to read again for every hour of a long task)."""
    return by_start_hour(counter_evidence(port_iterations(paths, iterations), rates, rules), iterations)


def iteration_port_minutes(paths: DataFrame, iterations: DataFrame, minutes: DataFrame, flows: DataFrame,
                           rules: Rules = Rules()) -> DataFrame:
    """silver.zj_iteration_port_minutes: per (iteration, path port) the port.csv minutes (loss,
    minute utilisation) and the task's flows through the port (largest RTT, every RTT). Like
    the counter evidence, each row depends only on the records around its own iteration."""
    keys = ["task_id", "iteration", "device_name", "port_name"]
    minute = minute_evidence(port_iterations(paths, iterations), minutes, rules)
    rtts = flow_rtts_per_port(_flow_pairs(iterations, intra_task_flows(paths, flows), rules))
    return by_start_hour(minute.join(rtts, keys, "full"), iterations)


def iteration_flows(paths: DataFrame, iterations: DataFrame, flows: DataFrame, links: DataFrame,
                    rules: Rules = Rules()) -> DataFrame:
    """silver.zj_iteration_flows: per iteration, the task's flows (RTT p99, NAKs, NIC IPs seen)
    and the ECN marks on its links; each row depends only on the records around its iteration."""
    per_iteration = flows_per_iteration(_flow_pairs(iterations, intra_task_flows(paths, flows), rules))
    return by_start_hour(per_iteration.join(link_evidence(paths, iterations, links, rules), ["task_id", "iteration"],
                                            "full"), iterations)


def iteration_network(paths: DataFrame, iterations: DataFrame, rates: DataFrame, minutes: DataFrame,
                      flows: DataFrame, links: DataFrame, rules: Rules = Rules()) -> DataFrame:
    """gold.zj_iteration_network from the network tables: one row per (task_id, iteration);
    rules in the module docstring."""
    return network_verdicts(paths, iterations, iteration_counters(paths, iterations, rates, rules),
                            iteration_port_minutes(paths, iterations, minutes, flows, rules),
                            iteration_flows(paths, iterations, flows, links, rules), rules)


def network_verdicts(paths: DataFrame, iterations: DataFrame, counters: DataFrame, port_minutes: DataFrame,
                     flows: DataFrame, rules: Rules = Rules()) -> DataFrame:
    """gold.zj_iteration_network from the evidence kept per iteration (iteration_counters,
    iteration_port_minutes, iteration_flows): what needs the whole task (baselines, each port's
    typical level, the suspects) is computed here, from those small tables alone."""
    ports = path_port_evidence(paths, iterations, counters, port_minutes, rules)
    return verdicts(paths, iterations, ports, flows, rules)


# the per-iteration columns of gold.zj_iteration_network that only the iteration's own evidence sets
PER_ITERATION = ("access_util_max", "access_util_mean", "uplink_util_max", "comm_busy_s", "nic_gbps_median",
                 "loss_pkts", "ports_with_data")


def may_blame(iterations: DataFrame, rules: Rules = Rules()) -> DataFrame:
    """(task_id, iteration) of the iterations a port can be blamed for: slow, and not the first
    after a restart. Only their verdicts read the ports' typical levels (see verdicts' blame)."""
    its = with_baseline(iterations, rules)
    return its.filter(F.col("is_slow") & ~F.col("after_restart")).select("task_id", "iteration")


def path_port_evidence(paths: DataFrame, iterations: DataFrame, counters: DataFrame, port_minutes: DataFrame,
                       rules: Rules = Rules(), only: DataFrame | None = None) -> DataFrame:
    """port_evidence of the tasks' iterations (of `only`'s (task_id, iteration), when given) from
    the stored evidence tables, each port judged against its typical level over the task's
    iterations within typical_hours of the iteration's (typical_levels): verdicts reads it twice
    (per iteration, suspects), so a caller may store it once in between."""
    counters, port_minutes = (f.drop("hour_cst") for f in (counters, port_minutes))
    its, ports = path_members(paths, iterations)
    typical = typical_levels(its, ports, counters, port_minutes, rules)
    if only is not None:
        its = its.join(only, ["task_id", "iteration"], "left_semi")
    return port_evidence(its, ports, counters, port_minutes, typical, rules)


def network_hour() -> Column:
    """hour_cst of a row of gold.zj_iteration_network: the CST hour folder its iteration starts in
    (the evidence tables' partition), or ends in when it has no start."""
    return cst_hour(F.coalesce(F.col("start_ts"), F.col("end_ts")))


def verdicts(paths: DataFrame, iterations: DataFrame, ev: DataFrame, flows: DataFrame,
             rules: Rules = Rules(), known: DataFrame | None = None) -> DataFrame:
    """gold.zj_iteration_network from path_port_evidence `ev` and iteration_flows `flows`. With
    `known` (task_id, iteration and PER_ITERATION of the iterations `ev` leaves out: a stored
    gold's), `ev` may hold only the iterations whose evidence changed and those a port can be
    blamed for (may_blame): the others' verdicts read their own PER_ITERATION and no port."""
    per_iteration = _per_iteration(ev)
    if known is not None:
        per_iteration = per_iteration.unionByName(known.select("task_id", "iteration", *PER_ITERATION))
    flows = flows.drop("hour_cst")
    its = with_baseline(iterations, rules)
    keys = ["task_id", "iteration"]
    out = (its.join(per_iteration, keys, "left").join(flows, keys, "left")
           .join(_expected(paths), "task_id", "left").join(_candidates(ev, rules), keys, "left"))
    out = out.withColumn("comm_busy_baseline_s", sliding_quantile("comm_busy_s", _centred(rules), rules.baseline_q))
    extra_comm = F.col("comm_busy_s") - F.col("comm_busy_baseline_s")
    extra_time = F.col("duration_s") - F.col("baseline_s")
    shaped = F.when(F.col("comm_busy_s").isNotNull() & (F.col("comm_busy_baseline_s") > 0),
                    extra_comm >= F.lit(rules.min_comm_share) * extra_time)
    found = F.coalesce(F.col("ports_with_data"), F.lit(0)) + F.coalesce(F.col("nics_with_flows"), F.lit(0))
    expected = F.coalesce(F.col("ports_expected"), F.lit(0)) + F.coalesce(F.col("nics_expected"), F.lit(0))
    coverage = F.when(expected > 0, F.least(F.lit(1.0), found / expected)).otherwise(F.lit(0.0))
    out = out.select("*", shaped.alias("network_shaped"), coverage.alias("coverage"),
                     F.coalesce(F.col("ports_with_data"), F.lit(0)).alias("_ports_found"),
                     F.coalesce(F.col("nics_with_flows"), F.lit(0)).alias("_nics_found"))
    blame = (F.col("is_slow") & (F.col("coverage") > 0) & F.coalesce(F.col("network_shaped"), F.lit(True))
             & F.col("cand_reason").isNotNull() & ~F.col("after_restart"))  # a restart's warm-up is not the network's
    return out.select(
        "task_id", "iteration", network_hour().alias("hour_cst"), "start_ts", "end_ts", "duration_s", "baseline_s",
        "slowdown", "is_slow",
        "is_checkpoint", "access_util_max", "access_util_mean", "uplink_util_max", "nic_gbps_median",
        "comm_busy_s", "comm_busy_baseline_s", "network_shaped", "flow_rtt_p99_ns", "flow_nak_pkts",
        "ecn_marks", "loss_pkts", F.coalesce("ports_expected", F.lit(0)).alias("ports_expected"),
        F.col("_ports_found").alias("ports_with_data"), F.coalesce("nics_expected", F.lit(0)).alias("nics_expected"),
        F.col("_nics_found").alias("nics_with_flows"), "coverage",
        F.when(blame, F.col("cand_switch")).alias("suspect_device_name"),
        F.when(blame, F.col("cand_port")).alias("suspect_port_name"),
        F.when(blame, F.col("cand_reason")).otherwise(F.lit("none")).alias("suspect_reason"),
        F.when(blame, F.col("cand_score")).alias("suspect_score"),
    )


# ---------------------------------------------------------------- per task

def explained_by_network() -> Column:
    """A row of gold.zj_iteration_network the network explains: verdicts named a suspect port
    (only for a slow iteration it may blame). The one definition every per-task count reads."""
    return F.col("suspect_reason") != "none"


def task_network_summary(gold: DataFrame, rules: Rules = Rules()) -> DataFrame:
    """gold.zj_task_network_summary: one row per task from gold.zj_iteration_network."""
    with_data = F.col("coverage") > 0
    blamed = explained_by_network()
    totals = gold.groupBy("task_id").agg(
        F.min("start_ts").alias("window_start_ts"), F.max("end_ts").alias("window_end_ts"),
        F.count(F.lit(1)).cast("int").alias("iterations"),
        F.count(F.when(with_data, F.lit(1))).cast("int").alias("iterations_with_data"),
        F.count(F.when(F.col("is_slow"), F.lit(1))).cast("int").alias("slow_iterations"),
        F.count(F.when(F.col("is_slow") & with_data, F.lit(1))).cast("int").alias("slow_with_data"),
        F.count(F.when(blamed, F.lit(1))).cast("int").alias("slow_explained_by_network"),
        F.count(F.when(F.col("is_slow") & F.col("is_checkpoint"), F.lit(1))).cast("int").alias("slow_checkpoints"),
        F.median("duration_s").alias("median_duration_s"),
        F.median("nic_gbps_median").alias("nic_gbps_median"),
        F.percentile("nic_gbps_median", 0.9).alias("nic_gbps_p90"),
    )
    share = F.when(F.col("slow_with_data") > 0, F.col("slow_explained_by_network") / F.col("slow_with_data"))
    counts = gold.filter(blamed).groupBy("task_id", "suspect_device_name", "suspect_port_name").agg(
        F.count(F.lit(1)).alias("n"), F.collect_set("suspect_reason").alias("reasons"))
    rank = Window.partitionBy("task_id").orderBy(F.col("n").desc(), "suspect_device_name", "suspect_port_name")
    label = F.format_string("%s %s: %d (%s)", "suspect_device_name", "suspect_port_name", "n",
                            F.array_join(F.array_sort("reasons"), "/"))
    top = (counts.withColumn("_r", F.row_number().over(rank)).filter(F.col("_r") <= rules.top_ports)
           .groupBy("task_id").agg(F.sort_array(F.collect_list(F.struct("_r", label.alias("label")))).alias("_top"))
           .select("task_id", F.col("_top.label").alias("top_suspect_ports")))
    reasons = (gold.filter(blamed).groupBy("task_id", "suspect_reason").agg(F.count(F.lit(1)).alias("n"))
               .groupBy("task_id").agg(F.sort_array(F.collect_list(
                   F.format_string("%s: %d", "suspect_reason", "n"))).alias("suspect_reasons")))
    empty = F.array().cast("array<string>")
    return totals.join(top, "task_id", "left").join(reasons, "task_id", "left").select(
        "task_id", "window_start_ts", "window_end_ts", "iterations", "iterations_with_data", "slow_iterations",
        "slow_with_data", "slow_explained_by_network", share.alias("share_explained_by_network"),
        "slow_checkpoints", F.coalesce("top_suspect_ports", empty).alias("top_suspect_ports"),
        F.coalesce("suspect_reasons", empty).alias("suspect_reasons"),
        "median_duration_s", "nic_gbps_median", "nic_gbps_p90",
    )
