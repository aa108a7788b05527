"""Zhejiang task layer: ranks placed on hosts, GPUs, NICs and leaf ports; per-step intervals.

Join path of docs/formats/zhejiang.md §7. Only what the logs say is taken as fact (NCCL comm, Channel
and NET/IB lines); where they are silent (the sample logs NCCL from rank 0 only) the documented
inferences are used and each row says which source it came from.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

DEFAULT_GPUS_PER_HOST = 8  # A100 HGX servers of cluster_2000_A100
RECORD_KINDS = ("hf_on_log", "megatron_iteration")


def _json(name: str, type_name: str = "string") -> Column:
    return F.get_json_object(F.col("fields_json"), f"$.{name}").cast(type_name)


def _pod_order(role: Column, worker_index: Column) -> Column:
    """master first, then workers by index (the file-name order, not the start order)."""
    return F.when(role == "master", F.lit(0)).otherwise(F.lit(1)) * 100000 + F.coalesce(worker_index, F.lit(0))


def _first_by(df: DataFrame, keys: list[str], order: list[Column]) -> DataFrame:
    w = Window.partitionBy(*keys).orderBy(*order)
    return df.withColumn("_n", F.row_number().over(w)).filter(F.col("_n") == 1).drop("_n")


def _task_sizes(pods: DataFrame, events: DataFrame, comm: DataFrame) -> DataFrame:
    """world_size (NCCL nranks, else a logged world_size, else pods × 8) and GPUs per host."""
    n_pods = pods.groupBy("task_id").agg(F.count("*").alias("n_pods"))
    nccl = comm.groupBy("task_id").agg(F.max("nranks").alias("w_nccl"))
    logged = (events.select("task_id", _json("world_size", "int").alias("w"))
              .filter(F.col("w").isNotNull()).groupBy("task_id").agg(F.max("w").alias("w_logged")))
    sizes = n_pods.join(nccl, "task_id", "left").join(logged, "task_id", "left")
    world = F.coalesce("w_nccl", "w_logged", F.col("n_pods") * DEFAULT_GPUS_PER_HOST)
    gph = F.when(world % F.col("n_pods") == 0, (world / F.col("n_pods")).cast("int")).otherwise(
        F.lit(DEFAULT_GPUS_PER_HOST))
    return sizes.select("task_id", world.cast("int").alias("world_size"), gph.alias("gpus_per_host"))


def _nccl_facts(events: DataFrame) -> dict[str, DataFrame]:
    nccl = events.filter(F.col("kind") == "nccl")
    comm = nccl.filter(F.col("subkind") == "comm").select(
        "task_id", "pod", "pid", "tid", "host", "rank", "nranks", "cuda_dev", "line_no",
        _json("bus_id").alias("bus_id"))
    channels = nccl.filter(F.col("subkind") == "channel").select(
        "task_id", "pod", "pid", "tid", _json("nic_index", "int").alias("nic_index"),
        _json("src_rank", "int").alias("src_rank"), _json("src_bus").alias("src_bus"),
        _json("dst_rank", "int").alias("dst_rank"), _json("dst_bus").alias("dst_bus"))
    nic_lists = nccl.filter(F.col("subkind") == "net_ib").select(
        "task_id", "pod", "pid",
        F.posexplode(F.from_json(F.col("fields_json"), "nics array<string>").getField("nics"))
        .alias("pos", "rdma"))
    hosts = _first_by(nccl.select("task_id", "pod", "host", "line_no"), ["task_id", "pod"],
                      [F.col("line_no")]).drop("line_no")
    return {"comm": comm, "channels": channels, "nic_lists": nic_lists, "hosts": hosts}


def _pod_nodes(pods: DataFrame, world_comm: DataFrame, sizes: DataFrame) -> DataFrame:
    """node_rank of each pod: from its own NCCL world rank, else its place in start order."""
    start_order = Window.partitionBy("task_id").orderBy(
        "start_ts", _pod_order(F.col("role"), F.col("worker_index")), "pod")
    by_nccl = world_comm.groupBy("task_id", "pod").agg(F.min("rank").alias("min_rank"))
    nodes = (pods.withColumn("inferred", F.row_number().over(start_order) - 1)
             .join(by_nccl, ["task_id", "pod"], "left").join(sizes, "task_id"))
    from_nccl = F.floor(F.col("min_rank") / F.col("gpus_per_host")).cast("int")
    nodes = nodes.select(
        "task_id", "pod", "role", "host_ip", "k8s_node", "host_num",
        F.coalesce(from_nccl, F.col("inferred")).alias("node_rank"),
        F.when(from_nccl.isNotNull(), "nccl_node").otherwise("pod_start_order").alias("node_source"),
    )
    # two pods claiming one node rank (a conflict in the logs): the NCCL-placed one wins
    nccl_first = F.when(F.col("node_source") == "nccl_node", 0).otherwise(1)
    return _first_by(nodes, ["task_id", "node_rank"], [nccl_first, F.col("pod")])


def _bus_ids(comm: DataFrame, channels: DataFrame, world_threads: DataFrame) -> DataFrame:
    """rank → busId from world-comm lines; a bracket shorter than 5 hex digits is a cudaDev (2.19+)."""
    in_world = channels.join(world_threads, ["task_id", "pod", "pid", "tid"], "left_semi")
    side = lambda end: in_world.select(  # noqa: E731
        "task_id", F.col(f"{end}_rank").alias("rank"), F.col(f"{end}_bus").alias("bus_id"))
    mentions = (comm.select("task_id", "rank", "bus_id").unionByName(side("src")).unionByName(side("dst"))
                .filter(F.length("bus_id") >= 5))
    return mentions.groupBy("task_id", "rank").agg(F.min("bus_id").alias("bus_id"))


def _process_nics(channels: DataFrame) -> DataFrame:
    """The NIC index a process uses most in its `via NET/IB/<k>` lines (ties: lowest k)."""
    counts = (channels.filter(F.col("nic_index").isNotNull())
              .groupBy("task_id", "pod", "pid", "nic_index").agg(F.count("*").alias("n")))
    return _first_by(counts, ["task_id", "pod", "pid"], [F.col("n").desc(), F.col("nic_index")]).select(
        "task_id", "pod", "pid", F.col("nic_index").alias("nccl_nic_index"))


def task_ranks(pods: DataFrame, events: DataFrame, nic_map: DataFrame) -> DataFrame:
    """silver.zj_task_ranks from bronze.zj_task_pods, bronze.zj_task_log_events, silver.zj_nic_map."""
    facts = _nccl_facts(events)
    comm = facts["comm"]
    sizes = _task_sizes(pods, events, comm)
    world_comm = comm.join(sizes, "task_id").filter(F.col("nranks") == F.col("world_size"))
    world_threads = world_comm.select("task_id", "pod", "pid", "tid").distinct()
    nccl_ranks = _first_by(world_comm, ["task_id", "rank"], [F.col("line_no")]).select(
        "task_id", "rank", F.col("pod").alias("nccl_pod"), "pid", F.col("cuda_dev").alias("nccl_cuda_dev"))
    nodes = _pod_nodes(pods, world_comm, sizes)

    ranks = sizes.select("task_id", "world_size", "gpus_per_host",
                         F.explode(F.sequence(F.lit(0), F.col("world_size") - 1)).alias("rank"))
    ranks = ranks.select("*", F.floor(F.col("rank") / F.col("gpus_per_host")).cast("int").alias("node_rank"),
                         (F.col("rank") % F.col("gpus_per_host")).cast("int").alias("local_rank"))
    ranks = (ranks.join(nodes.select("task_id", "node_rank", F.col("pod").alias("node_pod"), "node_source"),
                        ["task_id", "node_rank"], "left")
             .join(nccl_ranks, ["task_id", "rank"], "left"))
    ranks = ranks.select(
        "*", F.coalesce("nccl_pod", "node_pod").alias("pod"),
        F.when(F.col("nccl_pod").isNotNull(), "nccl").otherwise(F.col("node_source")).alias("rank_source"))
    attrs = pods.select("task_id", "pod", "role", "host_ip", "k8s_node", "host_num")
    ranks = ranks.join(attrs, ["task_id", "pod"], "left")
    ranks = ranks.join(_process_nics(facts["channels"]), ["task_id", "pod", "pid"], "left")
    return _with_nics(ranks, facts, nic_map).join(_bus_ids(comm, facts["channels"], world_threads),
                                                  ["task_id", "rank"], "left").select(*_RANK_COLUMNS)


_RANK_COLUMNS = [
    "task_id", "rank", "world_size", "gpus_per_host", "node_rank", "local_rank", "rank_source",
    "pod", "role", "host_ip", "k8s_node", "host_num", "host_name", "cuda_dev", "bus_id", "nic_index",
    "nic_source", "rdma_name", "netdev", "nic_ip", "device_name", "leaf", "port_name",
    "rail_group", "rail",
]


def _with_nics(ranks: DataFrame, facts: dict[str, DataFrame], nic_map: DataFrame) -> DataFrame:
    """rank → NIC index → RDMA device → netdev, NIC IP, leaf port."""
    proc_list = facts["nic_lists"].groupBy("task_id", "pod", "pid", "pos").agg(F.min("rdma").alias("proc_rdma"))
    pod_list = facts["nic_lists"].groupBy("task_id", "pod", "pos").agg(F.min("rdma").alias("pod_rdma"))
    pod_n = pod_list.groupBy("task_id", "pod").agg(F.count("*").alias("pod_n"))
    devices = nic_map.filter(F.col("rdma_name").isNotNull()).select(
        "host_num", "rdma_name", F.regexp_extract("rdma_name", r"(\d+)$", 1).cast("int").alias("dev_no"))
    host_list = devices.select(
        "host_num", F.col("rdma_name").alias("host_rdma"),
        (F.row_number().over(Window.partitionBy("host_num").orderBy("dev_no", "rdma_name")) - 1).alias("pos"))
    host_n = host_list.groupBy("host_num").agg(F.count("*").alias("host_n"))

    n = F.coalesce("pod_n", "host_n")
    affinity = F.floor(F.col("local_rank") * n / F.col("gpus_per_host")).cast("int")
    ranks = ranks.join(pod_n, ["task_id", "pod"], "left").join(host_n, "host_num", "left").select(
        "*", F.coalesce(F.col("nccl_nic_index"), affinity).alias("nic_index"),
        F.when(F.col("nccl_nic_index").isNotNull(), "nccl").when(n.isNotNull(), "affinity").alias("nic_source"))
    ranks = (ranks.join(proc_list.withColumnRenamed("pos", "nic_index"), ["task_id", "pod", "pid", "nic_index"], "left")
             .join(pod_list.withColumnRenamed("pos", "nic_index"), ["task_id", "pod", "nic_index"], "left")
             .join(host_list.withColumnRenamed("pos", "nic_index"), ["host_num", "nic_index"], "left"))
    rdma = F.coalesce("proc_rdma", F.when(F.col("pod_n").isNotNull(), F.col("pod_rdma")).otherwise(F.col("host_rdma")))
    ranks = ranks.select("*", rdma.alias("rdma_name"))
    host_names = nic_map.filter(F.col("host_name").isNotNull()).groupBy("host_num").agg(
        F.first("host_name").alias("map_host_name"))
    ports = nic_map.filter(F.col("rdma_name").isNotNull()).select(
        "host_num", "rdma_name", "netdev", "nic_ip", "device_name", "leaf", "port_name", "rail_group", "rail")
    ranks = (ranks.join(ports, ["host_num", "rdma_name"], "left").join(host_names, "host_num", "left")
             .join(facts["hosts"].withColumnRenamed("host", "nccl_host"), ["task_id", "pod"], "left"))
    return ranks.select(
        "*", F.coalesce("nccl_host", "map_host_name").alias("host_name"),
        F.coalesce("nccl_cuda_dev", "local_rank").alias("cuda_dev"))


def _records(events: DataFrame) -> DataFrame:
    """Step records of one pod per task (the first pod in master, worker-1, … order that has
    them), each with its place in the log (`pos`, a number that grows with line and piece)."""
    rec = events.filter(F.col("kind").isin(*RECORD_KINDS)).select(
        "task_id", "pod", "kind", "iteration", "iterations_total", "ts", "elapsed_ms", "loss",
        "learning_rate", "line_no", (F.col("line_no").cast("bigint") * 100000 + F.col("segment")).alias("pos"),
        _pod_order(F.col("role"), F.col("worker_index")).alias("pod_order"))
    first_pod = rec.groupBy("task_id").agg(F.min("pod_order").alias("pod_order"))
    return rec.join(first_pod, ["task_id", "pod_order"], "left_semi")


def _segmented(rec: DataFrame) -> DataFrame:
    """`restarts_before`: a run goes back to a checkpoint when a record's iteration is not above
    the one logged before it; the records from there to the next such jump are one segment."""
    in_log = Window.partitionBy("task_id").orderBy("pos")
    back = F.coalesce(F.col("iteration") <= F.lag("iteration").over(in_log), F.lit(False))
    marked = rec.select("*", back.cast("int").alias("_back"), F.lag("pos").over(in_log).alias("prev_pos"))
    upto = in_log.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return marked.select("*", F.sum("_back").over(upto).cast("int").alias("restarts_before")).drop("_back")


def _segment_starts(rec: DataFrame, events: DataFrame) -> DataFrame:
    """(task_id, pos, segment_start): the HF `***** Running training *****` line that starts a
    segment's first record, the last one logged before it and after the record before it; none
    logged there (a restart that printed none), no start is known."""
    starts = events.filter(F.col("kind") == "hf_train_start").select(
        "task_id", "pod", (F.col("line_no").cast("bigint") * 100000 + F.col("segment")).alias("start_pos"),
        F.col("ts").alias("segment_start"))
    firsts = rec.filter(F.col("first_in_segment")).select("task_id", "pod", "pos", "prev_pos")
    after_previous = F.col("prev_pos").isNull() | (F.col("start_pos") > F.col("prev_pos"))
    found = firsts.join(starts, ["task_id", "pod"]).filter((F.col("start_pos") < F.col("pos")) & after_previous)
    return _first_by(found, ["task_id", "pos"], [F.col("start_pos").desc()]).select("task_id", "pos", "segment_start")


def step_records(events: DataFrame) -> DataFrame:
    """Every step record of the chosen pod with its segment and its interval, each computed
    within its segment: a restart's gap is in no step (HF: from the previous record's end, the
    segment's first record from the training start logged before it; Megatron: the logged
    elapsed time)."""
    rec = _segmented(_records(events))
    seg = Window.partitionBy("task_id", "restarts_before").orderBy("pos")
    rec = rec.select("*", F.lag("iteration").over(seg).isNull().alias("first_in_segment"),
                     F.lag("iteration").over(seg).alias("prev_iteration"),
                     F.lead("iteration").over(seg).alias("next_iteration"),
                     F.lag("ts").over(seg).alias("prev_end"))
    rec = rec.join(_segment_starts(rec, events), ["task_id", "pos"], "left")
    from_start = F.when(F.col("restarts_before") == 0, F.col("iteration")).otherwise(F.lit(1))
    covered = F.coalesce(F.col("iteration") - F.col("prev_iteration"),
                         F.col("next_iteration") - F.col("iteration"), from_start)
    rec = rec.select("*", F.greatest(F.lit(1), F.least(covered, F.col("iteration"))).cast("int").alias(
        "iterations_in_record"))
    is_hf = F.col("kind") == "hf_on_log"
    megatron_s = F.col("elapsed_ms") * F.col("iterations_in_record") / 1000.0
    hf_start = F.coalesce("prev_end", "segment_start")
    start = F.when(is_hf, hf_start).otherwise(
        F.timestamp_micros(F.unix_micros("ts") - F.round(megatron_s * 1e6).cast("bigint")))
    duration = F.when(is_hf, (F.unix_micros("ts") - F.unix_micros(hf_start)) / 1e6).otherwise(megatron_s)
    after_restart = F.col("first_in_segment") & (F.col("restarts_before") > 0)
    return rec.select("*", start.alias("start_ts"), duration.alias("duration_s"),
                      F.when(is_hf, "hf").otherwise("megatron").alias("style"), after_restart.alias("after_restart"))


def _checkpoint_steps(events: DataFrame) -> DataFrame:
    saves = events.filter(
        (F.col("kind") == "hf_checkpoint_save")
        | ((F.col("kind") == "megatron_checkpoint") & (F.col("subkind") == "start")))
    return saves.filter(F.col("iteration").isNotNull()).select(
        "task_id", F.col("iteration").alias("checkpoint_step")).distinct()


def task_iterations(events: DataFrame) -> DataFrame:
    """silver.zj_task_iterations from bronze.zj_task_log_events (see the schema for the rules):
    one row per step; a step logged again after a restart is the later record."""
    rec = _first_by(step_records(events), ["task_id", "iteration"], [F.col("pos").desc()])
    first_step = F.col("iteration") - F.col("iterations_in_record") + 1
    ckpt = _checkpoint_steps(events)
    flagged = rec.alias("r").join(
        ckpt.alias("c"),
        (F.col("r.task_id") == F.col("c.task_id"))
        & (F.col("c.checkpoint_step") >= first_step - 1) & (F.col("c.checkpoint_step") <= F.col("r.iteration") - 1),
        "left",
    ).groupBy(*[F.col(f"r.{c}") for c in ("task_id", "iteration")]).agg(
        F.max("c.checkpoint_step").alias("checkpoint_step"))
    return rec.join(flagged, ["task_id", "iteration"], "left").select(
        "task_id", "iteration", "iterations_in_record", "iterations_total", "style",
        F.col("pod").alias("source_pod"), "start_ts", F.col("ts").alias("end_ts"), "duration_s",
        "loss", "learning_rate", F.col("checkpoint_step").isNotNull().alias("is_checkpoint"),
        "checkpoint_step", "restarts_before", "after_restart")


def task_restarts(events: DataFrame) -> DataFrame:
    """silver.zj_task_restarts: one row per restart of a task's run (see the schema): where the
    run stopped, the step it went back to, the pause, and the time of the steps it threw away."""
    rec = step_records(events)
    in_log = Window.partitionBy("task_id").orderBy("pos")
    rec = rec.select("*", F.lag("iteration").over(in_log).alias("stopped_iteration"),
                     F.lag("ts").over(in_log).alias("stopped_ts"))
    restarts = rec.filter(F.col("after_restart")).select(
        "task_id", F.col("restarts_before").alias("restart"), F.col("pod").alias("source_pod"), "style",
        F.col("line_no").alias("resumed_line_no"), "stopped_iteration", "stopped_ts",
        (F.col("iteration") - F.col("iterations_in_record") + 1).alias("resumed_iteration"),
        F.col("start_ts").alias("resumed_start_ts"), F.col("ts").alias("resumed_ts"))
    # the steps thrown away: the records of the segment before that lie past the step gone back to
    before = rec.select("task_id", (F.col("restarts_before") + 1).alias("restart"), "iteration", "duration_s")
    thrown = (restarts.select("task_id", "restart", "resumed_iteration").join(before, ["task_id", "restart"])
              .filter(F.col("iteration") >= F.col("resumed_iteration"))
              .groupBy("task_id", "restart").agg(F.sum("duration_s").alias("redone_s")))
    pause = (F.unix_micros(F.coalesce("resumed_start_ts", "resumed_ts")) - F.unix_micros("stopped_ts")) / 1e6
    out = restarts.join(thrown, ["task_id", "restart"], "left").select(
        "*", pause.alias("pause_s"), F.coalesce("redone_s", F.lit(0.0)).alias("redone_s_"))
    return out.select(
        "task_id", "restart", "source_pod", "style", "stopped_iteration", "stopped_ts", "resumed_iteration",
        "resumed_ts", (F.col("stopped_iteration") - F.col("resumed_iteration") + 1).alias("redone_iterations"),
        "pause_s", F.col("redone_s_").alias("redone_s"), (F.col("pause_s") + F.col("redone_s_")).alias("time_lost_s"),
        F.col("resumed_start_ts").isNotNull().alias("pause_to_step_start"), "resumed_line_no")
