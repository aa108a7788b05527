"""The AcmeTrace utilization ingest on a held-out input: two monthly Seren GPU_UTIL files at the
release's width written by bench/acme_heldout.py, a generator that shares no code or model with
the one the ingest was tuned on (sources/acme/synth) nor with the parser. Its manifest says what
the parse rules must give (kept, quarantined, each reason, a few cells row by row); the ingest
must give exactly that, once on the one pass (every cell a number) and once with a few `nan` and
`N/A` cells, which send the series to the exact parse."""

from __future__ import annotations

import csv
import importlib.util
import json
import logging
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tracelake.run.pipeline import run_ingest
from tracelake.sources.acme import utilization

HELDOUT = Path(__file__).resolve().parents[3] / "bench" / "acme_heldout.py"
UTIL = "bronze.acme_utilization"
LINES, COLUMNS, SEED = 120, 2000, 11


def _generator():
    """bench/acme_heldout.py by path: bench/ is no package, and the generator stays out of src/."""
    spec = importlib.util.spec_from_file_location("acme_heldout", HELDOUT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells_in_files(raw: Path) -> tuple[int, int]:
    """(header columns of the widest file, non-empty cells of both files), read plainly."""
    widest = cells = 0
    for path in sorted((raw / "utilization").rglob("*.csv")):
        with open(path, encoding="ascii", newline="") as fh:
            rows = csv.reader(fh)
            widest = max(widest, len(next(rows)) - 1)
            cells += sum(1 for row in rows for value in row[1:] if value)
    return widest, cells


def _table(spark, config, layer: str):
    return spark.read.format("delta").load(config.table_path(layer, "acme_utilization"))


@pytest.mark.parametrize("bad_cells", [False, True], ids=["numbers-only", "bad-cells"])
def test_heldout_ingest_gives_the_generators_expected_counts_and_cells(engine, spark, config, tmp_path_factory,
                                                                       caplog, bad_cells):
    raw = tmp_path_factory.mktemp("acme-heldout")
    manifest = _generator().generate(raw, LINES, COLUMNS, SEED, bad_cells)
    expected = manifest["expected"]
    assert _cells_in_files(raw) == (COLUMNS, manifest[UTIL]["cells"])
    assert manifest[UTIL]["cells"] == expected["kept"] + expected["quarantined"]

    with caplog.at_level(logging.INFO, logger=utilization.__name__):
        util = {s.table: s for s in run_ingest(engine, config, "acme", str(raw))}[UTIL]
    # which way the cells went: the one pass, handing the lines of every repeated Time (here the
    # October top repeats the September end, so the Times both files span are all repeated) to the
    # exact parse; or, with a bad cell, the whole series line by line
    ways = [r.getMessage() for r in caplog.records if "parsed line by line" in r.getMessage()]
    times = Counter(line.split(",", 1)[0] for path in sorted(raw.rglob("*.csv"))
                    for line in path.read_text().splitlines()[1:])
    assert sum(1 for n in times.values() if n > 1) == manifest["repeated_times"]
    assert ways == [f"{UTIL}: 1 series parsed line by line, 0 line(s) handed over" if bad_cells else
                    f"{UTIL}: 0 series parsed line by line, {sum(n for n in times.values() if n > 1)} line(s) handed over"]
    assert (util.rows_read, util.rows_kept, util.rows_quarantined) == (
        manifest[UTIL]["cells"], expected["kept"], expected["quarantined"])
    bronze, quarantine = _table(spark, config, "bronze"), _table(spark, config, "quarantine")
    assert bronze.count() == expected["kept"]
    reasons = [tuple(r.reasons) for r in quarantine.select("reasons").collect()]
    assert len(reasons) == expected["quarantined"]
    assert Counter(r for rs in reasons for r in rs) == expected["quarantine_reasons"]
    assert {json.dumps(list(rs)): n for rs, n in Counter(reasons).items()} == expected["quarantine_reason_lists"]

    kinds = {e["kind"] for e in manifest["examples"]}
    assert {"retried within a file", "same value spelled twice", "three copies", "kept by string order",
            "changed across months", "empty in September, filled in October", "only in October's header"} <= kinds
    if bad_cells:
        assert {"bad cell beside a good copy", "bad September cell, October's copy kept", "bad cell alone"} <= kinds
    for example in manifest["examples"]:
        _assert_cell(bronze, quarantine, example)


def _assert_cell(bronze, quarantine, example: dict) -> None:
    """One (Time, column) key of the manifest: its bronze row (or none) and its quarantine rows."""
    node, gpu = example["column"].rsplit("-", 1)
    ts = datetime.fromtimestamp(example["ts"], UTC)
    key = (F.col("ts") == F.lit(ts)) & (F.col("node_ip") == node) & (F.col("gpu_index") == int(gpu))
    kept = [(r.value, r.source_file) for r in bronze.filter(key).select("value", "source_file").collect()]
    want = example["kept"]
    assert kept == ([(float(want["raw"]), want["source_file"])] if want else []), example
    mine = quarantine.filter(F.col("raw_values_json").contains(f'"Time":"{example["ts"]}"')
                             & F.col("raw_values_json").contains(f'"{example["column"]}":'))
    got = sorted((r.source_file, json.loads(r.raw_values_json)[example["column"]], list(r.reasons))
                 for r in mine.select("source_file", "raw_values_json", "reasons").collect())
    assert got == sorted((q["source_file"], q["raw"], q["reasons"]) for q in example["quarantined"]), example


@pytest.mark.portable
def test_heldout_generator_is_deterministic_and_writes_what_it_models(tmp_path):
    """Same seed, same bytes; Times non-decreasing in each file; one server in each month's header
    only; October opens with September's last rows; the bad cells change only their own cells."""
    generator = _generator()
    first, again, bad = (generator.generate(tmp_path / name, 40, 64, 5, name == "bad") for name in ("a", "b", "bad"))
    assert first == {**again, "generated_s": first["generated_s"]}
    months = {}
    for path in sorted((tmp_path / "a" / "utilization" / "seren").iterdir()):
        assert path.read_bytes() == (tmp_path / "b" / path.relative_to(tmp_path / "a")).read_bytes()
        with open(path, encoding="ascii", newline="") as fh:
            rows = list(csv.reader(fh))
        times = [int(r[0]) for r in rows[1:]]
        assert times == sorted(times) and len(rows[0]) == 65
        months[path.name] = ({c.rsplit("-", 1)[0] for c in rows[0][1:]}, times, rows)
    (sept_nodes, sept_times, sept_rows), (oct_nodes, oct_times, oct_rows) = months.values()
    assert sept_nodes - oct_nodes == {first["retired_node"]} and oct_nodes - sept_nodes == {first["joined_node"]}
    stretch = first["repeated_stretch"]
    assert oct_times[:stretch] == sorted(set(sept_times))[-stretch:] and oct_times[stretch] == 1696118400
    assert sept_rows[0] != oct_rows[0]  # another column order
    with open(tmp_path / "bad" / "utilization" / "seren" / "GPU_UTIL-2023-09.csv", encoding="ascii") as fh:
        spoilt = [line.split(",") for line in fh.read().splitlines()]
    changed = [(a, b) for a, b in zip((c for r in sept_rows for c in r), (c for r in spoilt for c in r)) if a != b]
    assert sorted({b for _, b in changed}) == ["N/A", "nan"] and len(changed) == 6
    filled = sum(1 for a, _ in changed if a == "")  # a bad cell where the clean file has none
    assert bad["bronze.acme_utilization"]["cells"] == first["bronze.acme_utilization"]["cells"] + filled
