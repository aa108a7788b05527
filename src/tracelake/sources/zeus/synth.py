"""Zeus files: the non-public Alibaba recurring-job groups (alibaba_groups.csv.xz, schema from
the Zeus README: group,start_time,end_time,dataset,runtime_ratio) and, for machines without the
public release, small train/power traces in the real layout (mixed scientific-notation learning
rates, `nan` target_epoch for unreached targets, average power sometimes above the limit)."""

from __future__ import annotations

import lzma
import random
from pathlib import Path

DATASETS = {  # dataset: (network, optimizer, batch sizes, targets)
    "cifar100": ("shufflenetv2", "adadelta", [128, 256, 512, 1024], [0.05, 0.1, 0.2]),
    "imagenet": ("resnet50", "adadelta", [128, 256], [0.3, 0.5]),
    "librispeech": ("deepspeech2", "adamw", [8, 16, 32], [60, 50, 40]),
    "movielens-1m": ("ncf", "adam", [1024, 4096], [0.3, 0.4]),
    "squad": ("bert_base_uncased", "adamw", [16, 32], [82.5, 84]),
    "sentiment140": ("bert_base_uncased", "adamw", [16, 64], [0.82, 0.84]),
}
GPUS = {"a40": range(100, 301, 25), "v100": range(100, 251, 25)}
GROUPS_AT_SCALE_1 = 2_000
ALIBABA_HEADER = "group,start_time,end_time,dataset,runtime_ratio"


def _lr_text(rng: random.Random) -> str:
    mantissa = rng.choice(["1", "1.00", "1.06", "2", "1.73", "5.0"])
    exponent = rng.randint(1, 7)
    return f"{mantissa}e-{exponent:02d}" if rng.random() < 0.5 else f"{mantissa}e-{exponent}"


def alibaba_rows(scale: float, rng: random.Random) -> list[str]:
    rows = []
    for _ in range(max(1, round(GROUPS_AT_SCALE_1 * scale))):
        group = f"{rng.getrandbits(128):032x}"
        dataset = rng.choice(sorted(DATASETS))
        start = rng.uniform(0, 5_000_000)
        for _ in range(rng.randint(2, 40)):
            start += rng.uniform(600, 86_400)
            run = rng.lognormvariate(8.0, 1.0)
            rows.append(f"{group},{round(start, 1)},{round(start + run, 1)},{dataset},{rng.lognormvariate(0, 0.3)!r}")
    return rows


def train_rows(rng: random.Random) -> list[str]:
    rows = []
    for dataset, (network, optimizer, batch_sizes, targets) in DATASETS.items():
        for bs in batch_sizes:
            lr = _lr_text(rng)
            for run in range(1, 4):
                epoch = 0
                for target in targets:
                    epoch += rng.randint(1, 20)
                    reached = rng.random() > 0.2
                    rows.append(f"{dataset},{network},{bs},{optimizer},{lr},{run},{target},{epoch if reached else 'nan'}")
    return rows


def power_rows(limits: range, rng: random.Random) -> list[str]:
    rows = []
    for dataset, (network, optimizer, batch_sizes, _) in DATASETS.items():
        for bs in batch_sizes:
            base = rng.uniform(10, 500)
            for limit in limits:
                power = limit * rng.uniform(0.7, 1.03)  # a few overshoot the limit, as in the release
                rows.append(f"{dataset},{network},{bs},{optimizer},{limit},{base * 250 / limit!r},{power!r}")
    return rows


def _write(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def generate(out: Path, scale: float, seed: int) -> list[Path]:  # no options
    rng = random.Random(seed)
    alibaba = out / "alibaba_groups.csv.xz"
    with lzma.open(alibaba, "wt", encoding="utf-8") as fh:
        fh.write("\n".join([ALIBABA_HEADER, *alibaba_rows(scale, rng)]) + "\n")
    written = [alibaba]
    if not (out / "summary_train.csv").exists():  # never overwrite the real release
        written.append(_write(out / "summary_train.csv",
                              "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch",
                              train_rows(rng)))
        for gpu, limits in GPUS.items():
            written.append(_write(out / f"summary_power_{gpu}.csv",
                                  "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power",
                                  power_rows(limits, rng)))
    return written
