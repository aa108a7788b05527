"""The Databricks bundle (deploy/databricks) checked as far as this machine can: the YAML's
structure (every path it names exists; each notebook task's parameters are exactly the widgets
its notebook declares), the wheel it builds carries conf/, schemas/ and expectations/, and each
notebook runs locally with a stub `dbutils`, checked in the lake: on the local profile, and on a
classic Spark session with delta-spark handed to it as the `spark` Databricks hands a notebook."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

pytestmark = pytest.mark.e2e  # the end-to-end set: `bash dev e2e`

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "deploy" / "databricks"
RUNNER = """
import json, sys
widgets = json.loads(sys.argv[2])

class Widgets:
    def text(self, name, default, label=None):
        widgets.setdefault(name, default)
    def get(self, name):
        return widgets[name]

class DbUtils:
    widgets = Widgets()

shown = []
spark = None
if widgets.get("profile") == "spark":  # a classic session with delta-spark, built before the notebook as Databricks does
    from pyspark.sql import SparkSession
    from tracelake.deltajars import fetch
    spark = (SparkSession.builder.master("local[2]").config("spark.jars", ",".join(map(str, fetch())))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.databricks.delta.snapshotPartitions", "2").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "4g").getOrCreate())
source = open(sys.argv[1], encoding="utf-8").read()
exec(compile(source, sys.argv[1], "exec"),
     {"dbutils": DbUtils(), "display": shown.append, "spark": spark, "__name__": "__main__"})
print("DISPLAYED", len(shown))
"""


def _widgets(notebook: Path) -> list[str]:
    return re.findall(r'dbutils\.widgets\.text\("([^"]+)"', notebook.read_text(encoding="utf-8"))


def _jobs() -> dict:
    return yaml.safe_load((BUNDLE / "resources" / "tracelake.job.yml").read_text())["resources"]["jobs"]


def test_bundle_yaml_names_existing_paths_and_declared_widgets():
    bundle = yaml.safe_load((BUNDLE / "databricks.yml").read_text())
    assert set(bundle["targets"]) == {"dev", "prod"}
    assert {"lake_root", "catalog"} <= set(bundle["variables"])
    assert (BUNDLE / bundle["artifacts"]["tracelake_wheel"]["path"] / "pyproject.toml").is_file()
    jobs = _jobs()
    assert sorted(jobs) == ["tracelake_correlation", "tracelake_ingest_acme", "tracelake_ingest_itp",
                            "tracelake_ingest_zeus", "tracelake_ingest_zhejiang"]
    for job in jobs.values():
        for task in job["tasks"]:
            notebook = (BUNDLE / "resources" / task["notebook_task"]["notebook_path"]).resolve()
            assert notebook.is_file(), notebook
            assert notebook.read_text(encoding="utf-8").startswith("# Databricks notebook source\n")
            assert sorted(task["notebook_task"]["base_parameters"]) == sorted(_widgets(notebook)), notebook.name
            used = re.findall(r"\$\{var\.(\w+)\}", json.dumps(task))
            assert set(used) <= set(bundle["variables"])


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


def _run_notebook(name: str, widgets: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "RUST_LOG": "error"}
    return subprocess.run([sys.executable, "-c", RUNNER, str(BUNDLE / "notebooks" / name), json.dumps(widgets)],
                          capture_output=True, text=True, env=env, timeout=600)


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
        ran = _run_notebook("ingest.py", {"source": source, "raw": str(raw / source), "lake": str(lake),
                                          "profile": "local", "hours": "", "catalog": ""})
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "DISPLAYED 1" in ran.stdout
    return lake


def test_ingest_notebook_fills_the_lake(notebook_lake):
    assert DeltaTable(str(notebook_lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows > 0
    iterations = DeltaTable(str(notebook_lake / "gold" / "zj_iteration_network")).to_pyarrow_table()
    assert iterations.num_rows > 0 and set(iterations.column("task_id").to_pylist())


def test_explore_notebook_plots_from_the_gold_tables(notebook_lake):
    ran = _run_notebook("explore.py", {"lake": str(notebook_lake), "profile": "local", "task_id": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 4" in ran.stdout  # characterization table and figure, the task figure, slow steps by reason


def test_the_notebooks_run_on_a_delta_spark_session_handed_to_them(notebook_lake, tmp_path):
    """The ingest notebook fills a lake through the handed session (the `spark` profile reuses
    it), and the explore notebook plots the local profile's lake through such a session."""
    raw, lake = tmp_path / "itp", tmp_path / "lake"
    done = subprocess.run([sys.executable, "-m", "tracelake", "generate", "itp", "--out", str(raw), "--scale", "0.01"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = _run_notebook("ingest.py", {"source": "itp", "raw": str(raw), "lake": str(lake), "profile": "spark",
                                      "hours": "", "catalog": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 1" in ran.stdout
    assert DeltaTable(str(lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows == \
        DeltaTable(str(notebook_lake / "bronze" / "itp_jobs")).to_pyarrow_table().num_rows
    ran = _run_notebook("explore.py", {"lake": str(notebook_lake), "profile": "spark", "task_id": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "DISPLAYED 4" in ran.stdout
