"""One run's identity, the figures it reports per table, and its record of rule results in
ops.quality_results."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from tracelake.config import Config
from tracelake.delta.commit import Append, commit
from tracelake.errors import TracelakeError
from tracelake.io.staging import Scratch
from tracelake.quality.gate import GateOutcome
from tracelake.quality.ops import quality_rows, run_quality_rows
from tracelake.schema import load_schema


@dataclass(frozen=True)
class Run:
    """Identity of one CLI/job invocation, shared by every table it writes."""

    run_id: str
    started: datetime
    staging: Path  # this process's folder: raw files it unpacks, the progress tallies
    # the engine's scratch Parquet: the staging folder itself, or a prefix in the lake's store
    # when the engine's tasks share no disk with this process (run.pipeline.store_staging)
    scratch: Scratch
    # rule results held for one commit at the run's end (flush_results), when the run collects
    # them (run_ingest); None: each table's results are committed at once
    pending: list | None = field(default=None, compare=False)

    @classmethod
    def new(cls, config: Config) -> Run:
        """A run's identity and its staging folder, which must be a folder: this process unpacks
        raw files there. A lake at a URL needs no setting: its default staging folder is on this
        machine (config.local_staging_for), and an engine whose tasks run elsewhere gets the
        files and scratch it reads under `<lake>/_staging/<run id>` (run.pipeline.store_staging)."""
        if "://" in config.staging_dir:
            raise TracelakeError(
                f"staging folder {config.staging_dir} is a URL: an ingest unpacks raw files there, so it must be "
                "a folder on this machine; leave staging_dir unset with a lake at a URL (what the engine reads "
                "goes to <lake>/_staging/<run id>), or give a volume the workers share (deploy/README.md)"
            )
        started = datetime.now(UTC).replace(microsecond=0)
        run_id = f"{started:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        staging = Path(config.staging_dir) / run_id
        return cls(run_id, started, staging, Scratch(str(staging)))

    def cleanup(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


@dataclass(frozen=True)
class TableStats:
    table: str
    rows_read: int
    rows_kept: int
    rows_quarantined: int
    warnings: tuple[str, ...]
    critical_failures: tuple[str, ...] = ()
    partitions: tuple[tuple, ...] | None = None  # what changed: these partitions; None = the table
    rows_repeated: int = 0  # exact re-deliveries, kept once: read = kept + quarantined + repeated
    unchanged: bool = False  # its rows' commit changed nothing (the stored rows were these already)


def record_results(spark: SparkSession, config: Config, run: Run, table: str, gate: GateOutcome) -> None:
    """The gate's results of `table` for ops.quality_results (failed runs' too): held for the
    run's one commit when it collects them, else appended at once."""
    if run.pending is not None:
        run.pending.append((table, list(gate.results)))
        return
    ops = load_schema("ops.quality_results")
    commit(spark, config, ops, quality_rows(spark, run.run_id, run.started, table, gate.results), Append())


def flush_results(spark: SparkSession, config: Config, run: Run) -> None:
    """Every result the run held, appended to ops.quality_results in one commit: a run adds one
    version and one file there, not one per table (an hourly schedule made thousands a day)."""
    if not run.pending:
        return
    ops = load_schema("ops.quality_results")
    commit(spark, config, ops, run_quality_rows(spark, run.run_id, run.started, run.pending), Append())
    run.pending.clear()


# progress callback: called with a label, returns a context; what it yields, when a dict, is
# filled in by the run before the step ends (`rows`: rows read; `files`: (done, total) raw files
# of the run; `eta_s`: seconds the rest of a --hours range should take; `live`: an io.progress
# Watch the display may poll while the step runs, for files done and an ETA), for the progress line
Step = Callable[[str], object]
