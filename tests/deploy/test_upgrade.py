"""A lake written by the release before the column renames (docs/naming.md), taken over by this
one as a user upgrading would: the earlier release's code, taken from git, ingests a generated
Zhejiang world's workbook, task logs and first hour; this release then queries it, migrates it
(`tracelake migrate`, or its next ingest without that), and ingests the second hour. Each way
the lake ends equal, table for table and row for row, to a lake this release wrote from the
start; the migration keeps every value and sets the schema files' column comments."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile

import pytest
from deploykit import REPO, delta_versions, engine_rows, run, tracelake

from tracelake.schema import table_schema

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

BEFORE = "5dd4b45a93786b7ebbcf409d1af6039b2376c579"  # the last commit before the renames
HOURS = ("none", "2024052400")  # what the earlier release ingests; this one adds the next hour
NEXT = "2024052401"
RENAMED = sorted(f"{s.layer}.{s.table}" for s in (table_schema(p.stem) for p in (REPO / "schemas").glob("*.yaml")
                                                   if not p.name.startswith("_"))
                 if any(c.formerly for c in s.columns))


def _earlier_release(into) -> dict[str, str]:
    """The environment that runs the earlier release's CLI (its src/, schemas/, conf/ from git)."""
    git = shutil.which("git")
    if git is None or run([git, "cat-file", "-e", f"{BEFORE}^{{commit}}"]).returncode != 0:
        pytest.skip(f"commit {BEFORE[:7]} is not in this checkout (no git, or a shallow clone): the earlier release's code is needed")
    archive = subprocess.run([git, "archive", BEFORE, "src", "schemas", "expectations", "conf"], cwd=REPO,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return {"PYTHONPATH": str(into / "src"), "TRACELAKE_HOME": str(into)}


def _ingest(lake, raw, hours: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = tracelake("ingest", "zhejiang", "--raw", str(raw), "--hours", hours, "--lake", str(lake), env=env,
                     timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _same_lakes(got, expected) -> None:
    names = sorted(t for t in delta_versions(expected) if not t.startswith("ops."))
    assert sorted(t for t in delta_versions(got) if not t.startswith("ops.")) == names
    for name in names:
        assert engine_rows(got, name) == engine_rows(expected, name), name


def _stored(lake, name: str) -> tuple[list[str], dict[str, str | None], list[tuple]]:
    """(column names, column comments, sorted rows) of a table as `deltalake` reads it."""
    from deltalake import DeltaTable

    table = DeltaTable(str(lake.joinpath(*name.split("."))))
    fields = table.schema().fields
    data = table.to_pyarrow_table()
    rows = sorted((tuple(r[f.name] for f in fields) for r in data.to_pylist()), key=repr)
    return [f.name for f in fields], {f.name: (f.metadata or {}).get("comment") for f in fields}, rows


def test_a_lake_of_the_earlier_release_is_renamed_and_goes_on_as_if_written_by_this_one(tmp_path):
    earlier = _earlier_release(tmp_path / "earlier")
    raw = tmp_path / "raw"
    made = tracelake("generate", "zhejiang", "--out", str(raw), "--hours", "2", "--tasks", "2", "--scale", "0.05")
    assert made.returncode == 0, made.stderr[-2000:]
    old = tmp_path / "old"
    for hours in HOURS:
        _ingest(old, raw, hours, env=earlier)
    assert RENAMED == ["gold.zj_iteration_network", "gold.zj_task_network_summary", "silver.zj_iteration_counters",
                       "silver.zj_iteration_flows", "silver.zj_iteration_port_minutes", "silver.zj_link_wiring",
                       "silver.zj_nic_map", "silver.zj_nic_rates", "silver.zj_task_paths", "silver.zj_task_ranks"]
    before = {name: _stored(old, name) for name in RENAMED}
    assert "switchname" in before["silver.zj_task_ranks"][0]  # the earlier release's names, as written

    # a query before the migration answers under the old names and says what to run
    asked = tracelake("query", "SELECT count(DISTINCT switchname) AS leafs FROM silver.zj_task_ranks",
                      "--format", "csv", "--lake", str(old))
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.split() == ["leafs", "12"]
    assert asked.stderr.count("warning:") == 1
    assert f"{len(RENAMED)} table(s) still have an earlier release's column names" in asked.stderr
    assert "`tracelake migrate` (or the next ingest) renames them" in asked.stderr

    by_ingest = tmp_path / "by_ingest"
    shutil.copytree(old, by_ingest)
    migrated = tracelake("migrate", "--lake", str(old))
    assert migrated.returncode == 0, migrated.stderr
    assert sorted(line.split(":")[0] for line in migrated.stdout.splitlines()) == RENAMED
    assert ("silver.zj_task_ranks: columns renamed to this release's names (sysname -> host_name, "
            "switchname -> device_name, access_port -> port_name; docs/naming.md)") in migrated.stdout
    added = {"gold.zj_iteration_network": {"hour_cst"}}  # new in this release: the table's next build adds it
    for name in RENAMED:  # the same values under the schema file's names, with its comments
        schema = table_schema(name)
        renames = {old_name: c.name for c in schema.columns for old_name in c.formerly}
        columns, comments, rows = _stored(old, name)
        old_columns, _, old_rows = before[name]
        expected = [c for c in schema.columns if c.name not in added.get(name, set())]
        assert sorted(columns) == sorted(c.name for c in expected), name
        assert comments == {c.name: c.comment for c in expected}, name
        order = [columns.index(renames.get(c, c)) for c in old_columns]
        assert sorted((tuple(r[i] for i in order) for r in rows), key=repr) == old_rows, name
    again = tracelake("migrate", "--lake", str(old))
    assert again.returncode == 0 and again.stdout.strip() == \
        "nothing to migrate: every table has this release's column names"

    _ingest(old, raw, NEXT)
    renamed_by_ingest = _ingest(by_ingest, raw, NEXT)
    assert renamed_by_ingest.stderr.count("columns renamed to this release's names") == len(RENAMED)
    fresh = tmp_path / "fresh"
    for hours in (*HOURS, NEXT):
        _ingest(fresh, raw, hours)
    _same_lakes(old, fresh)
    _same_lakes(by_ingest, fresh)
