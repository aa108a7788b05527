"""Zeus (NSDI '23) traces: summary_train.csv, summary_power_<gpu>.csv, alibaba_groups.csv[.xz]."""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

from tracelake.contract import TableInput, derived
from tracelake.errors import TracelakeError
from tracelake.reader import RawFile
from tracelake.sources.zeus.transforms import time_energy_to_accuracy

TRAIN_FILE = "summary_train.csv"
POWER_FILE = re.compile(r"^summary_power_([a-z0-9]+)\.csv$")
ALIBABA_FILES = ("alibaba_groups.csv", "alibaba_groups.csv.xz")


def _decompressed(path: Path, staging: Path) -> Path:
    """Spark reads no .xz: unpack it into the run's staging folder."""
    if path.suffix != ".xz":
        return path
    staging.mkdir(parents=True, exist_ok=True)
    target = staging / path.stem
    try:
        with lzma.open(path) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    except lzma.LZMAError as exc:
        raise TracelakeError(f"{path.name}: not a valid .xz file ({exc})") from exc
    except EOFError:  # the stream ends before its end marker: a cut-off download
        raise TracelakeError(f"{path.name}: truncated .xz file (the stream ends before its end marker)") from None
    return target


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    inputs = []
    if (raw_dir / TRAIN_FILE).is_file():
        inputs.append(TableInput("bronze.zeus_train", [RawFile(str(raw_dir / TRAIN_FILE), TRAIN_FILE)]))
    power = []
    for path in sorted(raw_dir.glob("summary_power_*.csv")):
        match = POWER_FILE.match(path.name)
        if not match:
            raise TracelakeError(f"{path.name}: power file names are summary_power_<gpu>.csv")
        power.append(RawFile(str(path), path.name, {"gpu": match.group(1)}))
    if power:
        inputs.append(TableInput("bronze.zeus_power", power))
    present = [raw_dir / n for n in ALIBABA_FILES if (raw_dir / n).is_file()]
    if len(present) > 1:
        raise TracelakeError(f"{raw_dir}: both alibaba_groups.csv and .csv.xz present; keep one")
    if present:
        path = _decompressed(present[0], staging / "zeus")
        name = present[0].name
        aliases = tuple(n for n in ALIBABA_FILES if n != name)  # the same rows, compressed or not
        inputs.append(TableInput("bronze.zeus_alibaba_groups", [RawFile(str(path), name, aliases=aliases)]))
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no Zeus files ({TRAIN_FILE}, summary_power_<gpu>.csv, alibaba_groups.csv[.xz])")
    return inputs


DERIVED = [derived("gold.zeus_time_energy_to_accuracy", time_energy_to_accuracy, ("bronze.zeus_train", "bronze.zeus_power"))]
