# Databricks notebook source
# MAGIC %md
# MAGIC # tracelake report
# MAGIC
# MAGIC What `tracelake report --out DIR` writes (figures as PNG and one `index.html`), from the
# MAGIC gold tables of the lake, into `out`: a Unity Catalog volume folder (files, not tables). The
# MAGIC page is built on the driver's disk and then copied, since a volume takes whole files
# MAGIC written in one pass. Runs last in the pipeline job, after the tasks that wrote the tables.

# COMMAND ----------

dbutils.widgets.text("lake", "", "lake root")
dbutils.widgets.text("profile", "spark", "engine profile")
dbutils.widgets.text("catalog", "", "catalog prefix of SQL names")
dbutils.widgets.text("out", "", "report folder")

lake = dbutils.widgets.get("lake").strip() or None
profile = dbutils.widgets.get("profile").strip() or "spark"
catalog = dbutils.widgets.get("catalog").strip()
out = dbutils.widgets.get("out").strip()

# COMMAND ----------

import shutil
import tempfile
from pathlib import Path

from tracelake.app.report import build_report
from tracelake.config import load_config
from tracelake.delta.catalog import check_uc_location, register_all
from tracelake.engine import start_engine
from tracelake.errors import TracelakeError

if not out:
    raise TracelakeError("out is empty: give the folder the report is written to")
config = load_config(profile=profile, overrides={"lake_root": lake},
                     conf_pairs=[f"tables.catalog={catalog}"] if catalog else [])
check_uc_location(lake or config.lake_root)
engine = start_engine(config)
register_all(engine.spark, config)
with tempfile.TemporaryDirectory(prefix="tracelake-report-") as built:
    written = build_report(engine, config, built)
    shutil.copytree(built, out, dirs_exist_ok=True)
    pages = [str(Path(out) / Path(p).relative_to(built)) for p in written]

# COMMAND ----------

display(engine.spark.createDataFrame([(p,) for p in pages], "file string"))
