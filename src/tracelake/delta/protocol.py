"""The Delta protocol a table asks of whoever reads or writes it, read from its log before an
engine opens it. A table that a newer Delta wrote (a protocol version or a table feature this
release does not know) stops with the table and the feature named; the engines say less (Sail:
`unsupported reader features: [Unknown]`) or fail deeper, mid-command."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

import pyarrow.parquet as pq

from tracelake.errors import TracelakeError
from tracelake.io import objectstore

MAX_READER, MAX_WRITER = 3, 7
# the table features of the Delta protocol (PROTOCOL.md) up to delta-spark 4.4 / delta-rs 1.x
READER_FEATURES = frozenset({
    "columnMapping", "deletionVectors", "timestampNtz", "typeWidening", "typeWidening-preview", "v2Checkpoint",
    "vacuumProtocolCheck", "variantType", "variantType-preview", "variantShredding-preview",
})
WRITER_FEATURES = READER_FEATURES | {
    "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "identityColumns",
    "rowTracking", "domainMetadata", "icebergCompatV1", "icebergCompatV2", "icebergCompatV3", "clustering",
    "inCommitTimestamp", "allowColumnDefaults", "collations-preview", "checkpointProtection",
}
_COMMIT = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.[^/]+)?\.parquet")


@dataclass(frozen=True)
class Protocol:
    reader: int
    writer: int
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()

    @classmethod
    def of(cls, action: dict) -> Protocol:
        return cls(int(action["minReaderVersion"]), int(action["minWriterVersion"]),
                   tuple(action.get("readerFeatures") or ()), tuple(action.get("writerFeatures") or ()))


def _read(url: str) -> bytes | None:
    if "://" in url:
        return objectstore.read_object(url)
    try:
        with open(url, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _names(log: str) -> list[str]:
    if "://" in log:
        return [rel for rel, _ in objectstore.list_files(log) if "/" not in rel]
    return os.listdir(log) if os.path.isdir(log) else []


_VERSION = re.compile(r"\d{20}\.(?:json|checkpoint(?:\.[^/]+)?\.(?:parquet|json))")  # a commit or a checkpoint (v2: json too)


def holds_a_commit(names: list[str]) -> bool:
    """Whether log entries hold a version: a first write killed before its commit leaves a
    `_delta_log` with none (or a temporary file only), which is no table."""
    return any(_VERSION.fullmatch(n) for n in names)


def has_commit(path: str) -> bool:
    return holds_a_commit(_names(f"{path.rstrip('/')}/_delta_log"))


class DamagedLog(TracelakeError):
    """A commit of the table's log that no Delta reader can read: cut short, not JSON, or empty."""


def _actions(text: bytes | None, where: str, name: str) -> list[dict]:
    """A commit file's actions, one JSON object a line; DamagedLog naming the table and the file
    otherwise (the engines said `Invalid JSON in log record` or `list index out of range`, naming
    neither)."""
    if not text or not text.strip():
        raise DamagedLog(f"{name}: its Delta log is damaged: {where} is empty")
    actions = []
    for number, line in enumerate(text.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            action = None
        if not isinstance(action, dict):
            raise DamagedLog(f"{name}: its Delta log is damaged: {where} line {number} is not a JSON action "
                             "(cut short or overwritten); restore the file or re-create the table")
        actions.append(action)
    return actions


@dataclass(frozen=True)
class LogState:
    protocol: Protocol | None
    metadata: dict | None  # the newest metaData action: schemaString, partitionColumns, configuration


def read_log(path: str, name: str = "") -> LogState:
    """The table's current protocol and metadata: the newest commits that set them, else the
    newest checkpoint's. Every commit since that checkpoint is read, as an engine reads them,
    and a damaged one stops with DamagedLog; the commits before it are not, so the cost does
    not grow with the table."""
    log = f"{path.rstrip('/')}/_delta_log"
    names = _names(log)
    checkpoints = sorted((int(m.group(1)), n) for n in names if (m := _CHECKPOINT.fullmatch(n)))
    since = checkpoints[-1][0] if checkpoints else -1
    found: dict[str, dict] = {}
    for version in sorted((int(m.group(1)) for n in names if (m := _COMMIT.fullmatch(n))), reverse=True):
        if version <= since:
            break
        where = f"{log}/{version:020d}.json"
        for action in _actions(_read(where), where, name or path):
            for kind in ("protocol", "metaData"):
                if kind not in found and isinstance(action.get(kind), dict):
                    found[kind] = action[kind]
    if len(found) < 2 and "://" not in log:  # a store's checkpoint is left to the engine
        for _, part in (c for c in checkpoints if c[0] == since):  # a checkpoint in parts: one holds each
            table = pq.read_table(f"{log}/{part}", columns=[k for k in ("protocol", "metaData") if k not in found])
            for kind in table.column_names:
                row = next((r for r in table.column(kind).to_pylist() if r), None)
                if row is not None and kind not in found:
                    found[kind] = row
    proto = found.get("protocol")
    usable = proto is not None and proto.get("minReaderVersion") is not None
    return LogState(Protocol.of(proto) if usable else None, found.get("metaData"))


def table_protocol(path: str, name: str = "") -> Protocol | None:
    return read_log(path, name).protocol


def check_protocol(path: str, name: str, writing: bool = False, state: LogState | None = None) -> None:
    """Exit 2 naming the table and what it needs when this release of tracelake cannot read it
    (or, `writing`, write it); `state`: the log as read_log read it already."""
    proto = (state or read_log(path, name)).protocol
    if proto is None:
        return
    unknown = [f for f in proto.reader_features if f not in READER_FEATURES]
    if writing:
        unknown += [f for f in proto.writer_features if f not in WRITER_FEATURES and f not in unknown]
    if unknown:
        raise TracelakeError(
            f"{name}: its Delta protocol needs the table feature{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(f) for f in unknown)} (reader {proto.reader}, writer {proto.writer}), which this "
            f"release of tracelake cannot {'write' if writing else 'read'}: a newer Delta wrote it")
    if proto.reader > MAX_READER or (writing and proto.writer > MAX_WRITER):
        raise TracelakeError(
            f"{name}: its Delta protocol is reader {proto.reader}, writer {proto.writer}; this release of "
            f"tracelake {'writes' if writing else 'reads'} up to reader {MAX_READER}, writer {MAX_WRITER}: "
            "a newer Delta wrote it")
