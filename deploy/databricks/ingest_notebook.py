# Databricks notebook source
# MAGIC %md
# MAGIC # tracelake ingest
# MAGIC
# MAGIC Ingests one source's raw trace files into the Delta lake with the `spark` profile. On
# MAGIC Databricks `start_engine` reuses the notebook's session and Delta is built in, so no
# MAGIC `--packages` are needed.
# MAGIC
# MAGIC Install tracelake on the cluster first, either from the repo checkout (editable, so the
# MAGIC checkout's `conf/`, `schemas/` and `expectations/` are found) or from a wheel:
# MAGIC
# MAGIC ```
# MAGIC %pip install -e /Workspace/Repos/<you>/tracelake
# MAGIC %pip install /Volumes/<catalog>/<schema>/<volume>/tracelake-0.1.0-py3-none-any.whl
# MAGIC ```
# MAGIC
# MAGIC With the wheel, also set the `TRACELAKE_HOME` environment variable to a copy of the
# MAGIC checkout. `raw` and `lake` should be Unity Catalog volume paths (`/Volumes/...`): the
# MAGIC driver reads and unpacks `raw` as local files and Spark reads and writes the same paths.
# MAGIC Re-running is safe: tables change by Delta MERGE on their keys.

# COMMAND ----------

dbutils.widgets.text("source", "itp", "source (itp | zeus)")
dbutils.widgets.text("raw", "", "raw folder")
dbutils.widgets.text("lake", "", "lake root")

source = dbutils.widgets.get("source").strip()
raw = dbutils.widgets.get("raw").strip() or None  # None: raw_roots from conf/
lake = dbutils.widgets.get("lake").strip() or None  # None: lake_root from conf/

# COMMAND ----------

from tracelake.config import load_config
from tracelake.engine import start_engine
from tracelake.pipeline import run_ingest

config = load_config(profile="spark", overrides={"lake_root": lake})
engine = start_engine(config)  # reuses the notebook's active session
stats = run_ingest(engine, config, source, raw)

# COMMAND ----------

rows = [
    (s.table, s.rows_read, s.rows_kept, s.rows_quarantined, "; ".join(s.warnings))
    for s in stats
]
display(
    spark.createDataFrame(
        rows,
        "table string, rows_read long, rows_kept long, rows_quarantined long, warnings string",
    )
)
