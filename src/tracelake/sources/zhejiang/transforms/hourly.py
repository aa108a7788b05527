"""Zhejiang hourly derived tables: NIC rates from cumulative counters, and the link wiring."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracelake.io.frames import union_plain

NIC_COUNTERS = {
    "rx_bytes": "received_bytes",
    "tx_bytes": "transmitted_bytes",
    "rx_packets": "received_packets_by_port",
    "tx_packets": "transmitted_packets_by_port",
}
ABBREVIATIONS = (("400GE", "FourHundredGigE"), ("200GE", "TwoHundredGigE"), ("100GE", "HundredGigE"))


def _seconds_between(start: Column, end: Column) -> Column:
    return (F.unix_micros(end) - F.unix_micros(start)) / F.lit(1e6)


NIC = ["device_name", "port_name"]
HOUR_FORMAT = "yyyyMMddHH"


def nic_rates(nic: DataFrame, earlier: DataFrame | None = None) -> DataFrame:
    """One row per pair of consecutive samples of a NIC: deltas and rates of the cumulative
    counters. A counter that went down (a reset) gives null deltas and counter_reset = true
    rather than a negative rate; a NIC's first sample has no interval and starts none, nor does
    its first sample after an hour folder without one (no rate averaged over hours).

    `earlier` (last_samples of the hour before `nic`'s rows) continues each NIC's intervals
    into `nic`'s first samples; only intervals that end in `nic` are returned, so the rates of
    one hour need that hour's samples and one row per NIC of the hour before."""
    columns = ["device_name", "ip", "port_name", "save_time", "hour_cst", *NIC_COUNTERS.values()]
    rows = nic.select(*columns, F.lit(False).alias("_carried"))
    if earlier is not None:
        rows = earlier.select(*columns, F.lit(True).alias("_carried")).unionByName(rows)
    by_nic = Window.partitionBy(*NIC).orderBy("save_time")
    prev = rows.select(
        "device_name", "ip", "port_name", "hour_cst", "_carried",
        F.lag("save_time").over(by_nic).alias("interval_start"),
        F.lag("hour_cst").over(by_nic).alias("_start_hour"),
        F.col("save_time").alias("interval_end"),
        *[F.col(c) for c in NIC_COUNTERS.values()],
        *[F.lag(c).over(by_nic).alias(f"prev_{c}") for c in NIC_COUNTERS.values()],
    )
    hour_gap = F.unix_timestamp("hour_cst", HOUR_FORMAT) - F.unix_timestamp("_start_hour", HOUR_FORMAT)
    prev = prev.filter(F.col("interval_start").isNotNull() & ~F.col("_carried") & (hour_gap <= 3600))
    deltas = {out: F.col(c) - F.col(f"prev_{c}") for out, c in NIC_COUNTERS.items()}
    reset = F.greatest(*[F.when(d < 0, F.lit(True)).otherwise(F.lit(False)) for d in deltas.values()])
    seconds = _seconds_between(F.col("interval_start"), F.col("interval_end"))
    kept = {out: F.when(~reset, d) for out, d in deltas.items()}
    return prev.select(  # bronze's device_name, ip, port_name of a NIC under the names of docs/naming.md
        F.col("device_name").alias("host_name"), F.col("ip").alias("host_ip"), F.col("port_name").alias("rdma_name"),
        F.col("interval_start").alias("interval_start_ts"), F.col("interval_end").alias("interval_end_ts"),
        seconds.alias("seconds"),
        *[v.alias(k) for k, v in kept.items()],
        (kept["rx_bytes"] * 8 / seconds / 1e9).alias("rx_gbps"),
        (kept["tx_bytes"] * 8 / seconds / 1e9).alias("tx_gbps"),
        reset.alias("counter_reset"), "hour_cst",
    )


def last_samples(earlier: DataFrame) -> DataFrame:
    """Each NIC's last sample in `earlier`: all that nic_rates needs of the hours before."""
    last = earlier.groupBy(*NIC).agg(F.max("save_time").alias("_last"))
    return earlier.join(last, NIC).filter(F.col("save_time") == F.col("_last")).select(*earlier.columns)


def full_port_name(abbreviated: Column) -> Column:
    """`400GE1/0/8` -> `FourHundredGigE1/0/8` (the per-port and port.csv spelling)."""
    out = abbreviated
    for short, full in ABBREVIATIONS:
        expanded = F.concat(F.lit(full), F.substring(abbreviated, len(short) + 1, 1000))
        out = F.when(abbreviated.startswith(short), expanded).otherwise(out)
    return out


def _device_role(name: Column) -> Column:
    lowered = F.lower(name)
    return (
        F.when(lowered.contains("-spine-"), F.lit("spine"))
        .when(lowered.rlike(r"-(st-)?leaf-\d+"), F.lit("leaf"))
        .otherwise(F.lit("server"))
    )


WIRING_KEYS = ("device_name", "port_name", "dst_device_name", "dst_port_name")  # one row per link end


def link_wiring(link: DataFrame) -> DataFrame:
    """Which port is cabled to which peer (link.csv, docs/formats/zhejiang.md §7 step 8), once per link end, with the
    port in its full name so it joins port.csv and the per-port files, and the ECN marks seen."""
    dst_port = F.when(F.length(F.trim("dst_port")) > 0, F.col("dst_port"))
    ends = link.select(
        "device_name", full_port_name(F.col("if_abbreviated_name")).alias("port_name"),
        F.col("dst_device").alias("dst_device_name"), dst_port.alias("dst_port_name"), "start_time",
        "ecn_marked_count",
    )
    return _with_roles(ends.groupBy(*WIRING_KEYS).agg(
        F.min("start_time").alias("first_seen_ts"),
        F.max("start_time").alias("last_seen_ts"),
        F.count(F.lit(1)).alias("samples"),
        F.sum("ecn_marked_count").alias("ecn_marked_total"),
    ))


def wiring_with(stored: DataFrame, added: DataFrame) -> DataFrame:
    """link_wiring of two sets of link.csv rows, from link_wiring of each: a link end's first and
    last sample, its sample count and its ECN marks combine exactly (min, max, integer sums), so
    a new hour's link ends join the stored table without the hours before being read again."""
    return _with_roles(union_plain(stored, added).groupBy(*WIRING_KEYS).agg(
        F.min("first_seen_ts").alias("first_seen_ts"),
        F.max("last_seen_ts").alias("last_seen_ts"),
        F.sum("samples").alias("samples"),
        F.sum("ecn_marked_total").alias("ecn_marked_total"),
    ))


def _with_roles(ends: DataFrame) -> DataFrame:
    return ends.select(
        "device_name", _device_role(F.col("device_name")).alias("device_role"), "port_name",
        "dst_device_name", _device_role(F.col("dst_device_name")).alias("dst_role"), "dst_port_name",
        "first_seen_ts", "last_seen_ts", "samples", "ecn_marked_total",
    )
