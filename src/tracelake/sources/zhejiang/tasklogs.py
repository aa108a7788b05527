"""Zhejiang taskinfo/<YYYYMMDD-HHMM-N>/: the pod listing and the torchrun pod logs.

`pod-node-starttime.log` → bronze.zj_task_pods (whitespace-split fixed-width listing);
`<job>-master.log`, `<job>-worker-<i>.log` → bronze.zj_task_log_events, one row per recognised
line. Each log is read whole (one row, wholetext.py), split on LF then on CR with posexplode, so every piece
keeps its exact position (line_no, segment) — the key, and the only ordering a log line has. A
last piece with no newline or CR after it is quarantined as incomplete (a growing log cut it).
Lines are classified and parsed with regexp_extract in Spark; the grammar is
docs/formats/zhejiang.md §5.2 and §6. A blank line and a line of no known grammar are lines of the
log, not bad records: they are kept with kind `blank` / `unrecognised` (the text in `message`) and
counted per class in ops.quality_results (rules blank_lines, unrecognised_lines, severity info);
only a line cut off by the end of a growing log, or a bad timestamp, is quarantined.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.contract import TableInput, derived
from tracelake.api.tables import read_tables
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io.frames import union_all
from tracelake.io.parse import finish
from tracelake.io.staging import Scratch
from tracelake.io.text import RawFile, regular_file, utf8_readable
from tracelake.schema import TableSchema
from tracelake.sources.zhejiang import wholetext
from tracelake.sources.zhejiang.transforms.tasks import task_iterations, task_ranks, task_restarts

TASK_DIR = re.compile(r"\d{8}-\d{4}-\d+")
POD_FILE = "pod-node-starttime.log"
LOG_FILE = re.compile(r"(?P<job>.+)-(?P<role>master|worker)(?:-(?P<idx>\d+))?\.log")
POD_NAME = r"^(.+)-(master|worker)(?:-(\d+))?$"

# --- line grammars (numbered groups only: the same pattern runs on Java and Rust regex) ---
TS_MS = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
TS_S = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"
NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
ELASTIC_PREFIX = r"^\[default(\d+)\]:"
BLANK = r"^\s*$"
KUBECTL = r'^Defaulted container "([^"]+)" out of: (.*)$'
ELASTIC = r"^(WARNING|INFO|ERROR|DEBUG):(torch\.distributed\.[\w.]+):(.*)$"
C10D = r"^\[([WIEF]) ([\w.]+:\d+)\] \[c10d\] ?(.*)$"
DS = rf"^\[{TS_MS}\] \[([A-Z]+)\] \[([\w./-]+:\d+:\w+)\] ?(.*)$"
HF = rf"^\[([A-Z]+)\|([\w./-]+:\d+)\] {TS_MS} >> ?(.*)$"
NCCL = r"^([^:\s]+):(\d+):(\d+) \[(\d+)\] NCCL (INFO|WARN|TRACE) (.*)$"
NCCL_VERSION = r"^NCCL version (\S+)$"
TQDM = (r"^\s*(\d+)%\|([^|]*)\|\s*(\d+)/(\d+) \[([\d:]+)<([\d:?]+),\s*([\d.?]+)(s/it|it/s)\](.*)$")
METRICS_DICT = r"^\{'\w+': .*\}$"
MEGATRON_ITERATION = rf"^\s*(?:\[{TS_S}\] )?iteration\s+(\d+)/\s*(\d+) \|(.*)$"
MEGATRON_DATETIME = rf"^\[([^\]]+)\] datetime: {TS_S}\s*$"
MEGATRON_PARALLEL = r"^using world size: (\d+), (.*)$"
MEGATRON_MARKER = r"^-+ (arguments|end of arguments) -+$"
MEGATRON_ARGUMENT = r"^  (\w+) \.+ (.*)$"
MEGATRON_CHECKPOINT = r"^\s*(saving|successfully saved) checkpoint (?:at|from) iteration\s+(\d+) to (\S+)"
# inside a DeepSpeed/app logger message
ON_LOG = (rf"^loss: {NUM}, learning_rate: {NUM}, epoch: ([\d.]+), iter: (\d+)/(\d+),\s+(\S+) < (\S+),"
          r"\s+([\d.]+)(s/it|it/s)$")
ON_LOG_SUMMARY = r"^train_runtime: "
SAVE = r"^Saving model checkpoint to (\S+)$"
RUNNING_TRAINING = r"^\*+ Running training \*+$"
# inside an NCCL message
NCCL_BOOTSTRAP = r"^Bootstrap : Using ([^:]+):([\d.]+)<\d+>"
NCCL_NET_IB = r"^NET/\w+ : Using .*; OOB ([^:]+):([\d.]+)<\d+>"
NCCL_NIC = r"\[(\d+)\]([^:\s\]]+):\d+/(?:RoCE|IB)"
NCCL_RING = r"^Channel (\d+)/(\d+) :((?:\s+\d+)+)\s*$"
NCCL_CHANNEL = (r"^(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)\[([0-9a-f]+)\] -> (\d+)\[([0-9a-f]+)\]"
                r"(?: \[(send|receive)\])? via (\S+)")
NCCL_COMM = (r"comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)? busId "
             r"([0-9a-f]+)(?: commId 0x[0-9a-f]+)? - (\w+) COMPLETE")
NCCL_ENV = r"^(NCCL_\w+) set by environment to (.*?)\.?$"

# a line a growing log had not finished: its numbers may be prefixes of the real ones; set aside
# until a later ingest of the file sees it whole (the file's rows are then replaced)
BLANK_KIND, UNRECOGNISED_KIND = "blank", "unrecognised"  # lines of the log that are no event: kept, counted
CUT_OFF = "incomplete last line: the log does not end with a newline (cut off while being written)"
LOGGER_KINDS = ("ds_logger", "hf_on_log", "hf_on_log_summary", "hf_checkpoint_save")
HF_KINDS = ("hf_logger", "hf_train_start")


def _group(col: Column, pattern: str, idx: int) -> Column:
    """regexp_extract as null when the pattern or the group did not match."""
    value = F.regexp_extract(col, pattern, idx)
    return F.when(value != "", value)


def _int(col: Column, pattern: str, idx: int, type_name: str = "int") -> Column:
    return _group(col, pattern, idx).cast(type_name)


def _pod_name_parts(pod: Column) -> dict[str, Column]:
    return {
        "job": _group(pod, POD_NAME, 1),
        "role": _group(pod, POD_NAME, 2),
        "worker_index": _int(pod, POD_NAME, 3),
    }


def parse_pods(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """pod-node-starttime.log: `pod hostIP node startTime` per line (split on whitespace)."""
    frames = [
        spark.read.text(raw.path).select(
            F.lit(raw.name).alias("source_file"), F.lit(raw.constants["task_id"]).alias("task_id"),
            F.regexp_replace("value", "\r$", "").alias("raw_line"))
        for raw in files
    ]
    lines = union_all(frames)
    pattern = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"
    line = F.col("raw_line")
    ok = line.rlike(pattern)
    pod, host_ip, node, start = (F.when(ok, F.regexp_extract(line, pattern, i)) for i in (1, 2, 3, 4))
    start_ts = F.try_to_timestamp(start, F.lit("yyyy-MM-dd'T'HH:mm:ssXXX"))
    parts = _pod_name_parts(pod)
    typed = {"task_id": F.col("task_id"), "pod": pod, "host_ip": host_ip, "k8s_node": node,
             "host_num": _int(node, r"(\d+)$", 1), "start_ts": start_ts, **parts}
    problems = [
        (~ok, F.lit("expected 4 whitespace-separated fields: pod, hostIP, node, startTime")),
        (ok & start_ts.isNull(), F.concat(F.lit("start_ts: '"), start, F.lit("' is not an RFC 3339 UTC time"))),
        (ok & parts["role"].isNull(), F.concat(F.lit("pod: '"), pod, F.lit("' is not <job>-master|worker[-<i>]"))),
    ]
    raw_json = F.when(ok, F.to_json(F.struct(pod.alias("pod"), host_ip.alias("hostIP"),
                                              node.alias("nodeName"), start.alias("startTime"))))
    return finish(lines, schema, typed, raw_json, problems)


def _log_lines(spark: SparkSession, files: list[RawFile]) -> DataFrame:
    """Every piece of the logs: LF lines split on CR; empty pieces next to a CR are not lines.
    `cut_off`: the piece that ends a file without a newline or CR after it, which a log still
    being written may have cut anywhere (`elapsed time per iteration (ms): 45` of 4568)."""
    facts = [(raw.name, *(raw.constants[k] for k in ("task_id", "job", "pod", "role", "worker_index")), raw.path)
             for raw in files]
    text = F.regexp_replace("text", r"\n\z", "")
    # the file's facts first, then the explode: a column of the whole text beside the explode
    # would be carried into every line's row (the engine's buffers overflow on a real log)
    whole = wholetext.whole_texts(spark, facts).select(
        *wholetext.FILE_FACTS[:-1], F.col("worker_index").cast("int").alias("worker_index"), text.alias("text"),
        (F.length(text) - F.length(F.regexp_replace(text, "\n", ""))).alias("last_line_idx"),
        F.col("text").endswith("\n").alias("ends_in_newline"))
    phys = whole.select(*wholetext.FILE_FACTS, F.posexplode(F.split("text", "\n")).alias("line_idx", "phys"),
                        "last_line_idx", "ends_in_newline")
    pieces = phys.select("*", F.posexplode(F.split("phys", "\r")).alias("segment", "raw_line"),
                         F.size(F.split("phys", "\r")).alias("n_pieces"))
    blank_line = F.regexp_replace("phys", "\r", "") == ""
    keep = (F.col("raw_line") != "") | ((F.col("segment") == 0) & blank_line)
    cut_off = (~F.col("ends_in_newline") & (F.col("line_idx") == F.col("last_line_idx"))
               & (F.col("segment") == F.col("n_pieces") - 1) & (F.col("raw_line") != ""))  # an empty file cut nothing
    return pieces.filter(keep).select(
        *wholetext.FILE_FACTS, (F.col("line_idx") + 1).cast("int").alias("line_no"), F.col("segment").cast("int"),
        "raw_line", cut_off.alias("cut_off"),
    )


def _classify(lines: DataFrame) -> DataFrame:
    """Add body (prefix stripped), elastic_local_rank, the logger parts and `kind`."""
    body = F.regexp_replace("raw_line", ELASTIC_PREFIX, "")
    staged = lines.select(
        "*", body.alias("body"), _int(F.col("raw_line"), ELASTIC_PREFIX, 1).alias("elastic_local_rank"))
    b = F.col("body")
    staged = staged.select(
        "*",
        _group(b, DS, 4).alias("ds_msg"), _group(b, DS, 3).alias("ds_src"),
        _group(b, HF, 4).alias("hf_msg"), _group(b, NCCL, 6).alias("nccl_msg"),
    )
    ds_msg, hf_msg = F.col("ds_msg"), F.col("hf_msg")
    on_log = b.rlike(DS) & F.col("ds_src").endswith(":on_log")
    kind = (
        F.when(b.rlike(BLANK), F.lit(None))
        .when(b.rlike(KUBECTL), "kubectl_preamble")
        .when(b.rlike(ELASTIC), "torch_elastic")
        .when(b.rlike(C10D), "c10d")
        .when(on_log & ds_msg.rlike(ON_LOG), "hf_on_log")
        .when(on_log & ds_msg.rlike(ON_LOG_SUMMARY), "hf_on_log_summary")
        .when(b.rlike(DS) & ds_msg.rlike(SAVE), "hf_checkpoint_save")
        .when(b.rlike(DS), "ds_logger")
        .when(b.rlike(HF) & hf_msg.rlike(RUNNING_TRAINING), "hf_train_start")
        .when(b.rlike(HF), "hf_logger")
        .when(b.rlike(NCCL_VERSION), "nccl_version")
        .when(b.rlike(NCCL), "nccl")
        .when(b.rlike(TQDM), "tqdm")
        .when(b.rlike(METRICS_DICT), "hf_metrics_dict")
        .when(b.rlike(MEGATRON_ITERATION), "megatron_iteration")
        .when(b.rlike(MEGATRON_DATETIME), "megatron_datetime")
        .when(b.rlike(MEGATRON_PARALLEL), "megatron_parallel_config")
        .when(b.rlike(MEGATRON_MARKER), "megatron_arguments_marker")
        .when(b.rlike(MEGATRON_ARGUMENT), "megatron_argument")
        .when(b.rlike(MEGATRON_CHECKPOINT), "megatron_checkpoint")
    )
    kind = F.coalesce(kind, F.when(b.rlike(BLANK), F.lit(BLANK_KIND)).otherwise(F.lit(UNRECOGNISED_KIND)))
    return staged.select("*", kind.alias("kind"))


def _nccl_subkind(msg: Column) -> Column:
    return (
        F.when(msg.rlike(NCCL_BOOTSTRAP), "bootstrap")
        .when(msg.rlike(NCCL_NET_IB), "net_ib")
        .when(msg.rlike(NCCL_RING), "ring")
        .when(msg.rlike(r"^Trees"), "trees")
        .when(msg.rlike(NCCL_CHANNEL), "channel")
        .when(msg.rlike(NCCL_COMM), "comm")
        .when(msg.rlike(NCCL_ENV), "env")
        .otherwise("other")
    )


def _events(classified: DataFrame) -> DataFrame:
    """Typed columns and fields_json from the classified pieces (one select per stage)."""
    kind, b = F.col("kind"), F.col("body")
    ds_msg, hf_msg, nm = F.col("ds_msg"), F.col("hf_msg"), F.col("nccl_msg")
    is_ = lambda *kinds: kind.isin(*kinds)  # noqa: E731
    subkind = (
        F.when(is_("nccl"), _nccl_subkind(nm))
        .when(is_("megatron_checkpoint"),
              F.when(_group(b, MEGATRON_CHECKPOINT, 1) == "saving", "start").otherwise("done"))
        .when(is_("megatron_arguments_marker"),
              F.when(_group(b, MEGATRON_MARKER, 1) == "arguments", "begin").otherwise("end"))
    )
    ts_text = (
        F.when(is_(*LOGGER_KINDS), _group(b, DS, 1))
        .when(is_(*HF_KINDS), _group(b, HF, 3))
        .when(is_("megatron_iteration"), _group(b, MEGATRON_ITERATION, 1))
        .when(is_("megatron_datetime"), _group(b, MEGATRON_DATETIME, 2))
    )
    staged = classified.select("*", subkind.alias("subkind"), ts_text.alias("ts_text"))
    sk, ts_text = F.col("subkind"), F.col("ts_text")
    ts = F.coalesce(F.try_to_timestamp(ts_text, F.lit("yyyy-MM-dd HH:mm:ss,SSS")),
                    F.try_to_timestamp(ts_text, F.lit("yyyy-MM-dd HH:mm:ss")))
    mt_rest = _group(b, MEGATRON_ITERATION, 4)
    typed = {
        "kind": kind,
        "subkind": sk,
        "ts": ts,
        "level": (F.when(is_(*LOGGER_KINDS), _group(b, DS, 2)).when(is_(*HF_KINDS), _group(b, HF, 1))
                  .when(is_("torch_elastic"), _group(b, ELASTIC, 1)).when(is_("c10d"), _group(b, C10D, 1))
                  .when(is_("nccl"), _group(b, NCCL, 5))),
        "logger_source": (F.when(is_(*LOGGER_KINDS), F.col("ds_src")).when(is_(*HF_KINDS), _group(b, HF, 2))
                          .when(is_("torch_elastic"), _group(b, ELASTIC, 2))
                          .when(is_("c10d"), _group(b, C10D, 2))),
        "message": (F.when(is_(*LOGGER_KINDS), F.coalesce(ds_msg, F.lit("")))
                    .when(is_(*HF_KINDS), F.coalesce(hf_msg, F.lit("")))
                    .when(is_("torch_elastic"), _group(b, ELASTIC, 3)).when(is_("c10d"), _group(b, C10D, 3))
                    .when(is_("nccl"), nm).when(kind.isNotNull(), b)),
        "host": F.when(is_("nccl"), _group(b, NCCL, 1)),
        "pid": F.when(is_("nccl"), _int(b, NCCL, 2, "bigint")),
        "tid": F.when(is_("nccl"), _int(b, NCCL, 3, "bigint")),
        "cuda_dev": F.when(is_("nccl"), _int(b, NCCL, 4)),
        "elastic_local_rank": F.col("elastic_local_rank"),
        "rank": (F.when(sk == "comm", _int(nm, NCCL_COMM, 2))
                 .when(is_("ds_logger"), F.coalesce(_int(ds_msg, r"Process rank: (\d+)", 1),
                                                    _int(ds_msg, r"^\[Rank (\d+)\]", 1)))),
        "nranks": F.when(sk == "comm", _int(nm, NCCL_COMM, 3)),
        "iteration": (F.when(is_("hf_on_log"), _int(ds_msg, ON_LOG, 4))
                      .when(is_("tqdm"), _int(b, TQDM, 3))
                      .when(is_("megatron_iteration"), _int(b, MEGATRON_ITERATION, 2))
                      .when(is_("hf_checkpoint_save"), _int(ds_msg, r"checkpoint-(\d+)/?$", 1))
                      .when(is_("megatron_checkpoint"), _int(b, MEGATRON_CHECKPOINT, 2))),
        "iterations_total": (F.when(is_("hf_on_log"), _int(ds_msg, ON_LOG, 5))
                             .when(is_("hf_on_log_summary"), _int(ds_msg, r"iter: \d+/(\d+)", 1))
                             .when(is_("tqdm"), _int(b, TQDM, 4))
                             .when(is_("megatron_iteration"), _int(b, MEGATRON_ITERATION, 3))
                             .when(is_("hf_logger"), F.regexp_replace(
                                 _group(hf_msg, r"Total optimization steps = ([\d,]+)", 1), ",", "")
                                 .cast("int"))),
        "loss": (F.when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 1).cast("double"))
                 .when(is_("megatron_iteration"), _group(mt_rest, rf"\|\s*(?:lm )?loss: {NUM}", 1)
                       .cast("double"))),
        "learning_rate": (F.when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 2).cast("double"))
                          .when(is_("megatron_iteration"), _group(mt_rest, rf"learning rate: {NUM}", 1)
                                .cast("double"))),
        "elapsed_ms": F.when(is_("megatron_iteration"), _group(
            mt_rest, r"elapsed time per iteration \(ms\): ([\d.]+)", 1).cast("double")),
    }
    fields = F.to_json(F.struct(*[col.alias(name) for name, col in _fields(kind, sk, b, ds_msg, nm)]))
    problems = [
        (F.col("cut_off"), F.lit(CUT_OFF)),
        (ts_text.isNotNull() & ts.isNull(), F.concat(F.lit("ts: '"), ts_text, F.lit("' is not a valid timestamp"))),
    ]
    return staged, typed, F.when(fields != "{}", fields), problems


def _fields(kind: Column, sk: Column, b: Column, ds_msg: Column, nm: Column) -> list[tuple[str, Column]]:
    """Kind-specific fields for fields_json; each is null unless the line has it."""
    is_ = lambda *kinds: kind.isin(*kinds)  # noqa: E731
    world = F.coalesce(_int(ds_msg, r"world_size(?::| \.+) (\d+)", 1),
                       _int(b, MEGATRON_PARALLEL, 1))
    parallel = lambda label: _int(b, rf"{label}[- ]size: (\d+)", 1)  # noqa: E731
    ckpt_dir = F.when(is_("hf_checkpoint_save"), _group(ds_msg, SAVE, 1)).when(
        is_("megatron_checkpoint"), _group(b, MEGATRON_CHECKPOINT, 3))
    return [
        ("container", F.when(is_("kubectl_preamble"), _group(b, KUBECTL, 1))),
        ("containers", F.when(is_("kubectl_preamble"), _group(b, KUBECTL, 2))),
        ("version", F.when(is_("nccl_version"), _group(b, NCCL_VERSION, 1))),
        ("interface", F.when(sk == "bootstrap", _group(nm, NCCL_BOOTSTRAP, 1))
         .when(sk == "net_ib", _group(nm, NCCL_NET_IB, 1))),
        ("ip", F.when(sk == "bootstrap", _group(nm, NCCL_BOOTSTRAP, 2))
         .when(sk == "net_ib", _group(nm, NCCL_NET_IB, 2))),
        ("nics", F.when(sk == "net_ib", F.regexp_extract_all(nm, F.lit(NCCL_NIC), F.lit(2)))),
        ("channel", F.when(sk == "ring", _int(nm, NCCL_RING, 1)).when(sk == "channel", _int(nm, NCCL_CHANNEL, 1))),
        ("nchannels", F.when(sk == "ring", _int(nm, NCCL_RING, 2))),
        ("ring", F.when(sk == "ring", F.trim(_group(nm, NCCL_RING, 3)))),
        ("src_rank", F.when(sk == "channel", _int(nm, NCCL_CHANNEL, 2))),
        ("src_bus", F.when(sk == "channel", _group(nm, NCCL_CHANNEL, 3))),
        ("dst_rank", F.when(sk == "channel", _int(nm, NCCL_CHANNEL, 4))),
        ("dst_bus", F.when(sk == "channel", _group(nm, NCCL_CHANNEL, 5))),
        ("direction", F.when(sk == "channel", _group(nm, NCCL_CHANNEL, 6))),
        ("transport", F.when(sk == "channel", _group(nm, NCCL_CHANNEL, 7))),
        ("nic_index", F.when(sk == "channel", _int(_group(nm, NCCL_CHANNEL, 7), r"^NET/\w+/(\d+)", 1))),
        ("comm", F.when(sk == "comm", _group(nm, NCCL_COMM, 1))),
        ("bus_id", F.when(sk == "comm", _group(nm, NCCL_COMM, 5))),
        ("state", F.when(sk == "comm", _group(nm, NCCL_COMM, 6))),
        ("var", F.when(sk == "env", _group(nm, NCCL_ENV, 1))),
        ("value", F.when(sk == "env", _group(nm, NCCL_ENV, 2))
         .when(is_("megatron_argument"), _group(b, MEGATRON_ARGUMENT, 2))),
        ("key", F.when(is_("megatron_argument"), _group(b, MEGATRON_ARGUMENT, 1))),
        ("percent", F.when(is_("tqdm"), _int(b, TQDM, 1))),
        ("elapsed", F.when(is_("tqdm"), _group(b, TQDM, 5)).when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 6))),
        ("remaining", F.when(is_("tqdm"), _group(b, TQDM, 6)).when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 7))),
        ("rate", F.when(is_("tqdm"), _group(b, TQDM, 7)).when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 8))),
        ("rate_unit", F.when(is_("tqdm"), _group(b, TQDM, 8)).when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 9))),
        ("tail", F.when(is_("tqdm"), _group(b, TQDM, 9))),
        ("epoch", F.when(is_("hf_on_log"), _group(ds_msg, ON_LOG, 3).cast("double"))
         .when(is_("hf_on_log_summary"), _group(ds_msg, r"epoch: ([\d.]+)", 1).cast("double"))),
        ("train_runtime", F.when(is_("hf_on_log_summary"), _group(
            ds_msg, r"train_runtime: ([\d.]+)", 1).cast("double"))),
        ("train_loss", F.when(is_("hf_on_log_summary"), _group(ds_msg, r"train_loss: ([\d.]+)", 1).cast("double"))),
        ("train_samples_per_second", F.when(is_("hf_on_log_summary"), _group(
            ds_msg, r"train_samples_per_second: ([\d.]+)", 1).cast("double"))),
        ("train_steps_per_second", F.when(is_("hf_on_log_summary"), _group(
            ds_msg, r"train_steps_per_second: ([\d.]+)", 1).cast("double"))),
        ("checkpoint_dir", ckpt_dir),
        ("consumed_samples", F.when(is_("megatron_iteration"), _int(b, r"consumed samples:\s+(\d+)", 1, "bigint"))),
        ("global_batch_size", F.when(is_("megatron_iteration"), _int(b, r"global batch size:\s+(\d+)", 1))),
        ("grad_norm", F.when(is_("megatron_iteration"), _group(b, rf"grad norm: {NUM}", 1).cast("double"))),
        ("skipped_iterations", F.when(is_("megatron_iteration"), _int(b, r"number of skipped iterations:\s+(\d+)", 1))),
        ("nan_iterations", F.when(is_("megatron_iteration"), _int(b, r"number of nan iterations:\s+(\d+)", 1))),
        ("throughput_tflops", F.when(is_("megatron_iteration"), _group(
            b, r"throughput per GPU \(TFLOP/s/GPU\): ([\d.]+)", 1).cast("double"))),
        ("label", F.when(is_("megatron_datetime"), _group(b, MEGATRON_DATETIME, 1))),
        ("world_size", F.when(is_("ds_logger", "megatron_parallel_config"), world)
         .when(is_("megatron_argument") & (_group(b, MEGATRON_ARGUMENT, 1) == "world_size"),
               _int(b, MEGATRON_ARGUMENT, 2))),
        ("data_parallel_size", F.when(is_("megatron_parallel_config"), parallel("data-parallel"))),
        ("tensor_model_parallel_size", F.when(is_("megatron_parallel_config"), parallel("tensor-model-parallel"))),
        ("pipeline_model_parallel_size", F.when(is_("megatron_parallel_config"), parallel("pipeline-model-parallel"))),
    ]


def parse_log_events(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """Pod logs → the parse_lines contract; blank and unrecognised pieces are rows of their own
    kinds, a cut-off last piece carries a parse error."""
    if not files:
        raise TracelakeError(f"no input files for {schema.full_name}")
    lines = _log_lines(spark, files)
    staged, typed, fields_json, problems = _events(_classify(lines))
    for name in ("task_id", "job", "pod", "role", "worker_index", "line_no", "segment"):
        typed[name] = F.col(name)
    typed["fields_json"] = fields_json
    raw_json = F.to_json(F.struct(F.col("line_no"), F.col("segment")))
    return finish(staged, schema, typed, raw_json, problems, key=("line_no", "segment"))


def _log_constants(match: re.Match, task: str, stem: str) -> dict[str, str | None]:
    return {"task_id": task, "pod": stem, "job": match["job"], "role": match["role"],
            "worker_index": match["idx"]}


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    """Pod listings and pod logs of every taskinfo/<task>/ folder; [] when there is none."""
    root = raw_dir / "taskinfo"
    if not root.is_dir():
        return []
    pods: list[RawFile] = []
    logs: list[RawFile] = []
    for task in sorted(root.iterdir()):
        if task.name.startswith("."):
            continue  # macOS .DS_Store and friends
        if not task.is_dir() or not TASK_DIR.fullmatch(task.name):
            raise TracelakeError(f"taskinfo/{task.name}: task folders are named YYYYMMDD-HHMM-N")
        for path in sorted(task.iterdir()):
            name = f"taskinfo/{task.name}/{path.name}"
            if path.name.startswith("."):
                continue
            match = LOG_FILE.fullmatch(path.name)
            if path.name == POD_FILE:
                regular_file(path, name)
                pods.append(utf8_readable(RawFile(str(path), name, {"task_id": task.name}), staging))
            elif match:
                regular_file(path, name)
                raw = RawFile(str(path), name, _log_constants(match, task.name, path.stem))
                logs.append(utf8_readable(raw, staging))
            else:
                raise TracelakeError(
                    f"{name}: unexpected file (want {POD_FILE}, <job>-master.log, <job>-worker-<i>.log)")
    inputs = []
    if pods:
        inputs.append(TableInput("bronze.zj_task_pods", pods, parse_pods))
    if logs:
        inputs.append(TableInput("bronze.zj_task_log_events", logs, parse_log_events))
    return inputs


EVENTS_TABLE, ITERATIONS_TABLE = "bronze.zj_task_log_events", "silver.zj_task_iterations"
RESTARTS_TABLE = "silver.zj_task_restarts"


def _per_task(table: str, transform, new_column: str) -> Callable:
    """The rebuild of a table partitioned by task_id from the log events: the tasks whose events
    changed, from those tasks' partitions only (every rule of the transform works within one
    task). A table not in the lake yet, or written before `new_column` was one of its columns,
    is built whole (every task's rows, in the schema's columns)."""
    def rebuild(spark: SparkSession, config: Config, changed: dict, scratch: Scratch) -> tuple[DataFrame, tuple | None] | None:
        events, stored = read_tables(spark, config, EVENTS_TABLE, table)
        if events is None:
            return None
        if stored is None or new_column not in stored.columns:
            return transform(events), None
        tasks = sorted({values[0] for values in changed[EVENTS_TABLE]})
        return transform(events.filter(F.col("task_id").isin(tasks))), tuple((t,) for t in tasks)
    return rebuild


DERIVED = [
    # no workbook ingested yet: ranks still get pods and GPUs, NIC columns null
    derived("silver.zj_task_ranks", task_ranks, ("bronze.zj_task_pods", "bronze.zj_task_log_events"),
            optional=("silver.zj_nic_map",)),
    replace(derived(ITERATIONS_TABLE, task_iterations, (EVENTS_TABLE,)),
            rebuild=_per_task(ITERATIONS_TABLE, task_iterations, "restarts_before")),
    replace(derived(RESTARTS_TABLE, task_restarts, (EVENTS_TABLE,)),
            rebuild=_per_task(RESTARTS_TABLE, task_restarts, "restart")),
]
