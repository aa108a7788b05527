import pytest
from pyspark.sql import types as T

from tracelake.errors import TracelakeError
from tracelake.quality.gate import load_suite
from tracelake.schema import all_table_names, describe_markdown, load_schema, parse_schema, quarantine_schema


def test_every_table_has_a_schema_and_a_gated_suite():
    names = all_table_names()
    assert names == [
        "bronze.acme_jobs", "bronze.acme_power", "bronze.acme_utilization",
        "bronze.elasticflow_jobs", "bronze.itp_jobs", "bronze.zeus_alibaba_groups",
        "bronze.zeus_power", "bronze.zeus_train",
        "bronze.zj_flow", "bronze.zj_gpu_nic", "bronze.zj_link", "bronze.zj_nic",
        "bronze.zj_port_counters", "bronze.zj_port_minute", "bronze.zj_task_log_events",
        "bronze.zj_task_pods", "bronze.zj_topology",
        "gold.jobs_characterization", "gold.jobs_duration_comparison", "gold.jobs_duration_quantiles",
        "gold.jobs_failures", "gold.jobs_gpu_count_cdf", "gold.zeus_time_energy_to_accuracy",
        "gold.zj_iteration_interference", "gold.zj_iteration_network", "gold.zj_task_interference",
        "gold.zj_task_network_summary", "gold.zj_task_time_lost",
        "ops.quality_results",
        "silver.jobs", "silver.zj_iteration_counters", "silver.zj_iteration_flows",
        "silver.zj_iteration_port_minutes", "silver.zj_link_wiring", "silver.zj_nic_map", "silver.zj_nic_rates",
        "silver.zj_port_rates", "silver.zj_task_iterations", "silver.zj_task_paths", "silver.zj_task_ranks",
        "silver.zj_task_restarts",
    ]
    for name in names:
        schema = load_schema(name)
        assert all(c.description for c in schema.columns), name
        if schema.layer in ("bronze", "silver", "gold"):
            suite = load_suite(name)
            assert suite["name"] == name
            assert any(e["meta"]["severity"] == "critical" for e in suite["expectations"])


def test_bronze_schema_carries_lineage_and_explicit_types():
    schema = load_schema("bronze.itp_jobs")
    assert schema.column_names == [
        "cluster", "job_id", "submission_time", "duration", "num_gpu",
        "source_file", "ingest_run_id", "ingest_ts",
    ]
    assert schema.keys == ("job_id",)
    assert schema.raw_header == ("job_id", "submission_time", "duration", "num_gpu")
    spark_schema = schema.spark_schema()
    assert spark_schema["duration"].dataType == T.LongType()
    assert spark_schema["num_gpu"].dataType == T.IntegerType()
    assert spark_schema["ingest_ts"].dataType == T.TimestampType()
    assert [c.name for c in schema.data_columns][-1] == "num_gpu"


def test_describe_is_generated_from_the_schema_file():
    text = describe_markdown(load_schema("bronze.zeus_power"))
    assert text.startswith("# bronze.zeus_power\n")
    assert "| average_power | double | no | W | average_power |" in text
    assert "Keys: gpu, dataset, network, batch_size, optimizer, power_limit" in text


def test_quarantine_layout_is_shared():
    q = quarantine_schema("itp_jobs")
    assert q.full_name == "quarantine.itp_jobs"
    assert q.column_names == ["source_file", "raw_line", "raw_values_json", "reasons", "ingest_run_id", "ingest_ts"]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"table": "t", "layer": "platinum", "columns": []}, "layer must be one of"),
        ({"table": "t", "layer": "gold", "columns": [{"name": "a", "type": "varchar", "description": "x"}]}, "unknown type"),
        ({"table": "t", "layer": "gold", "keys": ["b"], "columns": [{"name": "a", "type": "int", "description": "x"}]}, "not a column"),
        ({"table": "t", "layer": "gold", "colums": []}, "unknown keys"),
        ({"table": "t", "layer": "gold", "raw": {"header": ["x"]},
          "columns": [{"name": "a", "type": "int", "description": "x", "source": "y"}]}, "not in raw.header"),
    ],
)
def test_bad_schema_files_are_rejected(data, message):
    with pytest.raises(TracelakeError, match=message):
        parse_schema(data, "test.yaml")


def test_unknown_table():
    with pytest.raises(TracelakeError, match="no schema for table 'bronze.nope'"):
        load_schema("bronze.nope")


def test_every_derived_table_rebuilt_whole_says_why():
    """A derived table without a partial rebuild is recomputed from all of its inputs on every
    change; its schema must say so and why (e.g. it is small), so the cost is a stated choice."""
    from tracelake.run.registry import all_derived

    whole = [d.table for d in all_derived() if d.rebuild is None]
    assert len(whole) == 13
    assert [t for t in whole if "rebuilt whole" not in load_schema(t).description.lower()] == []
    partial = sorted(d.table for d in all_derived() if d.rebuild is not None)
    assert partial == ["gold.zj_iteration_interference", "gold.zj_iteration_network", "silver.zj_iteration_counters",
                       "silver.zj_iteration_flows",
                       "silver.zj_iteration_port_minutes", "silver.zj_link_wiring", "silver.zj_nic_rates",
                       "silver.zj_port_rates", "silver.zj_task_iterations", "silver.zj_task_restarts"]
    # a partial rebuild replaces partitions, or merges a new hour into a small table (the wiring)
    assert [t for t in partial if not load_schema(t).partition_by] == ["silver.zj_link_wiring"]
