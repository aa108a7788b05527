"""Write one synthetic taskinfo/<task>/ folder in the exact real formats (docs/formats/zhejiang.md §5, §6).

Two styles:
  hf        like the real sample: HF Trainer + DeepSpeed, NCCL 2.14 INFO lines from rank 0 only,
            an on_log record and a tqdm redraw per step on every pod, checkpoint saves every
            SAVE_STEPS; worker logs may carry CR-prefixed tqdm redraws.
  megatron  Megatron-LM under torch elastic with `[defaultN]:` line prefixes, NCCL lines from every
            rank, the argument dump, and iteration lines (1 s timestamps) from the last rank.

The round trip is exact to the logs' resolution: the parser recovers each step's end (ms for hf,
s for Megatron), its start, and every rank's host and RDMA device. Ranks are
host_index * gpus_per_host + local, so pods start in host order (rendezvous join order); NCCL
lists a host's devices in mlx5 number order and GPU l uses device l * n_nics // gpus_per_host.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracelake.errors import TracelakeError

SAVE_STEPS = 500  # HF save_steps / Megatron save interval, as in the real task
NCCL_VERSION = "2.14.3+cuda11.7"
GLOBAL_BATCH = 1024
CONTAINERS = "pytorch, get-pod-ip (init), preload-image-pytorch (init), sync-barrier (init)"
# PCI busIds of GPU 0..7 as NCCL 2.14 prints them; the real sample shows type A 0→10000, 1→16000,
# 3→4d000, 5→8f000, 7→ca000 and type B 0→14000 (the rest follow the HGX A100 layout)
BUS_IDS = {
    "A": ("10000", "16000", "49000", "4d000", "8a000", "8f000", "c5000", "ca000"),
    "B": ("14000", "1a000", "4f000", "53000", "90000", "95000", "cb000", "d0000"),
}
TQDM_BLOCKS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True)
class HostSpec:
    sysname: str          # e.g. "NH-DC-NM129-B01-28U-GPU-31"
    host_ip: str          # GPU IP (bootstrap IP), e.g. "10.107.254.31"
    nics: tuple[str, ...]  # mlx5 names NCCL uses on this host, e.g. ("mlx5_2","mlx5_3","mlx5_8","mlx5_9")


@dataclass(frozen=True)
class TaskSpec:
    task_id: str                       # folder name YYYYMMDD-HHMM-N, UTC start, N = len(hosts)
    job: str                           # log file prefix, e.g. "llama2-7b-new-5b-2b1ef"
    style: str                         # "hf" (HF/DeepSpeed like the real task) or "megatron"
    hosts: tuple[HostSpec, ...]        # pod order: master, worker-1, ...; ranks = host_index*gpus_per_host + local
    gpus_per_host: int                 # 8
    start: datetime                    # UTC, tz-aware
    iteration_ends: tuple[datetime, ...]  # UTC end of iteration 1..K; iteration 1 starts at first_step_start
    first_step_start: datetime         # UTC start of iteration 1


# ---------------------------------------------------------------- small formatting helpers

def _utc(dt: datetime) -> datetime:
    return dt.astimezone(UTC).replace(tzinfo=None)


def _ts_ms(dt: datetime) -> str:
    """Python logging's asctime: `2024-04-29 06:15:07,505` (ms truncated)."""
    return f"{dt:%Y-%m-%d %H:%M:%S},{dt.microsecond // 1000:03d}"


def _ts_s(dt: datetime) -> str:
    return f"{dt:%Y-%m-%d %H:%M:%S}"


def _interval(seconds: float) -> str:
    """tqdm.format_interval: MM:SS, or H:MM:SS from one hour on."""
    minutes, s = divmod(int(seconds), 60)
    h, m = divmod(minutes, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _tqdm(n: int, total: int, elapsed: float | None, tail: str = "") -> str:
    frac = n / total
    full, part = divmod(int(frac * 10 * 8), 8)
    bar = "█" * full + (TQDM_BLOCKS[part] + " " * (9 - full) if full < 10 else "")
    if n == 0 or elapsed is None:
        stats = "[00:00<?, ?it/s]"
    else:
        rate = elapsed / n
        stats = f"[{_interval(elapsed)}<{_interval(rate * (total - n))}, {rate:5.2f}s/it]"
    return f"{100 * frac:3.0f}%|{bar}| {n}/{total} {stats}{tail}"


def _host_type(sysname: str) -> str:
    """Type A servers are groups 1 and 3 (hosts 1–60, 121–180); B elsewhere (§2.3)."""
    match = re.search(r"GPU-(\d+)$", sysname)
    number = int(match.group(1)) if match else 1
    return "A" if number <= 60 or 121 <= number <= 180 else "B"


def _bus_id(host: HostSpec, local: int, gpus: int) -> str:
    table = BUS_IDS[_host_type(host.sysname)]
    return table[local] if gpus <= len(table) else f"{0x10 + 0x8 * local:x}000"


def _device_number(name: str) -> int:
    match = re.search(r"(\d+)$", name)
    return int(match.group(1)) if match else -1


def nccl_nics(host: HostSpec) -> list[str]:
    """The host's devices in NCCL's enumeration order (mlx5 number order)."""
    return sorted(host.nics, key=lambda n: (_device_number(n), n))


def nic_of(host: HostSpec, local: int, gpus: int) -> int:
    """NIC index of a local GPU: the HGX affinity GPU{2j,2j+1} → NIC j (generalised)."""
    return local * len(host.nics) // gpus


def _validate(spec: TaskSpec) -> None:
    if spec.style not in ("hf", "megatron"):
        raise TracelakeError(f"task {spec.task_id}: style must be 'hf' or 'megatron', got {spec.style!r}")
    if not spec.hosts or spec.gpus_per_host < 1 or any(not h.nics for h in spec.hosts):
        raise TracelakeError(f"task {spec.task_id}: needs hosts, each with NICs, and gpus_per_host >= 1")
    stamps = (spec.start, spec.first_step_start, *spec.iteration_ends)
    if any(t.tzinfo is None for t in stamps):
        raise TracelakeError(f"task {spec.task_id}: times must be tz-aware (UTC)")
    expected = f"{_utc(spec.start):%Y%m%d-%H%M}-{len(spec.hosts)}"
    if spec.task_id != expected:
        raise TracelakeError(f"task id {spec.task_id!r} should be {expected!r} (UTC start, host count)")
    ends = [_utc(t) for t in spec.iteration_ends]
    if not ends or _utc(spec.first_step_start) <= _utc(spec.start) + timedelta(seconds=2):
        raise TracelakeError(f"task {spec.task_id}: needs iterations and first_step_start > start + 2 s")
    if any(b <= a for a, b in zip([_utc(spec.first_step_start), *ends], ends)):
        raise TracelakeError(f"task {spec.task_id}: iteration ends must increase after first_step_start")


# ---------------------------------------------------------------- shared pieces

@dataclass
class _Ctx:
    spec: TaskSpec
    rng: random.Random
    pod_starts: list[datetime]
    fss: datetime             # first step start, naive UTC
    ends: list[datetime]      # iteration ends, naive UTC
    pids: list[list[int]]     # per host, per local GPU
    losses: list[float]       # per step, the same on every pod

    @property
    def world(self) -> int:
        return len(self.spec.hosts) * self.spec.gpus_per_host

    def at(self, fraction: float) -> datetime:
        """A moment of the start-up phase: between the last pod start and the first step."""
        t0 = self.pod_starts[-1]
        return t0 + (self.fss - t0) * fraction

    def loss(self, i: int) -> float:
        return self.losses[i - 1]

    def lr(self, i: int) -> float:
        total = len(self.ends)
        warmup = max(1, total // 50)
        if i <= warmup:
            return 1e-4 * i / (warmup + 1)
        return 1e-4 * 0.5 * (1 + math.cos(math.pi * (i - warmup) / max(1, total - warmup)))

    def step_start(self, i: int) -> datetime:
        return self.fss if i == 1 else self.ends[i - 2]


def _pod_names(spec: TaskSpec) -> list[str]:
    return [f"{spec.job}-master"] + [f"{spec.job}-worker-{i}" for i in range(1, len(spec.hosts))]


def _pod_listing(ctx: _Ctx) -> str:
    """kubectl custom-columns listing: name 74, hostIP 17, node 16, startTime."""
    lines = []
    for name, host, started in zip(_pod_names(ctx.spec), ctx.spec.hosts, ctx.pod_starts):
        number = re.search(r"(\d+)$", host.sysname)
        node = f"nm129-gpu-{number.group(1) if number else 0}"
        lines.append(f"{name:<74}{host.host_ip:<17}{node:<16}{started:%Y-%m-%dT%H:%M:%SZ}")
    return "\n".join(lines) + "\n"


def _preamble(ctx: _Ctx) -> list[str]:
    return [
        f'Defaulted container "pytorch" out of: {CONTAINERS}',
        "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not specified.",
        "WARNING:torch.distributed.run:",
        "*****************************************",
        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
        "your system being overloaded, please further tune the variable for optimal performance in "
        "your application as needed. ",
        "*****************************************",
    ]


def _nccl_lines(ctx: _Ctx, h: int, local: int, comm: str) -> list[str]:
    """NCCL 2.14 INFO init sequence of one rank (rings and trees only for rank 0)."""
    spec, gpus = ctx.spec, ctx.spec.gpus_per_host
    host, rank, pid = spec.hosts[h], h * gpus + local, ctx.pids[h][local]
    tid, tid2 = pid + 9811 + local, pid + 11800 + local
    head = f"{host.sysname}:{pid}:"
    p, t, t2 = (f"{head}{thread} [{local}] NCCL INFO " for thread in (pid, tid, tid2))
    bus = _bus_id(host, local, gpus)
    devices = " ".join(f"[{k}]{n}:1/RoCE" for k, n in enumerate(nccl_nics(host)))
    lines = [f"{p}Bootstrap : Using bondYW:{host.host_ip}<0>",
             f"{p}NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
             f"{p}cudaDriverVersion 12030"]
    if rank == 0:
        lines.append(f"NCCL version {NCCL_VERSION}")
    lines += [f"{t}NET/IB : Using {devices} [RO]; OOB bondYW:{host.host_ip}<0>",
              f"{t}Using network IB", f"{t}NCCL_NET_GDR_LEVEL set by environment to PHB",
              f"{t}Setting affinity for GPU {local} to ffffffff,00000000,ffffffff"]
    if rank == 0:
        ring = [hh * gpus + (0 if j == 0 else gpus - j) for hh in range(len(spec.hosts)) for j in range(gpus)]
        text = "".join(f" {r:3d}" for r in ring[:20])  # NCCL prints at most 20 ranks
        lines += [f"{t}Channel {c:02d}/08 : {text}" for c in range(8)]
        up = gpus if len(spec.hosts) > 1 else -1
        lines.append(f"{t}Trees " + " ".join(f"[{c}] {1 % gpus}/{up}/-1->0->-1" for c in range(8)))
    nxt = h * gpus + (local + 1) % gpus
    nxt_bus = _bus_id(host, (local + 1) % gpus, gpus)
    lines.append(f"{t}Channel 00/0 : {rank}[{bus}] -> {nxt}[{nxt_bus}] via P2P/IPC/read")
    if len(spec.hosts) > 1:
        k = nic_of(host, local, gpus)
        prev_h, next_h = (h - 1) % len(spec.hosts), (h + 1) % len(spec.hosts)
        prev_r, next_r = prev_h * gpus + local, next_h * gpus + local
        prev_b, next_b = _bus_id(spec.hosts[prev_h], local, gpus), _bus_id(spec.hosts[next_h], local, gpus)
        lines += [f"{t}Channel 00/0 : {prev_r}[{prev_b}] -> {rank}[{bus}] [receive] via NET/IB/{k}/GDRDMA",
                  f"{t}Channel 04/0 : {rank}[{bus}] -> {next_r}[{next_b}] [send] via NET/IB/{k}/GDRDMA"]
    lines += [f"{t2}NCCL_IB_GID_INDEX set by environment to 3.", f"{t2}NCCL_IB_TC set by environment to 162.",
              f"{t2}NCCL_IB_TIMEOUT set by environment to 22.", f"{t}Connected all rings",
              f"{t}Connected all trees", f"{t}threadThresholds 8/8/64 | 256/8/64 | 512 | 512",
              f"{t}8 coll channels, 8 p2p channels, 2 p2p channels per peer",
              f"{t}comm {comm} rank {rank} nranks {ctx.world} cudaDev {local} busId {bus} - Init COMPLETE"]
    return lines


# ---------------------------------------------------------------- HF / DeepSpeed style

def _ds(ts: datetime, level: str, where: str, msg: str) -> str:
    return f"[{_ts_ms(ts)}] [{level}] [{where}] {msg}"


def _hf(ts: datetime, where: str, msg: str) -> str:
    return f"[INFO|{where}] {_ts_ms(ts)} >> {msg}"


def _hf_startup(ctx: _Ctx, h: int, fss: datetime) -> list[str]:
    gpus, total = ctx.spec.gpus_per_host, len(ctx.ends)
    lines = ["  warnings.warn("] * gpus
    ms = timedelta(milliseconds=1)
    lines += [_ds(ctx.at(0.35) + 7 * j * ms, "INFO", "real_accelerator.py:161:get_accelerator",
                  "Setting ds_accelerator to cuda (auto detect)") for j in range(gpus)]
    lines += [_ds(ctx.at(0.38) + 3 * j * ms, "INFO", "comm.py:637:init_distributed", "cdb=None") for j in range(gpus)]
    if h == 0:
        lines.append(_ds(ctx.at(0.381), "INFO", "comm.py:668:init_distributed",
                         "Initializing TorchBackend in DeepSpeed with backend nccl"))
    for j in range(gpus):
        rank = h * gpus + j
        lines.append(_ds(ctx.at(0.39) + j * ms, "WARNING", "train.py:189:main",
                         f"Process rank: {rank}, device: cuda:{j}, n_gpu: 1, distributed training: True, "
                         "16-bits training: False"))
    if h == 0:
        lines += _nccl_lines(ctx, 0, 0, f"0x{ctx.rng.randrange(0x5000000, 0x6000000):x}")
    lines.append(_ds(ctx.at(0.45), "INFO", "pretrain_index_dataset.py:401:build_pretrain_index_dataset",
                     f"train_batch_size: 1, gradient_accumulation_steps: {GLOBAL_BATCH // ctx.world or 1}, "
                     f"world_size: {ctx.world}, pipeline: 1"))
    lines += ["    creating numpy buffer of mmap...", "    creating memory view of numpy buffer..."]
    lines.append(_ds(ctx.at(0.55), "INFO", "hf_trainer.py:89:__init__",
                     f"num_gpus = {gpus}, training_nums = {total * GLOBAL_BATCH}, bath_sze = {GLOBAL_BATCH}, "
                     f"t_total = {total + 1}, warmup_steps = {max(1, total // 50)}, eval_steps = None, "
                     f"save_steps = {SAVE_STEPS}"))
    lines.append(_ds(ctx.at(0.56), "INFO", "hf_trainer.py:90:__init__",
                     f"global_batch_size: {GLOBAL_BATCH}, micro_batch_size: 1, "
                     f"accumulation_steps: {GLOBAL_BATCH // ctx.world or 1}"))
    if h == 0:
        lines += [_ds(ctx.at(0.9), "INFO", "config.py:983:print", f"  world_size ................... {ctx.world}"),
                  _ds(ctx.at(0.9), "INFO", "config.py:983:print", "  zero_optimization_stage ...... 1"),
                  _ds(ctx.at(0.9), "INFO", "config.py:969:print_user_config", "  json = {"),
                  '    "zero_optimization": {', '        "stage": 1', "    }", "}"]
    header = [("1721", "***** Running training *****"), ("1722", f"  Num examples = {total * GLOBAL_BATCH:,}"),
              ("1723", "  Num Epochs = 1"), ("1724", "  Instantaneous batch size per device = 1"),
              ("1727", f"  Total train batch size (w. parallel, distributed & accumulation) = {GLOBAL_BATCH:,}"),
              ("1728", f"  Gradient Accumulation steps = {GLOBAL_BATCH // ctx.world or 1}"),
              ("1729", f"  Total optimization steps = {total:,}"),
              ("1730", "  Number of trainable parameters = 6,738,415,616")]
    return lines + [_hf(fss, f"trainer.py:{n}", msg) for n, msg in header]


def _hf_log(ctx: _Ctx, h: int, carriage: bool) -> str:
    spec, total = ctx.spec, len(ctx.ends)
    # workers print within a few ms of the master; the master's times are the spec's
    skew = timedelta(0) if h == 0 else timedelta(milliseconds=ctx.rng.randint(1, 12))
    fss = ctx.fss if h == 0 else ctx.at(0.97)
    lines = _preamble(ctx) + _hf_startup(ctx, h, fss)
    bar0 = _tqdm(0, total, None)
    lines += [] if carriage else ["", bar0]
    for i, end in enumerate(ctx.ends, start=1):
        elapsed = (end - ctx.fss).total_seconds()
        loss, lr, epoch = ctx.loss(i), ctx.lr(i), round(i / total, 2)
        bar = _tqdm(i, total, elapsed, f"{{'loss': {loss}, 'learning_rate': {lr}, 'epoch': {epoch}}}")
        if carriage:
            lines.append(("\r" + bar0 if i == 1 else "") + "\r" + bar)
        else:
            lines += ([""] if i > 1 else []) + [bar]
        rate = elapsed / i
        lines.append(_ds(end + skew, "INFO", "hf_trainer.py:53:on_log",
                         f"loss: {loss}, learning_rate: {lr}, epoch: {epoch}, iter: {i}/{total},  "
                         f"{_interval(elapsed)} < {_interval(rate * (total - i))},  {round(rate, 2)}s/it"))
        if i % SAVE_STEPS == 0 and i < total:
            gap = (ctx.ends[i] - end).total_seconds()
            saved = end + timedelta(seconds=min(6.4, gap / 4))
            out = f"outputs/{spec.job}/tmp-checkpoint-{i}"
            lines.append(_ds(saved, "INFO", "hf_trainer.py:116:_save", f"Saving model checkpoint to {out}"))
            if h == 0:
                lines.append(_hf(saved, "configuration_utils.py:473", f"Configuration saved in {out}/config.json"))
    return "\n".join(lines + _hf_ending(ctx, h, carriage)) + "\n"


def _hf_ending(ctx: _Ctx, h: int, carriage: bool) -> list[str]:
    total, end = len(ctx.ends), ctx.ends[-1]
    runtime = (end - ctx.fss).total_seconds()
    ms = timedelta(milliseconds=1)
    summary = (f"'train_runtime': {runtime:.4f}, 'train_samples_per_second': {total * GLOBAL_BATCH / runtime:.3f}, "
               f"'train_steps_per_second': {total / runtime:.3f}, 'train_loss': {ctx.loss(total) + 0.05}, 'epoch': 1.0")
    lines = [_hf(end + 45 * ms, "trainer.py:1962", ""), "",
             "Training completed. Do not forget to share your model on huggingface.co/models =)", "", "",
             "{" + summary + "}",
             _ds(end + 95 * ms, "INFO", "hf_trainer.py:53:on_log",
                 summary.replace("'", "").replace("epoch: 1.0", "epoch: 1.0, iter: "
                                                  f"{total}/{total},  {_interval(runtime)} < 00:00,  "
                                                  f"{round(runtime / total, 2)}s/it")),
             ("\r" if carriage else "") + _tqdm(total, total, runtime),
             _ds(end + 6600 * ms, "INFO", "hf_trainer.py:116:_save",
                 f"Saving model checkpoint to outputs/{ctx.spec.job}")]
    if h == 0:
        head = f"{ctx.spec.hosts[0].sysname}:{ctx.pids[0][0]}:"
        lines += [f"{head}{ctx.pids[0][0] + 21000} [0] NCCL INFO [Service thread] Connection closed by localRank {j}"
                  for j in range(ctx.spec.gpus_per_host)]
        lines.append(_ds(end + 19000 * ms, "INFO", "train.py:243:main", ""))
        lines.append(" Training completed!")
    return lines


# ---------------------------------------------------------------- Megatron style

MEGATRON_ARGS = ("data_parallel_size", "global_batch_size", "hidden_size", "micro_batch_size",
                 "num_attention_heads", "num_layers", "pipeline_model_parallel_size", "save_interval",
                 "seq_length", "tensor_model_parallel_size", "train_iters", "world_size")


def _megatron_args(ctx: _Ctx) -> list[str]:
    values = {"data_parallel_size": ctx.world, "global_batch_size": GLOBAL_BATCH, "hidden_size": 4096,
              "micro_batch_size": 1, "num_attention_heads": 32, "num_layers": 32,
              "pipeline_model_parallel_size": 1, "save_interval": SAVE_STEPS, "seq_length": 4096,
              "tensor_model_parallel_size": 1, "train_iters": len(ctx.ends), "world_size": ctx.world}
    return (["------------------------ arguments ------------------------"]
            + [f"  {k} {'.' * (48 - len(k))} {values[k]}" for k in sorted(values)]
            + ["-------------------- end of arguments ---------------------"])


def _megatron_iteration(ctx: _Ctx, i: int) -> str:
    total, end = len(ctx.ends), ctx.ends[i - 1]
    ms = round((end - ctx.step_start(i)).total_seconds() * 1000, 1)
    # 6 · parameters · tokens per GPU per second (Llama-2-7B, 4,096-token samples)
    tflops = 6 * 6.74e9 * GLOBAL_BATCH * 4096 / ctx.world / max(ms / 1000, 1e-3) / 1e12
    return (f" [{_ts_s(end)}] iteration {i:8d}/{total:8d} | consumed samples: {i * GLOBAL_BATCH:12d} | "
            f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): "
            f"{tflops:.1f} | learning rate: {ctx.lr(i):.6E} | global batch size: "
            f"{GLOBAL_BATCH:5d} | lm loss: {ctx.loss(i):.6E} | loss scale: 1.0 | grad norm: "
            f"{abs(ctx.rng.gauss(0.23, 0.01)):.3f} | number of skipped iterations:   0 | "
            f"number of nan iterations:   0 |")


def _megatron_log(ctx: _Ctx, h: int) -> str:
    spec, gpus = ctx.spec, ctx.spec.gpus_per_host
    last = gpus - 1
    out = _preamble(ctx)
    for j in range(gpus):
        comm = f"0x{ctx.rng.randrange(0x5000000, 0x6000000):x}"
        out += [f"[default{j}]:{line}" for line in _nccl_lines(ctx, h, j, comm)]
    first = "[default0]:"
    if h == 0:
        out.append(first + f"using world size: {ctx.world}, data-parallel size: {ctx.world}, context-parallel "
                   "size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1")
        out += [first + line for line in _megatron_args(ctx)]
        out += [first + f"[after dataloaders are built] datetime: {_ts_s(ctx.at(0.8))} ",
                first + f"[before the start of training step] datetime: {_ts_s(ctx.fss)} "]
    for i in range(1, len(ctx.ends) + 1):
        if h == len(spec.hosts) - 1:
            out.append(f"[default{last}]:" + _megatron_iteration(ctx, i))
        if h == 0 and i % SAVE_STEPS == 0 and i < len(ctx.ends):
            where = f"checkpoints/{spec.job}"
            out += [first + f"saving checkpoint at iteration {i:7d} to {where}",
                    first + f"  successfully saved checkpoint at iteration {i:7d} to {where}",
                    first + "(min, max) time across ranks (ms):",
                    first + "    save-checkpoint ................................: (6321.55, 6321.77)"]
    if h == 0:
        out.append(first + f"[after training is done] datetime: {_ts_s(ctx.ends[-1] + timedelta(seconds=2))} ")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- entry point

def _context(spec: TaskSpec, seed: int) -> _Ctx:
    rng = random.Random(f"{seed}:{spec.task_id}:{spec.job}")
    start, fss = _utc(spec.start), _utc(spec.first_step_start)
    gap = (fss - start).total_seconds()
    offsets, t = [0.0], 0.0
    for _ in spec.hosts[1:]:  # workers join in host order within the first 8 % of the start-up
        t += rng.uniform(0.2, 1.0) * 0.08 * gap / len(spec.hosts)
        offsets.append(t)
    starts = [(start + timedelta(seconds=o)).replace(microsecond=0) for o in offsets]
    pids = [[rng.randrange(100000, 4000000) for _ in range(spec.gpus_per_host)] for _ in spec.hosts]
    total = len(spec.iteration_ends)
    losses = [round(1.15 - 0.17 * math.sqrt(i / total) + rng.gauss(0, 0.012), 4) for i in range(1, total + 1)]
    return _Ctx(spec, rng, starts, fss, [_utc(e) for e in spec.iteration_ends], pids, losses)


def write_task(out_root: Path, spec: TaskSpec, seed: int) -> Path:
    """Write out_root/<task_id>/ (pod listing + one log per pod); returns that folder."""
    _validate(spec)
    ctx = _context(spec, seed)
    folder = Path(out_root) / spec.task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pod-node-starttime.log").write_text(_pod_listing(ctx), encoding="utf-8", newline="")
    for h, name in enumerate(_pod_names(spec)):
        if spec.style == "hf":
            text = _hf_log(ctx, h, carriage=h >= 2 and ctx.rng.random() < 0.5)
        else:
            text = _megatron_log(ctx, h)
        (folder / f"{name}.log").write_text(text, encoding="utf-8", newline="")
    return folder
