"""The Databricks bundle (deploy/databricks) run as far as this machine can: the wheel it builds
carries conf/, schemas/ and expectations/, and each notebook runs locally with a stub `dbutils`
(notebookrun.py), checked in the lake: on the local profile, and on a classic Spark session with
delta-spark handed to it as the `spark` Databricks hands a notebook. The bundle's YAML is checked
offline, outside the end-to-end set, by test_bundle_offline.py."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from deltalake import DeltaTable
from notebookrun import run_notebook

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_carries_conf_schemas_and_expectations(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                            "--wheel-dir", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("tracelake-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = {n.split(".data/data/share/tracelake/")[1] for n in names if ".data/data/share/tracelake/" in n}
    expected = {f"{folder}/{p.name}" for folder in ("conf", "schemas", "expectations")
                for p in (ROOT / folder).iterdir() if p.suffix in (".yaml", ".json")}
    assert data == expected


@pytest.fixture(scope="module")
def notebook_lake(tmp_path_factory):
    lake = tmp_path_factory.mktemp("nb") / "lake"
    raw = lake.parent / "raw"
    for source in ("itp", "zhejiang"):
        args = ["generate", source, "--out", str(raw / source), "--scale", "0.01" if source == "itp" else "0.1"]
        if source == "zhejiang":
            args += ["--hours", "1", "--tasks", "1"]
        done = subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        ran = run_notebook("ingest.py", {"source": source, "raw": str(raw / source), "lake": str(lake),
                                         "profile": "local", "hours": "all" if source == "zhejiang" else "",
                                         "catalog": ""})
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "DISPLAYED 1" in ran.stdout
    return lake


def test_ingest_notebook_fills_the_lake(notebook_lake):
    assert DeltaTable(str(notebook_lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows > 0
    iterations = DeltaTable(str(notebook_lake / "gold" / "zj_iteration_network")).to_pyarrow_table()
    assert iterations.num_rows > 0 and set(iterations.column("task_id").to_pylist())


def test_explore_notebook_plots_from_the_gold_tables(notebook_lake):
    ran = run_notebook("explore.py", {"lake": str(notebook_lake), "profile": "local", "task_id": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 4" in ran.stdout  # characterization table and figure, the task figure, slow steps by reason


def test_report_notebook_writes_the_html_report_into_its_folder(notebook_lake, tmp_path):
    out = tmp_path / "reports"
    ran = run_notebook("report.py", {"lake": str(notebook_lake), "profile": "local", "catalog": "", "out": str(out)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 1" in ran.stdout
    page = (out / "index.html").read_text(encoding="utf-8")
    figures = sorted(out.rglob("*.png"))
    assert figures and all(f"src='{f.relative_to(out)}'" in page for f in figures)


def test_the_notebooks_run_on_a_delta_spark_session_handed_to_them(notebook_lake, tmp_path):
    """The ingest notebook fills a lake through the handed session (the `spark` profile reuses
    it), and the explore notebook plots the local profile's lake through such a session."""
    raw, lake = tmp_path / "itp", tmp_path / "lake"
    done = subprocess.run([sys.executable, "-m", "tracelake", "generate", "itp", "--out", str(raw), "--scale", "0.01"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = run_notebook("ingest.py", {"source": "itp", "raw": str(raw), "lake": str(lake), "profile": "spark",
                                     "hours": "", "catalog": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 1" in ran.stdout
    assert DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows == \
        DeltaTable(str(notebook_lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows
    ran = run_notebook("explore.py", {"lake": str(notebook_lake), "profile": "spark", "task_id": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 4" in ran.stdout
