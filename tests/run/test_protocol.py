"""A table that a newer Delta wrote: its protocol is read from the log before an engine opens
it, and a feature or version this release does not know stops the command (exit 2) with the
table and the feature named, where Sail said `unsupported reader features: [Unknown]` (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from helpers import itp_csv, job_id, tracelake_in_process, write_archive

from tracelake.delta.protocol import Protocol, holds_a_commit, table_protocol

pytestmark = pytest.mark.delta_io


# what writer version 2 implies, named: a writer-7 protocol must list every feature the table uses
# (delta-spark refuses one that leaves out `invariants` with DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH)
LEGACY_WRITER_FEATURES = ["appendOnly", "invariants"]


def _raise_protocol(table: Path, reader: list[str], writer: list[str], reader_version: int = 3) -> None:
    """A commit that sets a newer protocol, as a newer Delta writer would."""
    version = DeltaTable(str(table)).version() + 1
    actions = [{"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "SET TBLPROPERTIES"}},
               {"protocol": {"minReaderVersion": reader_version, "minWriterVersion": 7,
                             **({"readerFeatures": reader} if reader_version >= 3 else {}),
                             "writerFeatures": [*LEGACY_WRITER_FEATURES, *writer]}}]
    (table / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_the_protocol_is_the_newest_commits_or_the_checkpoints(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1]}))
    write_deltalake(str(path), pa.table({"a": [2]}), mode="append")
    assert table_protocol(str(path)) == Protocol(1, 2)
    DeltaTable(str(path)).create_checkpoint()
    for commit in (path / "_delta_log").glob("*.json"):
        commit.unlink()  # only the checkpoint says it now
    assert table_protocol(str(path)) == Protocol(1, 2)
    _raise_protocol(path, ["deletionVectors"], ["deletionVectors", "rowTracking"])
    assert table_protocol(str(path)) == Protocol(3, 7, ("deletionVectors",),
                                                 (*LEGACY_WRITER_FEATURES, "deletionVectors", "rowTracking"))


@pytest.fixture
def lake(engine, tmp_path) -> Path:
    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},100,601,1"]),
                                              "cluster02.csv": itp_csv([f"{job_id(2)},200,602,1"]), "LICENSE": "MIT"})
    done = tracelake_in_process(engine, "ingest", "itp", "--raw", str(raw), "--lake", str(tmp_path / "lake"))
    assert done.returncode == 0, done.stderr
    return tmp_path / "lake"


def _cli(engine, lake: Path, *args: str):
    return tracelake_in_process(engine, *args, "--lake", str(lake))


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_a_log_is_a_table_once_it_holds_a_commit_or_a_checkpoint():
    """A first write killed before its commit leaves a log folder with a temporary file, or none."""
    version = "00000000000000000010"
    assert [holds_a_commit(names) for names in (
        [f"{version}.json"], [f"{version}.checkpoint.parquet"], [f"{version}.checkpoint.0000000001.0000000002.parquet"],
        [f"{version}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"],  # a v2 checkpoint in json
        [], [f".{version}.json.tmp"], ["_last_checkpoint", f"{version}.crc"], ["_commits"],
    )] == [True, True, True, True, False, False, False, False]


def test_a_reader_feature_of_a_newer_delta_stops_reads_and_writes_naming_table_and_feature(engine, lake, tmp_path):
    _raise_protocol(lake / "bronze" / "itp_jobs", ["fancyNewFeature"], ["fancyNewFeature"])
    message = ("tracelake: error: bronze.itp_jobs: its Delta protocol needs the table feature 'fancyNewFeature' "
               "(reader 3, writer 7), which this release of tracelake cannot {}: a newer Delta wrote it")
    for args in (["query", "SELECT count(*) FROM silver.jobs"], ["tables"]):
        done = _cli(engine, lake, *args)
        assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, message.format("read"))
    done = _cli(engine, lake, "ingest", "itp", "--raw", str(tmp_path / "raw"))
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, message.format("write"))


@pytest.mark.slow_on_classic  # its share of the spark profile's set runs in `bash dev e2e`
def test_a_newer_writer_feature_leaves_reads_and_stops_writes(engine, lake, tmp_path):
    _raise_protocol(lake / "bronze" / "itp_jobs", [], ["futureWriterThing"])
    done = _cli(engine, lake, "query", "SELECT count(*) AS n FROM bronze.itp_jobs")
    assert (done.returncode, done.stdout) == (0, "n\n2\n")
    done = _cli(engine, lake, "ingest", "itp", "--raw", str(tmp_path / "raw"))
    assert (done.returncode, done.stderr.strip().splitlines()[-1]) == (2, (
        "tracelake: error: bronze.itp_jobs: its Delta protocol needs the table feature 'futureWriterThing' "
        "(reader 3, writer 7), which this release of tracelake cannot write: a newer Delta wrote it"))
