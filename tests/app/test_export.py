"""`tracelake query` of a result larger than memory: its rows printed as the engine streams them,
so the whole process tree (the command and its engine) holds a batch at a time, not the result."""

from __future__ import annotations

import pytest
from helpers import run_measuring_peak

BOUND_BYTES = 1 << 30  # the whole process tree, engine included: about 0.4 GB measured; 6.4 GB before
EXPORT = "SELECT id, id * 3 AS tripled, concat('row-', CAST(id AS STRING)) AS label FROM range({rows})"


@pytest.mark.e2e  # a quarter of a minute: in `bash dev e2e`
@pytest.mark.parametrize("fmt, rows", [("csv", 5_000_000), ("json", 1_000_000)])
def test_an_export_of_millions_of_rows_stays_within_a_gigabyte_for_the_process_tree(tmp_path, fmt, rows):
    out_path = tmp_path / f"export.{fmt}"
    (tmp_path / "lake").mkdir()
    with open(out_path, "wb") as out:
        code, err, peak = run_measuring_peak(["query", EXPORT.format(rows=rows), "--format", fmt,
                                              "--lake", str(tmp_path / "lake")], out)
    assert code == 0, err
    print(f"\n{fmt} export of {rows:,} rows: peak {peak / 2**20:.0f} MiB for the process tree")
    assert 0 < peak < BOUND_BYTES
    ids = n = 0
    with open(out_path, encoding="utf-8") as fh:
        if fmt == "csv":
            assert next(fh) == "id,tripled,label\n"
            for line in fh:
                ident, tripled, label = line.rstrip("\n").split(",")
                assert int(tripled) == 3 * int(ident) and label == f"row-{ident}"
                ids, n = ids + int(ident), n + 1
        else:
            for line in fh:
                if line.startswith('  "id": '):
                    n += 1
                    ids += int(line.removeprefix('  "id": ').rstrip(",\n"))
    assert n == rows and ids == rows * (rows - 1) // 2
