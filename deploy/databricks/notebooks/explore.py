# Databricks notebook source
# MAGIC %md
# MAGIC # tracelake: characterization and slow iterations
# MAGIC
# MAGIC Reads the gold tables of a lake: the job characterization across traces, and for one
# MAGIC Zhejiang task (widget `task_id`, empty = the task with the most slow iterations) its
# MAGIC iteration durations with the slow ones and the network suspect that explains them. It runs
# MAGIC after the ingests, which wrote those tables, and registers every lake table under `catalog`
# MAGIC (a lake in a volume or on DBFS is refused: Unity Catalog defines no table there).

# COMMAND ----------

dbutils.widgets.text("lake", "", "lake root")
dbutils.widgets.text("profile", "spark", "engine profile")
dbutils.widgets.text("task_id", "", "Zhejiang task (empty: the slowest)")
dbutils.widgets.text("catalog", "", "catalog prefix of SQL names")

lake = dbutils.widgets.get("lake").strip() or None
profile = dbutils.widgets.get("profile").strip() or "spark"
task_id = dbutils.widgets.get("task_id").strip()
catalog = dbutils.widgets.get("catalog").strip()

# COMMAND ----------

import matplotlib.pyplot as plt

from tracelake.config import load_config
from tracelake.delta.catalog import check_uc_location, register_all
from tracelake.engine import start_engine

config = load_config(profile=profile, overrides={"lake_root": lake},
                     conf_pairs=[f"tables.catalog={catalog}"] if catalog else [])
check_uc_location(lake or config.lake_root)
engine = start_engine(config)
tables = register_all(engine.spark, config)
sql = engine.spark.sql
name = config.table_name  # `layer.table`, under the catalog when one is given

# COMMAND ----------

characterization = sql(
    "SELECT trace, cluster, sum(jobs) AS jobs, round(sum(gpu_hours), 1) AS gpu_hours "
    f"FROM {name('gold', 'jobs_characterization')} GROUP BY trace, cluster ORDER BY trace, cluster"
).toPandas()
display(characterization)
figure, axis = plt.subplots(figsize=(7, 3))
axis.bar(characterization["trace"] + "/" + characterization["cluster"], characterization["gpu_hours"])
axis.set_ylabel("GPU-hours")
axis.set_title("GPU time per trace and cluster")
figure.tight_layout()
display(figure)

# COMMAND ----------

if not task_id:
    task_id = sql(f"SELECT task_id FROM {name('gold', 'zj_task_network_summary')} "
                  "ORDER BY slow_iterations DESC LIMIT 1").first()[0]
steps = sql(
    f"SELECT iteration, duration_s, is_slow, suspect_reason FROM {name('gold', 'zj_iteration_network')} "
    f"WHERE task_id = '{task_id}' ORDER BY iteration"
).toPandas()
slow = steps[steps["is_slow"]]
figure, axis = plt.subplots(figsize=(9, 3))
axis.plot(steps["iteration"], steps["duration_s"], linewidth=0.8, label="iteration time")
axis.scatter(slow["iteration"], slow["duration_s"], color="red", s=10, label="slow")
axis.set_xlabel("iteration")
axis.set_ylabel("seconds")
axis.set_title(f"task {task_id}")
axis.legend()
figure.tight_layout()
display(figure)
display(slow.groupby("suspect_reason").size().rename("slow iterations").reset_index())
