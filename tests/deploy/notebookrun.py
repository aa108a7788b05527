"""Runs a Databricks notebook of deploy/databricks/notebooks/ here, in a child Python, with a stub
`dbutils` whose widgets hold the given values (a widget not given keeps its default) and
`display` counting what is shown; on the spark profile a classic session with delta-spark is
built first and handed over as `spark`, as Databricks hands one to a notebook."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import child_environ

NOTEBOOKS = Path(__file__).resolve().parents[2] / "deploy" / "databricks" / "notebooks"

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


def run_notebook(name: str, widgets: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**child_environ(), "RUST_LOG": "error"}
    return subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOKS / name), json.dumps(widgets)],
                          capture_output=True, text=True, env=env, timeout=timeout)
