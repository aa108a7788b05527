"""Which partitions of the lake's ingested tables its derived tables are settled on, so that an
identical re-run of an hour (a scheduler's retry, a backfill over hours already in) skips their
rebuilds.

An ingest whose rows equal the stored ones commits nothing already (delta.commit's `compare`),
but that alone cannot skip the rebuilds: a run stopped after its commits and before its rebuilds
leaves derived rows behind their inputs, and only a rebuild repairs them. So a local lake keeps
`_settled.json`: per ingested table, the partitions whose derived rows were rebuilt after their
last commit, by this very code (`code_digest`). A run takes its batch's partitions out of the
record before its first commit (written to disk before it) and puts them back once every rebuild
of the run ended, with the derived tables the lake then holds. A batch whose commits changed
nothing, whose partitions are all in the record, and none of whose derived tables went missing
since, is not rebuilt. A lake without the record, or one written by other code, rebuilds as
before; so does a lake at a URL, which keeps no record. Whole-table (unpartitioned) inputs are
never recorded: their merges do not say whether they changed anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from pyspark.sql import SparkSession

import tracelake
from tracelake.api.contract import Derived, Partitions
from tracelake.config import Config
from tracelake.delta.catalog import table_exists
from tracelake.io import objectstore
from tracelake.resources import resource_dir

RECORD = "_settled.json"


@cache
def code_digest() -> str:
    """A digest of what derived rows depend on besides their inputs: the package's code, the
    table schemas and the rule suites. Another version of any of them rebuilds as before."""
    package = Path(tracelake.__file__).parent
    files = [*sorted(package.rglob("*.py")), *sorted(resource_dir("schemas").glob("*.yaml")),
             *sorted(resource_dir("expectations").glob("*.json"))]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass
class Settled:
    """The record of one lake: `parts` per table (partition values as strings); `path` None for a
    lake that keeps none."""

    path: Path | None
    parts: dict[str, set[tuple]] = field(default_factory=dict)
    derived: set[str] = field(default_factory=set)  # the derived tables the lake held when last settled
    owed: list[dict[str, Partitions | None]] = field(default_factory=list)  # taken out by this run

    def holds(self, changes: dict[str, Partitions | None], derived_now: set[str]) -> bool:
        """Whether every partition of `changes` is settled (none is a whole table) and every
        derived table the record saw is still in the lake (`derived_now`: present)."""
        return self.path is not None and bool(changes) and self.derived <= derived_now and all(
            partitions is not None and {_key(p) for p in partitions} <= self.parts.get(table, set())
            for table, partitions in changes.items())

    def owe(self, changes: dict[str, Partitions | None]) -> None:
        """Take these partitions out, on disk, before they are committed."""
        self.owed.append(changes)
        for table, partitions in changes.items():
            if partitions is None:
                self.parts.pop(table, None)
            else:
                self.parts.get(table, set()).difference_update(_key(p) for p in partitions)
        self._save()

    def settle(self, derived_now: set[str]) -> None:
        """Put back every partition this run took out, once every rebuild that reads them
        ended, with the derived tables the lake now holds."""
        self.derived = set(derived_now)
        for changes in self.owed:
            for table, partitions in changes.items():
                if partitions is not None:
                    self.parts.setdefault(table, set()).update(_key(p) for p in partitions)
        self.owed = []
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        tables = {t: sorted(map(list, p), key=repr) for t, p in sorted(self.parts.items())}
        text = json.dumps({"code": code_digest(), "derived": sorted(self.derived), "tables": tables})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{RECORD}.{uuid.uuid4().hex[:8]}")
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())  # on disk before the commit it guards
        os.replace(temporary, self.path)


def present(spark: SparkSession, config: Config, derived: list[Derived]) -> set[str]:
    """The derived tables the lake holds: one the record saw that is gone (deleted by hand) is
    rebuilt, not skipped."""
    return {item.table for item in derived if table_exists(spark, config.table_path(*item.table.split(".", 1)))}


def _key(partition: tuple) -> tuple:
    return tuple(None if v is None else str(v) for v in partition)


def load(config: Config) -> Settled:
    """The lake's record: empty when absent, unreadable or written by other code."""
    if objectstore.is_url(config.lake_root):
        return Settled(None)
    path = Path(config.lake_root) / RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("code") != code_digest():
            return Settled(path)
        return Settled(path, {t: {tuple(p) for p in parts} for t, parts in record["tables"].items()},
                       set(record["derived"]))
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return Settled(path)
