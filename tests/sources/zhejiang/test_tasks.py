"""Zhejiang task folders: pod listing and pod logs → bronze; ranks and step intervals → silver;
and the round trip of the task-folder writer for both log styles.

Real-data tests read ../shared/data/zhejiang/{cluster_2000_A100.xlsx, taskinfo/20240429-0613-4}
(Zhejiang Lab LLM Trace Program, https://github.com/zhejianglab/Zhejiang-Lab-Cluster-Traces,
CC-BY 4.0) through links in a temp raw dir, and skip when they are absent.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import make_config, shared
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.delta.maintenance import history
from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS
from tracelake.run.pipeline import run_ingest
from tracelake.schema import load_schema
from tracelake.sources import zhejiang as zhejiang_source
from tracelake.sources.zhejiang import tasklogs, topology
from tracelake.sources.zhejiang.synth import tasks as generate_tasks
from tracelake.sources.zhejiang.synth.tasks import HostSpec, TaskSpec, nccl_nics, write_task
from tracelake.sources.zhejiang.tasklogs import parse_log_events, parse_pods, plan
from tracelake.sources.zhejiang.transforms.tasks import task_iterations, task_ranks, task_restarts

TASK = "20240429-0613-4"
JOB = "llama2-7b-new-5b-2b1ef"

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def count_lines(path: Path) -> int:
    """Independent count of log lines: LF lines split on CR, pieces empty only because of a CR
    are not lines, a blank line is one line."""
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    physical = text.split("\n")
    if text.endswith("\n"):
        physical.pop()
    return sum(len([p for p in line.split("\r") if p]) or 1 for line in physical)


def _by_file(df, column="source_file"):
    return {r[0].rsplit("/", 1)[-1]: r[1] for r in df.groupBy(column).count().collect()}


# ---------------------------------------------------------------- the real task

@pytest.fixture(scope="module")
def real(engine, tmp_path_factory):
    """One ingest of the workbook and the real task folder: (stats by table, config)."""
    workbook, taskinfo = shared("zhejiang", "cluster_2000_A100.xlsx"), shared("zhejiang", "taskinfo")
    root = tmp_path_factory.mktemp("zj-tasks")
    (root / "raw").mkdir()
    os.symlink(workbook, root / "raw" / "cluster_2000_A100.xlsx")
    os.symlink(taskinfo, root / "raw" / "taskinfo")
    config = make_config(root / "lake")
    with pytest.MonkeyPatch.context() as patch:  # this part's derived tables only (not other parts')
        patch.setattr(zhejiang_source, "SOURCE", replace(zhejiang_source.declare(), derived=(*topology.DERIVED, *tasklogs.DERIVED)), raising=False)
        stats = run_ingest(engine, config, "zhejiang", str(root / "raw"))
    return {s.table: s for s in stats}, config


def _table(spark, config, layer, table):
    return spark.read.format("delta").load(config.table_path(layer, table))


def test_real_pod_listing(spark, real):
    _, config = real
    pods = _table(spark, config, "bronze", "zj_task_pods").select(
        "task_id", "pod", "job", "role", "worker_index", "host_ip", "k8s_node", "host_num",
        F.date_format("start_ts", "yyyy-MM-dd HH:mm:ss").alias("start"))
    assert_same_rows(pods, spark.createDataFrame([
        (TASK, f"{JOB}-master", JOB, "master", None, "10.107.254.31", "nm129-gpu-31", 31, "2024-04-29 06:13:55"),
        (TASK, f"{JOB}-worker-1", JOB, "worker", 1, "10.107.254.68", "nm129-gpu-68", 68, "2024-04-29 06:14:09"),
        (TASK, f"{JOB}-worker-2", JOB, "worker", 2, "10.107.254.149", "nm129-gpu-149", 149, "2024-04-29 06:14:11"),
        (TASK, f"{JOB}-worker-3", JOB, "worker", 3, "10.107.254.70", "nm129-gpu-70", 70, "2024-04-29 06:14:10"),
    ], pods.schema))


def test_real_lines_are_all_kept_and_non_events_counted_per_class_in_ops(spark, real):
    """A blank or unrecognised line is a line of the log, not a bad record: the real logs give no
    quarantined row; the non-event lines are kept with their kind and counted per class in ops."""
    stats, config = real
    folder = shared("zhejiang", "taskinfo", TASK)
    read = {p.name: count_lines(p) for p in folder.glob("*.log") if p.name != "pod-node-starttime.log"}
    assert read == {f"{JOB}-master.log": 8498, f"{JOB}-worker-1.log": 8094,
                    f"{JOB}-worker-2.log": 5648, f"{JOB}-worker-3.log": 5643}
    events = _table(spark, config, "bronze", "zj_task_log_events")
    assert _by_file(events) == read
    assert _table(spark, config, "quarantine", "zj_task_log_events").count() == 0
    s = stats["bronze.zj_task_log_events"]
    assert (s.rows_read, s.rows_kept, s.rows_quarantined) == (27883, 27883, 0)
    assert not [w for w in s.warnings if "lines" in w]  # counted, not warned about
    by_kind = events.filter(F.col("kind").isin("blank", "unrecognised")).groupBy(
        F.col("source_file").endswith("master.log").alias("master"), "kind").count()
    assert sorted(map(tuple, by_kind.collect())) == [
        (False, "blank", 2555), (False, "unrecognised", 1414), (True, "blank", 2483), (True, "unrecognised", 566)]
    ops = (_table(spark, config, "ops", "quality_results").filter(F.col("table_name") == "bronze.zj_task_log_events")
           .filter(F.col("expectation_id").isin("blank_lines", "unrecognised_lines"))
           .select("expectation_id", "severity", "element_count", "unexpected_count"))
    assert sorted(map(tuple, ops.collect())) == [("blank_lines", "info", 27883, 5038),
                                                 ("unrecognised_lines", "info", 27883, 1980)]


def test_real_master_log_kinds_and_nccl_fields(spark, real):
    _, config = real
    master = _table(spark, config, "bronze", "zj_task_log_events").filter(F.col("pod") == f"{JOB}-master")
    kinds = {r.kind: r["count"] for r in master.groupBy("kind").count().collect()}
    assert kinds == {"ds_logger": 306, "hf_checkpoint_save": 5, "hf_logger": 99, "hf_metrics_dict": 1,
                     "hf_on_log": 2436, "hf_on_log_summary": 1, "hf_train_start": 1, "kubectl_preamble": 1,
                     "nccl": 159, "nccl_version": 1, "torch_elastic": 1, "tqdm": 2438,
                     "blank": 2483, "unrecognised": 566}
    nccl = master.filter(F.col("kind") == "nccl")
    subkinds = {r.subkind: r["count"] for r in nccl.groupBy("subkind").count().collect()}
    assert subkinds == {"bootstrap": 1, "channel": 78, "comm": 5, "env": 4, "net_ib": 1, "other": 43,
                        "ring": 24, "trees": 3}
    net_ib = nccl.filter(F.col("subkind") == "net_ib").select(
        "line_no", "host", "pid", "tid", "cuda_dev", "fields_json")
    assert [tuple(r) for r in net_ib.collect()] == [(61, "NH-DC-NM129-B01-28U-GPU-31", 3780764, 3790575, 0,
        '{"interface":"bondYW","ip":"10.107.254.31","nics":["mlx5_2","mlx5_3","mlx5_8","mlx5_9"]}')]
    comm = nccl.filter(F.col("subkind") == "comm").select("rank", "nranks", F.get_json_object("fields_json", "$.state"))
    assert sorted(map(tuple, comm.collect())) == [(0, 32, "Abort")] * 2 + [(0, 32, "Init")] * 3
    version = master.filter(F.col("kind") == "nccl_version").select("line_no", "fields_json").first()
    assert tuple(version) == (60, '{"version":"2.14.3+cuda11.7"}')


def test_real_ranks_follow_the_join_path(spark, real):
    _, config = real
    ranks = _table(spark, config, "silver", "zj_task_ranks")
    assert ranks.count() == 32
    cols = ["rank", "node_rank", "local_rank", "rank_source", "pod", "host_ip", "host_name", "cuda_dev", "bus_id",
            "nic_index", "nic_source", "rdma_name", "netdev", "nic_ip", "device_name", "port_name",
            "rail_group", "rail"]
    picked = {r.rank: tuple(r) for r in ranks.filter(F.col("rank").isin(0, 25)).select(*cols).collect()}
    assert picked[0] == (0, 0, 0, "nccl", f"{JOB}-master", "10.107.254.31", "NH-DC-NM129-B01-28U-GPU-31", 0,
                         "10000", 0, "nccl", "mlx5_2", "ens10np0", "10.107.223.31",
                         "NH-DC-NM129-B04-ROCE-Leaf-2.GPU.S9825", "TwoHundredGigE1/0/16:1", 1, 1)
    # rank 25 is GPU 1 of node 3 = worker-2 (started after worker-3): the ring peer of rank 0 in §7
    assert picked[25] == (25, 3, 1, "pod_start_order", f"{JOB}-worker-2", "10.107.254.149",
                          "NH-DC-NM129-F02-20U-GPU-149", 1, "16000", 0, "affinity", "mlx5_2", "ens10np0",
                          "10.107.231.29", "NH-DC-NM129-F03-ROCE-Leaf-10.GPU.S9825", "TwoHundredGigE1/0/15:1", 3, 1)
    nodes = ranks.groupBy("node_rank", "pod", "rank_source").count().orderBy("node_rank", "rank_source")
    assert [tuple(r) for r in nodes.collect()] == [
        (0, f"{JOB}-master", "nccl", 1), (0, f"{JOB}-master", "nccl_node", 7),
        (1, f"{JOB}-worker-1", "pod_start_order", 8), (2, f"{JOB}-worker-3", "pod_start_order", 8),
        (3, f"{JOB}-worker-2", "pod_start_order", 8)]
    buses = {r.rank: r.bus_id for r in ranks.filter(F.col("bus_id").isNotNull()).collect()}
    assert buses == {0: "10000", 1: "16000", 3: "4d000", 5: "8f000", 7: "ca000", 8: "14000", 16: "14000", 25: "16000"}
    per_leaf = ranks.groupBy("rdma_name").agg(F.count("*").alias("n"), F.countDistinct("device_name").alias("leafs"))
    # 4 hosts in 3 rail groups (GPU-68 and GPU-70 share group 2): each device reaches 3 leafs
    assert sorted(map(tuple, per_leaf.collect())) == [(f"mlx5_{d}", 8, 3) for d in (2, 3, 8, 9)]


def test_real_iterations_and_checkpoints(spark, real):
    _, config = real
    it = _table(spark, config, "silver", "zj_task_iterations").orderBy("iteration")
    rows = it.select("iteration", "duration_s", "is_checkpoint", "checkpoint_step", "style", "source_pod",
                     "iterations_in_record", "iterations_total").collect()
    assert [r.iteration for r in rows] == list(range(1, 2437))
    assert {(r.style, r.source_pod, r.iterations_in_record, r.iterations_total) for r in rows} == {
        ("hf", f"{JOB}-master", 1, 2436)}
    durations = [r.duration_s for r in rows]
    assert statistics.median(durations) == 45.786           # doc: median ≈ 45.786 s
    assert (min(durations), max(durations)) == (45.614, 79.847)
    assert sum(durations) == pytest.approx(111725.022, abs=1e-6)  # master's train_runtime: 111725.0543
    assert {r.iteration: (r.duration_s, r.checkpoint_step) for r in rows if r.is_checkpoint} == {
        501: (78.678, 500), 1001: (79.263, 1000), 1501: (79.591, 1500), 2001: (79.847, 2000)}  # ≈ 79 s
    first = it.filter(F.col("iteration") == 1).select(
        F.date_format("start_ts", "HH:mm:ss.SSS"), F.date_format("end_ts", "HH:mm:ss.SSS"), "duration_s").first()
    assert tuple(first) == ("06:17:12.319", "06:18:02.707", 50.388)  # from `***** Running training *****`


# ---------------------------------------------------------------- grammar on a synthetic log

@pytest.mark.portable
def test_log_pieces_are_classified_and_counted(spark):
    folder = FIXTURES / "tasks"
    inputs = {i.table: i for i in plan(folder, folder / "staging")}
    log = inputs["bronze.zj_task_log_events"]
    parsed = parse_log_events(spark, log.files, load_schema("bronze.zj_task_log_events"))
    assert parsed.count() == count_lines(Path(log.files[0].path)) == 13
    got = parsed.select("line_no", "segment", "kind", "subkind", "elastic_local_rank", "rank", "nranks", "iteration",
                        "iterations_total", "loss", "elapsed_ms", F.date_format("ts", "HH:mm:ss.SSS").alias("t"),
                        "fields_json", PARSE_ERRORS)
    expected = spark.createDataFrame([
        (1, 0, "kubectl_preamble", None, None, None, None, None, None, None, None, None,
         '{"container":"pytorch","containers":"pytorch, sync-barrier (init)"}', []),
        (2, 0, "blank", None, None, None, None, None, None, None, None, None, None, []),
        (3, 1, "tqdm", None, None, None, None, 0, 2, None, None, None,
         '{"percent":0,"elapsed":"00:00","remaining":"?","rate":"?","rate_unit":"it/s"}', []),
        (3, 2, "tqdm", None, None, None, None, 1, 2, None, None, None,
         '{"percent":50,"elapsed":"00:10","remaining":"00:10","rate":"10.00","rate_unit":"s/it",'
         '"tail":"{\'loss\': 1.5, \'learning_rate\': 1e-05, \'epoch\': 0.5}"}', []),
        (4, 0, "hf_on_log", None, None, None, None, 1, 2, 1.5, None, "00:00:10.500",
         '{"elapsed":"00:10","remaining":"00:10","rate":"10.0","rate_unit":"s/it","epoch":0.5}', []),
        (5, 0, "nccl", "net_ib", 3, None, None, None, None, None, None, None,
         '{"interface":"enp220s0np0","ip":"11.1.128.136","nics":["mlx5_10","mlx5_11"]}', []),
        (6, 0, "nccl", "comm", 3, 6, 16, None, None, None, None, None,
         '{"comm":"0x8ec0ac0","bus_id":"c8000","state":"Init"}', []),
        (7, 0, "megatron_iteration", None, None, None, None, 122, 250000, 2.50422, 86545.2, None,
         '{"consumed_samples":124928,"global_batch_size":1024,"grad_norm":0.231,"skipped_iterations":0,'
         '"nan_iterations":0}', []),
        (8, 0, "megatron_argument", None, None, None, None, None, None, None, None, None,
         '{"value":"1","key":"tensor_model_parallel_size"}', []),
        (9, 0, "nccl", "channel", None, None, None, None, None, None, None, None,
         '{"channel":0,"src_rank":3,"src_bus":"3","dst_rank":4,"dst_bus":"0","direction":"receive",'
         '"transport":"NET/IBext_v8/0/GDRDMA","nic_index":0}', []),
        (10, 0, "unrecognised", None, None, None, None, None, None, None, None, None, None, []),
        (11, 0, "ds_logger", None, None, None, None, None, None, None, None, None, None,
         ["ts: '2024-13-01 00:00:00,000' is not a valid timestamp"]),
        (12, 0, "hf_logger", None, None, None, None, None, 2436, None, None, "00:00:00.100", None, []),
    ], got.schema)
    assert_same_rows(got, expected)


@pytest.mark.portable
def test_pod_listing_lines_that_do_not_fit_carry_reasons(spark):
    folder = FIXTURES / "tasks"
    pods = {i.table: i for i in plan(folder, folder / "staging")}["bronze.zj_task_pods"]
    got = parse_pods(spark, pods.files, load_schema("bronze.zj_task_pods")).select(
        "pod", "role", "worker_index", "host_num", PARSE_ERRORS)
    assert_same_rows(got, spark.createDataFrame([
        ("demo-a1b2c-master", "master", None, 1, []),
        (None, None, None, None, ["expected 4 whitespace-separated fields: pod, hostIP, node, startTime"]),
        ("demo-a1b2c-worker-2", "worker", 2, 3, ["start_ts: '2024-13-01T00:00:00Z' is not an RFC 3339 UTC time"]),
    ], got.schema))


@pytest.mark.portable
def test_plan_rejects_what_is_not_a_task_folder(tmp_path):
    assert plan(tmp_path, tmp_path / "s") == []
    (tmp_path / "taskinfo" / "20240101-0000-1").mkdir(parents=True)
    (tmp_path / "taskinfo" / ".DS_Store").write_text("")
    (tmp_path / "taskinfo" / "20240101-0000-1" / "notes.txt").write_text("")
    with pytest.raises(TracelakeError, match="notes.txt: unexpected file"):
        plan(tmp_path, tmp_path / "s")
    (tmp_path / "taskinfo" / "20240101-0000-1" / "notes.txt").unlink()
    (tmp_path / "taskinfo" / "latest").mkdir()
    with pytest.raises(TracelakeError, match="taskinfo/latest: task folders are named YYYYMMDD-HHMM-N"):
        plan(tmp_path, tmp_path / "s")


# ---------------------------------------------------------------- writer round trip

HOSTS = (
    HostSpec("NH-DC-NM129-B01-28U-GPU-31", "10.107.254.31", ("mlx5_2", "mlx5_3", "mlx5_8", "mlx5_9")),
    HostSpec("NH-DC-NM129-C05-20U-GPU-68", "10.107.254.68", ("mlx5_2", "mlx5_3", "mlx5_8", "mlx5_9")),
    HostSpec("NH-DC-NM129-F02-20U-GPU-132", "10.107.254.132", ("mlx5_7", "mlx5_4", "mlx5_3", "mlx5_2")),
)
START = datetime(2024, 5, 23, 15, 40, 0, 250000, tzinfo=UTC)


def _spec(style: str, iterations: int = 25) -> TaskSpec:
    first = START + timedelta(seconds=197.3191)
    ends, t = [], first
    for i in range(1, iterations + 1):
        t += timedelta(seconds=45.7 + 0.0137 * i + (33.3 if i % 10 == 1 and i > 1 else 0.0))
        ends.append(t)
    return TaskSpec("20240523-1540-3", f"llama2-7b-{style}-ab12c", style, HOSTS, 8, START, tuple(ends), first)


def _us(dt: datetime, resolution_us: int) -> int:
    micros = round(dt.timestamp() * 1_000_000)
    return micros - micros % resolution_us


def _expected_steps(spec: TaskSpec) -> list[tuple]:
    """(iteration, start µs, end µs, duration s, checkpoint step) as the logs can state them."""
    rows, starts = [], (spec.first_step_start, *spec.iteration_ends[:-1])
    for i, (begin, end) in enumerate(zip(starts, spec.iteration_ends), start=1):
        ckpt = i - 1 if (i - 1) % generate_tasks.SAVE_STEPS == 0 and i > 1 else None
        if spec.style == "hf":  # ms timestamps: end and start exact to the ms
            s, e = _us(begin, 1000), _us(end, 1000)
            rows.append((i, s, e, (e - s) / 1e6, ckpt))
        else:  # 1 s print time, elapsed ms to 0.1 ms
            e = _us(end, 1_000_000)
            duration = round((end - begin).total_seconds() * 1000, 1) * 1 / 1000.0
            rows.append((i, e - round(duration * 1e6), e, duration, ckpt))
    return rows


def _expected_ranks(spec: TaskSpec) -> list[tuple]:
    pods = [f"{spec.job}-master"] + [f"{spec.job}-worker-{i}" for i in range(1, len(spec.hosts))]
    return [(h * 8 + local, pods[h], host.host_ip, host.sysname, nccl_nics(host)[local * len(host.nics) // 8])
            for h, host in enumerate(spec.hosts) for local in range(8)]


def _steps(df) -> list[tuple]:
    return [tuple(r) for r in df.orderBy("iteration").select(
        "iteration", F.unix_micros("start_ts"), F.unix_micros("end_ts"), "duration_s", "checkpoint_step").collect()]


def _nic_map(spark, spec: TaskSpec):
    """silver.zj_nic_map rows for the spec's hosts (netdev, IP and port invented per device)."""
    rows = []
    for host in spec.hosts:
        number = int(host.sysname.rsplit("-", 1)[1])
        for k, rdma in enumerate(nccl_nics(host)):
            rows.append((number, host.sysname, host.host_ip, "A", rdma, f"ens{10 + k}np0", f"10.107.{222 + k}.{number}",
                         f"NH-DC-ROCE-Leaf-{k + 1}.GPU.S9825", f"Leaf-{k + 1}", k + 1, None,
                         f"TwoHundredGigE1/0/{k + 1}:1",
                         1, k, True, True, False, []))
    return spark.createDataFrame(rows, load_schema("silver.zj_nic_map").spark_schema())


def _stored(df, path: Path):
    df.write.parquet(str(path))
    return df.sparkSession.read.parquet(str(path))


@pytest.mark.portable
@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_hf_task_round_trips_through_the_parser(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(generate_tasks, "SAVE_STEPS", 10)
    spec = _spec("hf")
    folder = write_task(tmp_path / "taskinfo", spec, seed=11)
    inputs = {i.table: i for i in plan(tmp_path, tmp_path / "staging")}
    # parsed once and stored, as ingest does: the transforms then plan over plain columns
    events = _stored(parse_log_events(spark, inputs["bronze.zj_task_log_events"].files,
                                      load_schema("bronze.zj_task_log_events")), tmp_path / "events")
    pods = _stored(parse_pods(spark, inputs["bronze.zj_task_pods"].files, load_schema("bronze.zj_task_pods")),
                   tmp_path / "pods")
    read = {p.name: count_lines(p) for p in folder.glob("*-*.log") if p.name != "pod-node-starttime.log"}
    assert _by_file(events) == read  # every line accounted for: recognised or carrying a reason
    good = events.filter(F.size(PARSE_ERRORS) == 0)
    assert pods.filter(F.size(PARSE_ERRORS) > 0).count() == 0

    assert _steps(task_iterations(good)) == _expected_steps(spec)
    ranks = task_ranks(pods.filter(F.size(PARSE_ERRORS) == 0), good, _nic_map(spark, spec))
    got = ranks.orderBy("rank").select("rank", "pod", "host_ip", "host_name", "rdma_name").collect()
    assert [tuple(r) for r in got] == _expected_ranks(spec)
    sources = ranks.groupBy("rank_source", "nic_source").count().collect()
    assert sorted(map(tuple, sources)) == [("nccl", "nccl", 1), ("nccl_node", "affinity", 7),
                                           ("pod_start_order", "affinity", 16)]


def test_megatron_task_round_trips_through_the_pipeline(engine, spark, config, tmp_path, monkeypatch):
    monkeypatch.setattr(generate_tasks, "SAVE_STEPS", 10)
    # only this part's derived tables: the correlation tables of other parts need traffic/topology
    monkeypatch.setattr(zhejiang_source, "SOURCE", replace(zhejiang_source.declare(), derived=(*topology.DERIVED, *tasklogs.DERIVED)), raising=False)
    spec = _spec("megatron")
    folder = write_task(tmp_path / "raw" / "taskinfo", spec, seed=5)
    stats = {s.table: s for s in run_ingest(engine, config, "zhejiang", str(tmp_path / "raw"))}
    read = sum(count_lines(p) for p in folder.glob("*-*.log") if p.name != "pod-node-starttime.log")
    s = stats["bronze.zj_task_log_events"]
    assert s.rows_read == read == s.rows_kept + s.rows_quarantined

    assert _steps(_table(spark, config, "silver", "zj_task_iterations")) == _expected_steps(spec)
    ranks = _table(spark, config, "silver", "zj_task_ranks")
    got = ranks.orderBy("rank").select("rank", "pod", "host_ip", "host_name", "rdma_name").collect()
    assert [tuple(r) for r in got] == _expected_ranks(spec)  # no workbook needed: NCCL names every device
    assert sorted(map(tuple, ranks.groupBy("rank_source", "nic_source").count().collect())) == [("nccl", "nccl", 24)]

    versions = {t: history(engine, config.table_path(*t.split(".")), 1)[0].version
                for t in ("bronze.zj_task_log_events", "bronze.zj_task_pods")}
    run_ingest(engine, config, "zhejiang", str(tmp_path / "raw"))  # same files again: nothing changes
    assert {t: history(engine, config.table_path(*t.split(".")), 1)[0].version for t in versions} == versions


@pytest.mark.portable
def test_writer_is_deterministic_and_checks_its_spec(tmp_path):
    spec = _spec("hf", iterations=3)
    a, b = write_task(tmp_path / "a", spec, seed=3), write_task(tmp_path / "b", spec, seed=3)
    assert {p.name: p.read_bytes() for p in a.iterdir()} == {p.name: p.read_bytes() for p in b.iterdir()}
    assert (a / "pod-node-starttime.log").read_text().splitlines()[0] == (
        f"{'llama2-7b-hf-ab12c-master':<74}{'10.107.254.31':<17}{'nm129-gpu-31':<16}2024-05-23T15:40:00Z")
    with pytest.raises(TracelakeError, match="task id '20240523-1541-3' should be '20240523-1540-3'"):
        write_task(tmp_path, TaskSpec("20240523-1541-3", *list(spec.__dict__.values())[1:]), seed=3)
    with pytest.raises(TracelakeError, match="style must be 'hf' or 'megatron'"):
        write_task(tmp_path, TaskSpec(spec.task_id, spec.job, "fsdp", *list(spec.__dict__.values())[3:]), seed=3)


# ---------------------------------------------------------------- a run restarted from a checkpoint

HF_START = "[INFO|trainer.py:1721] 2024-01-01 00:{m:02d}:{s:02d},000 >> ***** Running training *****"
HF_STEP = ("[2024-01-01 00:{m:02d}:{s:02d},000] [INFO] [hf_trainer.py:53:on_log] loss: 1.5, learning_rate: 1e-05, "
           "epoch: 0.5, iter: {i}/10,  00:10 < 00:10,  10.0s/it")
MEGATRON_STEP = ("[2024-01-01 00:{m:02d}:{s:02d}] iteration {i:>8}/      10 | consumed samples: {n:>12} | elapsed time "
                 "per iteration (ms): 10000.0 | learning rate: 1.000E-05 | global batch size:  1024 | lm loss: 2.5E+00 |")


def _at(seconds: int) -> dict[str, int]:
    return {"m": seconds // 60, "s": seconds % 60}


def _restarted_log(style: str, start_logged: bool) -> list[str]:
    """Steps 1-8 every 10 s from 00:00:00, then a restart from the checkpoint after step 3: steps
    4-6 again, ending at 00:04:50, 00:05:00, 00:05:10 (HF: a training start at 00:04:40 when
    `start_logged`)."""
    step = HF_STEP if style == "hf" else MEGATRON_STEP
    lines = [HF_START.format(**_at(0))] if style == "hf" else []
    lines += [step.format(i=i, n=1024 * i, **_at(10 * i)) for i in range(1, 9)]
    if start_logged:
        lines.append(HF_START.format(**_at(280)))
    lines += [step.format(i=i, n=1024 * i, **_at(250 + 10 * i)) for i in range(4, 7)]
    return lines


def _restarted_events(spark, tmp_path: Path, style: str, start_logged: bool = False):
    task = tmp_path / "taskinfo" / "20240101-0000-1"
    task.mkdir(parents=True)
    base = FIXTURES / "tasks" / "taskinfo" / "20240101-0000-1"
    (task / "pod-node-starttime.log").write_text((base / "pod-node-starttime.log").read_text())
    (task / "demo-a1b2c-master.log").write_text("\n".join(_restarted_log(style, start_logged)) + "\n")
    logs = {i.table: i for i in plan(tmp_path, tmp_path / "staging")}["bronze.zj_task_log_events"]
    events = parse_log_events(spark, logs.files, load_schema("bronze.zj_task_log_events"))
    assert events.filter(F.size(PARSE_ERRORS) > 0).count() == 0
    return _stored(events, tmp_path / "events")


def _restart_rows(restarts):
    return [(r.restart, r.stopped_iteration, r.resumed_iteration, r.redone_iterations, r.pause_s, r.redone_s,
             r.time_lost_s, r.pause_to_step_start, r.stopped_ts.strftime("%H:%M:%S"), r.resumed_ts.strftime("%H:%M:%S"))
            for r in restarts.orderBy("restart").collect()]


@pytest.mark.portable
@pytest.mark.parametrize("style, start_logged, first_after, pause", [
    ("hf", False, None, 210.0),   # no training start logged after the restart: step 4's start unknown
    pytest.param("hf", True, 10.0, 200.0, marks=pytest.mark.slow_on_classic),  # `***** Running training *****` at 00:04:40
    pytest.param("megatron", False, 10.0, 200.0, marks=pytest.mark.slow_on_classic),  # each step's own elapsed time
])
def test_a_restarted_run_gives_positive_steps_and_a_restart_event(spark, tmp_path, style, start_logged, first_after, pause):
    events = _restarted_events(spark, tmp_path, style, start_logged)
    steps = task_iterations(events).orderBy("iteration").select(
        "iteration", "duration_s", "restarts_before", "after_restart").collect()
    assert [tuple(r) for r in steps] == [
        (1, 10.0, 0, False), (2, 10.0, 0, False), (3, 10.0, 0, False),
        (4, first_after, 1, True), (5, 10.0, 1, False), (6, 10.0, 1, False),  # the run that went on
        (7, 10.0, 0, False), (8, 10.0, 0, False)]  # logged once, before the restart
    # stopped after step 8 at 00:01:20, went back to step 4; steps 4-8 (50 s) thrown away
    assert _restart_rows(task_restarts(events)) == [
        (1, 8, 4, 5, pause, 50.0, pause + 50.0, first_after is not None, "00:01:20", "00:04:50")]


@pytest.mark.portable
def test_a_run_without_restarts_has_no_restart_rows_and_one_segment(spark, tmp_path):
    task = tmp_path / "taskinfo" / "20240101-0000-1"
    task.mkdir(parents=True)
    base = FIXTURES / "tasks" / "taskinfo" / "20240101-0000-1"
    (task / "pod-node-starttime.log").write_text((base / "pod-node-starttime.log").read_text())
    (task / "demo-a1b2c-master.log").write_text(
        "\n".join([HF_START.format(**_at(0)), *(HF_STEP.format(i=i, **_at(10 * i)) for i in range(1, 4))]) + "\n")
    logs = {i.table: i for i in plan(tmp_path, tmp_path / "staging")}["bronze.zj_task_log_events"]
    events = parse_log_events(spark, logs.files, load_schema("bronze.zj_task_log_events"))
    assert task_restarts(events).count() == 0
    assert [tuple(r) for r in task_iterations(events).orderBy("iteration").select(
        "iteration", "duration_s", "restarts_before").collect()] == [(1, 10.0, 0), (2, 10.0, 0), (3, 10.0, 0)]
