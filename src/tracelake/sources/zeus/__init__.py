"""Zeus (NSDI '23) traces: summary_train.csv, summary_power_<gpu>.csv, alibaba_groups.csv, each as
it is, .xz-compressed (the release compresses the groups file) or .gz-compressed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.errors import TracelakeError

if TYPE_CHECKING:
    from tracelake.api.contract import TableInput
    from tracelake.api.source import Source
    from tracelake.io.text import RawFile

TRAIN_FILE = "summary_train.csv"
POWER_FILE = re.compile(r"summary_power_([a-z0-9]+)\.csv")
ALIBABA_FILE = "alibaba_groups.csv"


COMPRESSED = (".xz", ".gz")  # unpacked into staging within io.unpack's bounds


def _one_form(raw_dir: Path, name: str, staging: Path, constants: dict | None = None) -> RawFile | None:
    """`name`, `name.xz` or `name.gz` (unpacked into staging), whichever is there; two is an
    error. The other forms are the file's aliases: recompressing it replaces its rows."""
    from tracelake.io.forms import find_one
    from tracelake.io.text import RawFile
    from tracelake.io.unpack import unpacked

    found = find_one(raw_dir, [name], COMPRESSED)
    if found is None:
        return None
    return RawFile(str(unpacked(found.path, staging / "zeus", found.name)), found.name, constants or {},
                   aliases=found.aliases)


def read_in_place(relative: str) -> bool:
    """Whether the raw file at `relative` is left in the store (never copied whole to this disk):
    all of them. The engine's tasks read the plain CSVs at their URLs (their headers checked by a
    ranged read of the start, io.text.check_header); an .xz or .gz one is streamed from its URL by this
    process and unpacked into the run's staging (io.unpack.unpacked)."""
    return True


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    from tracelake.api.contract import TableInput
    from tracelake.io.storetree import as_folder

    raw_dir = as_folder(raw_dir)
    inputs = []
    if (train := _one_form(raw_dir, TRAIN_FILE, staging)) is not None:
        inputs.append(TableInput("bronze.zeus_train", [train]))
    power = []
    for gpu in sorted({path.name.removesuffix(".xz").removesuffix(".gz") for path in raw_dir.iterdir()
                      if path.name.startswith("summary_power_")}):
        match = POWER_FILE.fullmatch(gpu)
        if not match:
            raise TracelakeError(f"{gpu}: power file names are summary_power_<gpu>.csv (or .csv.xz, .csv.gz)")
        power.append(_one_form(raw_dir, gpu, staging, {"gpu": match.group(1)}))
    if power:
        inputs.append(TableInput("bronze.zeus_power", power))
    if (groups := _one_form(raw_dir, ALIBABA_FILE, staging)) is not None:
        inputs.append(TableInput("bronze.zeus_alibaba_groups", [groups]))
    if not inputs:
        raise TracelakeError(f"{raw_dir}: no Zeus files ({TRAIN_FILE}, summary_power_<gpu>.csv, {ALIBABA_FILE}; "
                             "each may be .xz- or .gz-compressed)")
    return inputs


def declare() -> Source:
    """This source's declaration, built when the registry first asks (the package's top
    imports nothing heavy)."""
    from tracelake.api.contract import derived
    from tracelake.api.source import Source
    from tracelake.sources.zeus.transforms import time_energy_to_accuracy

    return Source("zeus", plan, (
        derived("gold.zeus_time_energy_to_accuracy", time_energy_to_accuracy, ("bronze.zeus_train", "bronze.zeus_power")),
    ), in_place=read_in_place)

