"""Zhejiang topology: the two workbook sheets joined into one row per server NIC.

The sheets share no key column (`serverIP` is a NIC's RoCE IP, `GPU IP` the host IP), so they
meet on the host number — topology `sysname` ends in GPU-<N>, and host IPs are 10.107.254.N
(N ≤ 240) or 10.107.255.(N−240) — plus the netdev name. Rules from docs/formats/zhejiang.md §2.3.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# netdev by rail r = (leaf - 1) mod 4, per cabling type (rail-optimised, §2.3)
RAIL_NETDEVS = {
    "A": ("ens11np0", "ens10np0", "ens19np0", "ens18np0"),
    "B": ("ens24np0", "ens25np0", "ens30np0", "ens31np0"),
}
# the usual RDMA device → netdev map of each type; two real hosts deviate (.35 swapped, .132)
STANDARD_RDMA_MAP = {
    "A": {"mlx5_2": "ens10np0", "mlx5_3": "ens11np0", "mlx5_8": "ens18np0", "mlx5_9": "ens19np0"},
    "B": {"mlx5_2": "ens24np0", "mlx5_3": "ens25np0", "mlx5_8": "ens30np0", "mlx5_9": "ens31np0"},
}


def _int_or_null(text: Column) -> Column:
    return F.when(text != "", text.cast("int"))


def host_num_from_name(name: Column) -> Column:
    """N of a sysname `...-GPU-<N>` or a k8s node `nm129-gpu-<N>` (case-insensitive)."""
    return _int_or_null(F.regexp_extract(F.lower(name), r"gpu-(\d+)$", 1))


def host_num_from_ip(ip: Column) -> Column:
    """N of a host IP: 10.107.254.N, or 10.107.255.M = host 240 + M; null for other IPs."""
    pattern = r"^10\.107\.(25[45])\.(\d{1,3})$"
    block, last = F.regexp_extract(ip, pattern, 1), _int_or_null(F.regexp_extract(ip, pattern, 2))
    return F.when(block == "254", last).when(block == "255", last + F.lit(240))


def host_type_of(netdev: Column) -> Column:
    """A or B from a netdev name, null for names of neither type."""
    return (F.when(netdev.isin(*RAIL_NETDEVS["A"]), F.lit("A"))
            .when(netdev.isin(*RAIL_NETDEVS["B"]), F.lit("B")))


def _rail_netdev(host_type: Column, rail: Column) -> Column:
    pick = {t: F.element_at(F.array(*[F.lit(n) for n in names]), rail + 1)
            for t, names in RAIL_NETDEVS.items()}
    return F.when(host_type == "A", pick["A"]).when(host_type == "B", pick["B"])


def _standard_triples() -> list[str]:
    return [f"{t}:{rdma}:{dev}" for t, m in STANDARD_RDMA_MAP.items() for rdma, dev in m.items()]


def nic_map(topology: DataFrame, gpu_nic: DataFrame) -> DataFrame:
    """One row per server NIC from bronze.zj_topology and bronze.zj_gpu_nic (see the schema)."""
    leaf_num = _int_or_null(F.regexp_extract("switchname", r"[Ll]eaf-(\d+)", 1))
    topo = topology.select(
        host_num_from_name(F.col("sysname")).alias("host_num"),
        F.col("sysname").alias("host_name"), F.col("server_ip").alias("nic_ip"), "nicname",
        F.col("switchname").alias("device_name"), F.col("switch_ip").alias("device_ip"),
        F.col("accessport").alias("port_name"), leaf_num.alias("leaf_num"),
    )
    gpu = gpu_nic.select(
        host_num_from_ip(F.col("gpu_ip")).alias("host_num"), F.col("gpu_ip").alias("host_ip"),
        F.col("nic_name1").alias("rdma_name"), F.col("nic_name2").alias("netdev"),
    )
    host_types = (
        topo.select("host_num", host_type_of(F.col("nicname")).alias("t"))
        .unionByName(gpu.select("host_num", host_type_of(F.col("netdev")).alias("t")))
        .groupBy("host_num").agg(F.min("t").alias("host_type"))
    )
    rail = (F.col("leaf_num") - 1) % 4
    topo = topo.join(host_types, "host_num", "left").select(
        "*",
        F.coalesce(F.col("nicname"), _rail_netdev(F.col("host_type"), rail)).alias("netdev"),
        (F.col("nicname").isNull() & _rail_netdev(F.col("host_type"), rail).isNotNull())
        .alias("netdev_inferred"),
    ).drop("host_type").withColumn("in_topology", F.lit(True))
    gpu = gpu.withColumn("in_gpu_nic_info", F.lit(True))
    joined = topo.join(gpu.drop("host_ip"), ["host_num", "netdev"], "full_outer")

    hosts_t = topo.groupBy("host_num").agg(F.first("host_name", ignorenulls=True).alias("host_name"))
    hosts_g = gpu.groupBy("host_num").agg(F.first("host_ip", ignorenulls=True).alias("host_ip"))
    joined = (joined.drop("host_name").join(hosts_t, "host_num", "left")
              .join(hosts_g, "host_num", "left").join(host_types, "host_num", "left"))

    in_topology = F.coalesce(F.col("in_topology"), F.lit(False))
    in_gpu = F.coalesce(F.col("in_gpu_nic_info"), F.lit(False))
    triple = F.concat_ws(":", "host_type", "rdma_name", "netdev")
    nonstandard = (F.col("rdma_name").isNotNull() & F.col("netdev").isNotNull()
                   & F.col("host_type").isNotNull() & ~triple.isin(*_standard_triples()))
    anomalies = F.array_compact(F.array(
        F.when(~in_topology, F.lit("not_in_topology")),
        F.when(~in_gpu, F.lit("not_in_gpu_nic_info")),
        F.when(in_topology & F.col("nicname").isNull(), F.lit("nicname_blank")),
        F.when(in_topology & F.col("nic_ip").isNull(), F.lit("server_ip_blank")),
        F.when(in_topology & F.col("device_ip").isNull(), F.lit("switch_ip_blank")),
        F.when(nonstandard, F.lit("nonstandard_rdma_map")),
    ))
    return joined.select(
        "host_num", "host_name", "host_ip", "host_type", "rdma_name", "netdev", "nic_ip",
        "device_name",
        F.when(F.col("leaf_num").isNotNull(), F.concat(F.lit("Leaf-"), F.col("leaf_num").cast("string")))
        .alias("leaf"),
        "leaf_num", "device_ip", "port_name",
        (F.floor((F.col("leaf_num") - 1) / 4) + 1).cast("int").alias("rail_group"),
        rail.cast("int").alias("rail"),
        in_topology.alias("in_topology"), in_gpu.alias("in_gpu_nic_info"),
        F.coalesce(F.col("netdev_inferred"), F.lit(False)).alias("netdev_inferred"),
        anomalies.alias("anomalies"),
    )
