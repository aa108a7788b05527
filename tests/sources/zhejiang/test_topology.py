"""Zhejiang workbook: both sheets into bronze, their per-NIC join into silver.zj_nic_map.

Real-data tests read ../shared/data/zhejiang/cluster_2000_A100.xlsx (Zhejiang Lab LLM Trace
Program, https://github.com/zhejianglab/Zhejiang-Lab-Cluster-Traces, CC-BY 4.0) and skip when it
is absent. The ingest sees a temp raw dir holding only a link to the workbook.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from conftest import make_config, shared
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.errors import TracelakeError
from tracelake.io.text import RawFile
from tracelake.run.pipeline import run_ingest
from tracelake.schema import load_schema
from tracelake.sources import zhejiang as zhejiang_source
from tracelake.sources.zhejiang import topology
from tracelake.sources.zhejiang.topology import WORKBOOK, parse_sheet, plan
from tracelake.sources.zhejiang.transforms.topology import host_num_from_ip, host_num_from_name, nic_map


@pytest.fixture(scope="module")
def real(engine, tmp_path_factory):
    """One ingest of the real workbook for the whole module: (stats by table, config)."""
    workbook = shared("zhejiang", WORKBOOK)
    root = tmp_path_factory.mktemp("zj-topology")
    (root / "raw").mkdir()
    os.symlink(workbook, root / "raw" / WORKBOOK)
    config = make_config(root / "lake")
    with pytest.MonkeyPatch.context() as patch:  # this part's derived tables only (not other parts')
        patch.setattr(zhejiang_source, "SOURCE", replace(zhejiang_source.declare(), derived=tuple(topology.DERIVED)), raising=False)
        stats = run_ingest(engine, config, "zhejiang", str(root / "raw"))
    return {s.table: s for s in stats}, config


def _table(spark, config, layer, table):
    return spark.read.format("delta").load(config.table_path(layer, table))


def test_real_sheets_are_read_whole(real):
    stats, _ = real
    counts = {t: (s.rows_read, s.rows_kept, s.rows_quarantined) for t, s in stats.items()}
    assert counts == {
        "bronze.zj_topology": (1012, 1012, 0),
        "bronze.zj_gpu_nic": (1040, 1040, 0),
        "silver.zj_nic_map": (1056, 1056, 0),  # 1,012 topology NICs + 44 of the 11 hosts only in GPU NIC info
    }
    # blank cells are kept and counted, and one downlink is a 400G port (GPU-89, Leaf-5 1/0/64)
    assert stats["bronze.zj_topology"].warnings == (
        "accessport_is_200g_breakout: 1 rows (0.10%)", "server_ip_present: 8 rows (0.79%)",
        "nicname_present: 2 rows (0.20%)")


def test_real_topology_rows_keep_text_and_blanks(spark, real):
    _, config = real
    topo = _table(spark, config, "bronze", "zj_topology")
    first = topo.filter(F.col("sheet_row") == 2).select(
        "accessport", "server_ip", "nicname", "portname", "switch_ip", "switchname", "sysname", "source_file")
    assert_same_rows(first, spark.createDataFrame([(
        "TwoHundredGigE1/0/1:2", "10.107.222.1", "ens11np0", "TwoHundredGigE1/0/1:2", "10.107.208.111",
        "NH-DC-NM129-B03-ROCE-Leaf-1.GPU.S9825", "NH-DC-NM129-A01-28U-GPU-1",
        "cluster_2000_A100.xlsx!cluster topology")], first.schema))
    blanks = topo.filter(F.col("server_ip").isNull()).groupBy("sysname").agg(
        F.count("*").alias("rows"), F.sum(F.col("nicname").isNull().cast("int")).alias("no_nicname"))
    assert_same_rows(blanks, spark.createDataFrame(
        [("NH-DC-NM129-F03-12U-GPU-153", 4, 2), ("NH-DC-NM129-H10-12U-GPU-228", 4, 0)], blanks.schema))
    assert topo.filter(F.col("accessport") != F.col("portname")).count() == 0
    assert topo.select("sysname").distinct().count() == 253


def test_real_nic_map_flags_the_documented_anomalies(spark, real):
    _, config = real
    nics = _table(spark, config, "silver", "zj_nic_map")
    by_flag = nics.select(F.explode("anomalies").alias("a")).groupBy("a").count()
    assert_same_rows(by_flag, spark.createDataFrame(
        [("not_in_topology", 44), ("not_in_gpu_nic_info", 16), ("nicname_blank", 2),
         ("server_ip_blank", 8), ("switch_ip_blank", 8), ("nonstandard_rdma_map", 4)], by_flag.schema))
    hosts = lambda flag: sorted(r.host_num for r in nics.filter(F.array_contains("anomalies", flag))  # noqa: E731
                                .select("host_num").distinct().collect())
    assert hosts("not_in_topology") == [121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 132]
    assert hosts("not_in_gpu_nic_info") == [51, 168, 172, 228]
    odd = nics.filter(F.array_contains("anomalies", "nonstandard_rdma_map") | F.col("netdev_inferred")).select(
        "host_num", "host_ip", "rdma_name", "netdev", "leaf", "port_name", "netdev_inferred")
    assert_same_rows(odd, spark.createDataFrame([
        (35, "10.107.254.35", "mlx5_3", "ens18np0", "Leaf-4", "TwoHundredGigE1/0/17:1", False),   # swapped
        (35, "10.107.254.35", "mlx5_8", "ens11np0", "Leaf-1", "TwoHundredGigE1/0/18:1", False),
        (132, "10.107.254.132", "mlx5_4", "ens18np0", None, None, False),                     # odd devices
        (132, "10.107.254.132", "mlx5_7", "ens19np0", None, None, False),
        (153, "10.107.254.153", "mlx5_8", "ens18np0", "Leaf-12", "TwoHundredGigE1/0/17:2", True),  # from rail
        (153, "10.107.254.153", "mlx5_9", "ens19np0", "Leaf-11", "TwoHundredGigE1/0/17:1", True),
    ], odd.schema))


def test_real_nic_map_gives_the_rank0_path(spark, real):
    _, config = real
    row = _table(spark, config, "silver", "zj_nic_map").filter(
        (F.col("host_ip") == "10.107.254.31") & (F.col("rdma_name") == "mlx5_2")).collect()
    assert [(r.host_name, r.netdev, r.nic_ip, r.device_name, r.device_ip, r.port_name, r.rail_group, r.rail,
             r.host_type, r.anomalies) for r in row] == [
        ("NH-DC-NM129-B01-28U-GPU-31", "ens10np0", "10.107.223.31", "NH-DC-NM129-B04-ROCE-Leaf-2.GPU.S9825",
         "10.107.208.112", "TwoHundredGigE1/0/16:1", 1, 1, "A", [])]


@pytest.mark.portable
def test_real_wrong_sheet_for_a_table_is_a_clear_error(spark):
    workbook = str(shared("zhejiang", WORKBOOK))
    wrong = RawFile(workbook, f"{WORKBOOK}!GPU NIC info", {"sheet": "GPU NIC info"})
    with pytest.raises(TracelakeError, match=r"header \['GPU IP', 'NIC name1', 'NIC name 2'\] does not match"):
        parse_sheet(spark, [wrong], load_schema("bronze.zj_topology"))
    missing = RawFile(workbook, f"{WORKBOOK}!nope", {"sheet": "nope"})
    with pytest.raises(TracelakeError, match="no sheet 'nope'"):
        parse_sheet(spark, [missing], load_schema("bronze.zj_topology"))


@pytest.mark.portable
def test_plan_finds_the_workbook_or_nothing(tmp_path):
    assert plan(tmp_path, tmp_path / "staging") == []
    (tmp_path / WORKBOOK).write_bytes(b"not a zip")
    inputs = plan(tmp_path, tmp_path / "staging")
    assert [(i.table, [f.name for f in i.files]) for i in inputs] == [
        ("bronze.zj_topology", [f"{WORKBOOK}!cluster topology"]),
        ("bronze.zj_gpu_nic", [f"{WORKBOOK}!GPU NIC info"]),
    ]


@pytest.mark.portable
def test_unreadable_workbook_is_a_clear_error(spark, tmp_path):
    path = tmp_path / WORKBOOK
    path.write_bytes(b"not a zip")
    with pytest.raises(TracelakeError, match="not a readable xlsx workbook"):
        parse_sheet(spark, [RawFile(str(path), "x", {"sheet": "cluster topology"})], load_schema("bronze.zj_topology"))


@pytest.mark.portable
def test_host_numbers_from_names_and_ips(spark):
    df = spark.createDataFrame(
        [("NH-DC-NM129-B01-28U-GPU-31", "10.107.254.31"), ("nm129-gpu-265", "10.107.255.25"),
         ("server-x", "10.107.223.31")], "name string, ip string")
    got = df.select(host_num_from_name(F.col("name")).alias("n"), host_num_from_ip(F.col("ip")).alias("i"))
    assert [(r.n, r.i) for r in got.collect()] == [(31, 31), (265, 265), (None, None)]


TOPO = "accessport string, server_ip string, nicname string, switchname string, switch_ip string, sysname string"
GPU = "gpu_ip string, nic_name1 string, nic_name2 string"


@pytest.mark.portable
def test_nic_map_joins_on_host_and_netdev_and_keeps_one_sided_hosts(spark):
    leaf = "NH-DC-NM129-B0{}-ROCE-Leaf-{}.GPU.S9825"
    topology = spark.createDataFrame([
        ("TwoHundredGigE1/0/1:1", "10.107.222.1", "ens11np0", leaf.format(3, 1), "10.107.208.111", "X-GPU-1"),
        ("TwoHundredGigE1/0/1:2", None, None, leaf.format(4, 2), None, "X-GPU-1"),  # blank: rail 1 of type A
        ("TwoHundredGigE1/0/2:1", "10.107.226.2", "ens24np0", leaf.format(3, 5), "10.107.208.115", "X-GPU-62"),
    ], TOPO)
    gpu_nic = spark.createDataFrame([
        ("10.107.254.1", "mlx5_3", "ens11np0"), ("10.107.254.1", "mlx5_2", "ens10np0"),
        ("10.107.255.1", "mlx5_2", "ens24np0"),  # host 241, absent from the topology sheet
    ], GPU)
    got = nic_map(topology, gpu_nic).select(
        "host_num", "host_name", "host_ip", "host_type", "rdma_name", "netdev", "nic_ip", "leaf", "rail_group",
        "rail", "in_topology", "in_gpu_nic_info", "netdev_inferred", "anomalies")
    expected = spark.createDataFrame([
        (1, "X-GPU-1", "10.107.254.1", "A", "mlx5_3", "ens11np0", "10.107.222.1", "Leaf-1", 1, 0, True, True,
         False, []),
        (1, "X-GPU-1", "10.107.254.1", "A", "mlx5_2", "ens10np0", None, "Leaf-2", 1, 1, True, True, True,
         ["nicname_blank", "server_ip_blank", "switch_ip_blank"]),
        (62, "X-GPU-62", None, "B", None, "ens24np0", "10.107.226.2", "Leaf-5", 2, 0, True, False, False,
         ["not_in_gpu_nic_info"]),
        (241, None, "10.107.255.1", "B", "mlx5_2", "ens24np0", None, None, None, None, False, True, False,
         ["not_in_topology"]),
    ], got.schema)
    assert_same_rows(got, expected)


@pytest.mark.portable
def test_nic_map_flags_a_nonstandard_device_map(spark):
    topology = spark.createDataFrame([], TOPO)
    gpu_nic = spark.createDataFrame(
        [("10.107.254.35", "mlx5_3", "ens18np0"), ("10.107.254.35", "mlx5_2", "ens10np0")], GPU)
    got = nic_map(topology, gpu_nic).select("rdma_name", "anomalies")
    assert_same_rows(got, spark.createDataFrame(
        [("mlx5_3", ["not_in_topology", "nonstandard_rdma_map"]), ("mlx5_2", ["not_in_topology"])], got.schema))
