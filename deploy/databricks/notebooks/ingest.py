# Databricks notebook source
# MAGIC %md
# MAGIC # tracelake ingest
# MAGIC
# MAGIC Ingests one source's release folder into the lake. On Databricks the `spark` profile reuses
# MAGIC the notebook's session (Delta is built in); `raw` and `lake` are Unity Catalog volume paths,
# MAGIC which the driver reads as files and the cluster reads and writes. Deployed by the bundle
# MAGIC (`deploy/databricks/databricks.yml`) with the tracelake wheel as a job library; re-running
# MAGIC is safe (idempotent). `hours` (Zhejiang only): `YYYYMMDDHH` or `FROM..TO` in China time, or
# MAGIC empty for every hour folder.

# COMMAND ----------

dbutils.widgets.text("source", "itp", "source (itp | zeus | acme | zhejiang)")
dbutils.widgets.text("raw", "", "raw folder")
dbutils.widgets.text("lake", "", "lake root")
dbutils.widgets.text("profile", "spark", "engine profile")
dbutils.widgets.text("hours", "", "zhejiang hours")
dbutils.widgets.text("catalog", "", "catalog prefix of SQL names")

source = dbutils.widgets.get("source").strip()
raw = dbutils.widgets.get("raw").strip() or None  # None: raw_roots of conf/
lake = dbutils.widgets.get("lake").strip() or None  # None: lake_root of conf/
profile = dbutils.widgets.get("profile").strip() or "spark"
hours = dbutils.widgets.get("hours").strip() or None
catalog = dbutils.widgets.get("catalog").strip()

# COMMAND ----------

from tracelake.config import load_config
from tracelake.engine import start_engine
from tracelake.run.pipeline import run_ingest

config = load_config(profile=profile, overrides={"lake_root": lake},
                     conf_pairs=[f"tables.catalog={catalog}"] if catalog else [])
engine = start_engine(config)  # on Databricks: the notebook's own session
stats = run_ingest(engine, config, source, raw, hours=hours)

# COMMAND ----------

summary = engine.spark.createDataFrame(
    [(s.table, s.rows_read, s.rows_kept, s.rows_quarantined, "; ".join(s.warnings)) for s in stats],
    "table string, rows_read long, rows_kept long, rows_quarantined long, warnings string",
)
display(summary)
