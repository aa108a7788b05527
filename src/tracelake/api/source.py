"""A source declares itself in one object: the kernel learns everything it needs of a source
here, and never its name, its modules or its columns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracelake.api.contract import Derived, TableInput

Plan = Callable[[Path, Path], list[TableInput]]  # (raw folder, run's staging folder) -> inputs
BatchPlan = Callable[[Path, Path, str], list[TableInput]]  # … and the batches asked for (`--hours`)
# (a raw file's path relative to the raw folder, the batches asked for) -> whether plan_batches reads it
BatchFiles = Callable[[str, str], bool]


@dataclass(frozen=True)
class Source:
    """`SOURCE` in a package under `tracelake.sources` (or `tracelake.crosstrace`, which has no
    plan: its tables are built from several sources).

    - `plan`: the bronze inputs of a raw folder.
    - `derived`: its silver/gold tables.
    - `batch_by`: the file constant a run is cut by, one batch per value in order (the Zhejiang
      hour folder, `hour_cst`): a backfill then needs one batch's memory. Derived tables
      partitioned by it are rebuilt after each batch.
    - `plan_batches`: the plan of only the named batches (`--hours H` or `FROM..TO`).
    - `report`: a module imported only when used: `render(engine, config, out)` returns its
      report section.
    - `explain`: a module imported only when used: `explain(spark, config, key, number)` returns
      the lines of `tracelake explain KEY NUMBER` (one record of the source, e.g. a task's iteration).

    A source's generator is its `synth` module (`generate(out, scale, seed, **options)` writes
    raw files in the release's format; one that takes `reference` is given the release folder
    to copy real parts of). The registry finds it by its name, without this declaration: a
    source package's `declare()` builds it on first use, so `generate` loads no engine library.
    - `batch_files`: which raw files `plan_batches` reads, by relative path; a raw folder on
      object storage copies only those (default: every file).
    - `in_place`: which raw files, by relative path, the engine's tasks read at their URL when the
      raw folder is on object storage (never copied: the plan walks the store's listing,
      io/storetree.py); every other file is copied to the run's staging first (default: all).
    """

    name: str
    plan: Plan | None
    derived: tuple[Derived, ...] = ()
    batch_by: str | None = None
    plan_batches: BatchPlan | None = None
    report: str | None = None
    explain: str | None = None
    batch_files: BatchFiles | None = None
    in_place: Callable[[str], bool] | None = None
