"""Every case of the bad-input corpus (cases.py) through the CLI's main(), on the test run's one
engine (helpers.tracelake_in_process; the CLI as a process of its own is tested by
tests/app/test_cli.py and test_faults.py): the exit code, the one-line message, the rows of each table, the quarantine reasons, rows read = kept +
quarantined, and that every table of the lake still reads afterwards, with the columns, types and
nullability its schema file declares."""

from __future__ import annotations

import contextlib
import shutil

import pytest
from cases import CASES
from conftest import SHARED_DATA
from corpus import REMOVE
from deltalake import DeltaTable
from helpers import tracelake_in_process
from lake_schema import lake_tables, schema_drift


def rows(tables: dict[str, DeltaTable], name: str) -> int:
    return tables[name].to_pyarrow_table().num_rows if name in tables else 0


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_outcome(case, tmp_path, engine):
    if case.name == "zj_real_task_without_workbook" and not (SHARED_DATA / "zhejiang" / "taskinfo").is_dir():
        pytest.skip(f"real Zhejiang task folder not found at {SHARED_DATA / 'zhejiang' / 'taskinfo'}")
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    raw.mkdir()
    runs = case.write(raw)
    with case.beside() if case.beside else contextlib.nullcontext("") as address:
        for args in runs:
            if args[0] == REMOVE:  # the lake damaged between two runs
                shutil.rmtree(lake / args[1])
                continue
            args = [a.replace("{beside}", address) for a in args]
            if args[0] not in ("describe", "generate") and "--lake" not in args:
                args = [*args, "--lake", str(lake)]
            done = tracelake_in_process(engine, *args)
    last_line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    assert done.returncode == case.rc, done.stderr[-2000:]
    if case.message is not None:
        assert case.message in last_line, done.stderr[-2000:]
        assert last_line.startswith("tracelake") and "Traceback" not in done.stderr
    if case.stdout is not None:
        assert case.stdout in done.stdout
    if case.hidden is not None:
        assert case.hidden not in done.stdout + done.stderr
    tables = lake_tables(lake)  # opening each: every table still reads
    for name, table in tables.items():
        table.to_pyarrow_table()
        assert schema_drift(name, table) == [], name
    for name, expected in case.rows.items():
        assert rows(tables, name) == expected, name
    for name, expected in case.reasons.items():
        got = sorted(r for r in tables[name].to_pyarrow_table().column("reasons").to_pylist()) if name in tables else []
        assert got == sorted(expected), name
    for table, written in case.read.items():  # no row is silently dropped
        assert rows(tables, f"bronze/{table}") + rows(tables, f"quarantine/{table}") == written, table
