"""A table an earlier release wrote under other column names (a partition column among them) is
renamed in place: the same rows under the schema file's names and partitioning, the drift check
not taking the old names for another writer's, and nothing left to do after. On every profile
(delta_io): the rename is the engine's overwrite of a new layout. The whole upgrade, from a lake
the earlier release's own code wrote, is tests/deploy/test_upgrade.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from tracelake.delta.catalog import check_writable, read_tables
from tracelake.delta.migrate import rename_all
from tracelake.schema import table_schema

pytestmark = pytest.mark.delta_io

TABLE = "silver.zj_nic_rates"  # partitioned by hour_cst; five of its columns had other names


def _old_layout(spark, config):
    """The rows as the release before the renames stored them (its names, hour_cst partitions)."""
    rows = [("GPU-31", "10.107.254.31", "mlx5_2", datetime(2024, 5, 23, 3, 0, tzinfo=UTC),
             datetime(2024, 5, 23, 3, 1, tzinfo=UTC), 60.0, 1e9, 2e9, 10.0, 20.0, 0.13, 0.27, False, "2024052311"),
            ("GPU-31", "10.107.254.31", "mlx5_3", datetime(2024, 5, 23, 4, 0, tzinfo=UTC),
             datetime(2024, 5, 23, 4, 1, tzinfo=UTC), 60.0, None, None, None, None, None, None, True, "2024052312")]
    frame = spark.createDataFrame(rows, "device_name string, ip string, port_name string, interval_start timestamp, "
                                        "interval_end timestamp, seconds double, rx_bytes double, tx_bytes double, "
                                        "rx_packets double, tx_packets double, rx_gbps double, tx_gbps double, "
                                        "counter_reset boolean, hour_cst string")
    frame.write.format("delta").partitionBy("hour_cst").save(config.table_path("silver", "zj_nic_rates"))
    return sorted(tuple(r) for r in frame.collect())


def test_a_table_of_an_earlier_release_is_renamed_with_its_rows(spark, config):
    said = []
    before = _old_layout(spark, config)
    found = check_writable(config)  # no "another Delta writer changed it" for the old names
    assert [(f"{r.schema.layer}.{r.schema.table}", r.describe()) for r in found] == [(TABLE, (
        "device_name -> host_name, ip -> host_ip, port_name -> rdma_name, interval_start -> interval_start_ts, "
        "interval_end -> interval_end_ts"))]
    rename_all(spark, config, found, say=said.append)
    assert said == [f"{TABLE}: columns renamed to this release's names ({found[0].describe()}; docs/naming.md)"]

    [stored] = read_tables(spark, config, TABLE)
    schema = table_schema(TABLE)
    assert sorted(stored.columns) == sorted(c.name for c in schema.columns)
    old_order = ["host_name", "host_ip", "rdma_name", "interval_start_ts", "interval_end_ts", "seconds", "rx_bytes",
                 "tx_bytes", "rx_packets", "tx_packets", "rx_gbps", "tx_gbps", "counter_reset", "hour_cst"]
    assert sorted(tuple(r) for r in stored.select(*old_order).collect()) == before
    assert stored.filter(F.col("hour_cst") == "2024052312").select("rdma_name").collect()[0][0] == "mlx5_3"
    log = DeltaTable(config.table_path("silver", "zj_nic_rates"))
    assert list(log.metadata().partition_columns) == ["hour_cst"]
    assert check_writable(config) == []
