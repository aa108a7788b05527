# Databricks notebook source
# MAGIC %md
# MAGIC # tracelake ingest
# MAGIC
# MAGIC Ingests one source's release folder into the lake: its bronze tables and the silver/gold
# MAGIC tables derived from them. On Databricks the `spark` profile reuses the notebook's session
# MAGIC (Delta is built in). `raw` is a Unity Catalog volume folder (raw files only); `lake` is a
# MAGIC cloud URI inside an external location (s3://, abfss://, gs://), where the tables are
# MAGIC registered as external tables under `catalog` (a lake in a volume or on DBFS is refused:
# MAGIC Unity Catalog defines no table there). Deployed by the bundle
# MAGIC (`deploy/databricks/databricks.yml`) with the tracelake wheel as a job library; re-running
# MAGIC is safe (idempotent). `hours` (Zhejiang only, required there): `YYYYMMDDHH` or `FROM..TO`
# MAGIC in China time, `all` for every hour folder, `none` for none, or a trigger time (the hourly job passes
# MAGIC `{{job.trigger.time.iso_datetime}}`), which ingests the hour that closed at it.

# COMMAND ----------

dbutils.widgets.text("source", "itp", "source (itp | zeus | acme | zhejiang)")
dbutils.widgets.text("raw", "", "raw folder")
dbutils.widgets.text("lake", "", "lake root")
dbutils.widgets.text("profile", "spark", "engine profile")
dbutils.widgets.text("hours", "", "zhejiang hours (H, FROM..TO, all, none, or a trigger time)")
dbutils.widgets.text("catalog", "", "catalog prefix of SQL names")

source = dbutils.widgets.get("source").strip()
raw = dbutils.widgets.get("raw").strip() or None  # None: raw_roots of conf/
lake = dbutils.widgets.get("lake").strip() or None  # None: lake_root of conf/
profile = dbutils.widgets.get("profile").strip() or "spark"
hours = dbutils.widgets.get("hours")
catalog = dbutils.widgets.get("catalog").strip()

# COMMAND ----------

from tracelake.config import load_config
from tracelake.delta.catalog import check_uc_location
from tracelake.engine import start_engine
from tracelake.run.pipeline import run_ingest
from tracelake.sources.zhejiang.layout import scheduled_hours

hours = scheduled_hours(hours) if source == "zhejiang" else hours.strip() or None
config = load_config(profile=profile, overrides={"lake_root": lake},
                     conf_pairs=[f"tables.catalog={catalog}"] if catalog else [])
check_uc_location(lake or config.lake_root)  # as given: a dbfs:/ path is not a URL to load_config
engine = start_engine(config)  # on Databricks: the notebook's own session
stats = run_ingest(engine, config, source, raw, hours=hours)

# COMMAND ----------

summary = engine.spark.createDataFrame(
    [(s.table, s.rows_read, s.rows_kept, s.rows_quarantined, "; ".join(s.warnings)) for s in stats],
    "table string, rows_read long, rows_kept long, rows_quarantined long, warnings string",
)
display(summary)
