"""The Databricks bundle checked offline (bundlecheck.py): it passes for both targets, the check
fails on the bundle as it was before issue 56 (a lake in a volume, no compute, an hourly job that
re-read every hour), and the pieces the notebooks rely on: the refusal of a lake Unity Catalog
cannot register, and the hour a trigger time ingests."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from bundlecheck import Bundle, check, load
from notebookrun import run_notebook

from tracelake.delta.catalog import check_uc_location
from tracelake.errors import TracelakeError
from tracelake.sources.zhejiang.layout import hour_closed_at, scheduled_hours

BUNDLE = Path(__file__).resolve().parents[2] / "deploy" / "databricks"
LAKE = {"lake_root": "s3://tracelake-test/lake"}

# the bundle before issue 56, two of its five jobs (the other ingests were the same as itp's)
OLD_CONFIG = """
bundle: {name: tracelake}
include: [resources/*.job.yml]
variables:
  lake_root: {default: /Volumes/main/tracelake/lake}
  raw_root: {default: /Volumes/main/tracelake/raw}
  catalog: {default: main}
  profile: {default: spark}
artifacts:
  tracelake_wheel: {type: whl, path: ../.., build: python -m pip wheel --no-deps --wheel-dir dist .}
targets:
  dev: {mode: development, default: true}
"""
OLD_JOBS = """
resources:
  jobs:
    tracelake_ingest_zhejiang:
      name: tracelake ingest zhejiang (hourly)
      schedule: {quartz_cron_expression: "0 10 * * * ?", timezone_id: Asia/Shanghai}
      tasks:
        - task_key: ingest
          notebook_task:
            notebook_path: ../notebooks/ingest.py
            base_parameters: {source: zhejiang, raw: "${var.raw_root}/zhejiang", lake: "${var.lake_root}",
                              profile: "${var.profile}", hours: "", catalog: "${var.catalog}"}
          libraries: [{whl: ../../../dist/*.whl}]
    tracelake_correlation:
      name: tracelake correlation and characterization
      tasks:
        - task_key: explore
          notebook_task:
            notebook_path: ../notebooks/explore.py
            base_parameters: {lake: "${var.lake_root}", profile: "${var.profile}", task_id: ""}
          libraries: [{whl: ../../../dist/*.whl}]
"""
VOLUME = ("lake /Volumes/main/tracelake/lake is in a Unity Catalog volume, and Unity Catalog defines no table on "
          "files in a volume: put the lake on a cloud URI inside an external location (s3://, abfss://, gs://)")
NO_COMPUTE = "no compute (job_cluster_key, existing_cluster_id, new_cluster or environment_key)"


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_the_bundle_passes_for_each_target(target):
    assert check(load(BUNDLE), target, LAKE) == []


def test_the_lake_root_is_required_and_the_hourly_job_passes_the_trigger_time():
    bundle = load(BUNDLE)
    assert "default" not in bundle.config["variables"]["lake_root"]
    assert check(bundle, "dev", {}) == ["variable lake_root: no value (pass --var lake_root=…)"]
    [jobs] = [content["resources"]["jobs"] for content in bundle.resources.values()]
    [task] = jobs["tracelake_zhejiang_hourly"]["tasks"]
    assert task["notebook_task"]["base_parameters"]["hours"] == "{{job.trigger.time.iso_datetime}}"
    assert [t["task_key"] for t in jobs["tracelake_pipeline"]["tasks"]] == [
        "ingest_itp", "ingest_zeus", "ingest_acme", "ingest_zhejiang", "characterize", "report"]


def test_the_check_fails_on_the_bundle_before_issue_56():
    old = Bundle(BUNDLE, yaml.safe_load(OLD_CONFIG), {BUNDLE / "resources" / "old.job.yml": yaml.safe_load(OLD_JOBS)})
    assert check(old, "dev", {}) == [
        f"variable lake_root: {VOLUME}",
        f"tracelake_ingest_zhejiang.ingest: {NO_COMPUTE}",
        f"tracelake_ingest_zhejiang.ingest: {VOLUME}",
        "tracelake_ingest_zhejiang.ingest: hours is empty (every hour folder on every run); pass all, an hour, "
        "or {{job.trigger.time.iso_datetime}}",
        "tracelake_ingest_zhejiang: writes the lake and does not set max_concurrent_runs: 1",
        f"tracelake_correlation.explore: {NO_COMPUTE}",
        "tracelake_correlation.explore: the notebook reads catalog, which the task does not pass",
        f"tracelake_correlation.explore: {VOLUME}",
    ]


def test_the_check_names_each_kind_of_mistake():
    bundle = load(BUNDLE)
    [(path, content)] = bundle.resources.items()
    broken = copy.deepcopy(content)
    pipeline = broken["resources"]["jobs"]["tracelake_pipeline"]
    itp, zeus, acme, _, characterize, report = pipeline["tasks"]
    itp["retries"] = 3  # not a field of a task
    itp["notebook_task"]["base_parameters"]["extra"] = "x"
    zeus["depends_on"], acme["depends_on"] = [], [{"task_key": "ingest_itp"}, {"task_key": "ingest_zeus"}]
    characterize["job_cluster_key"] = "big"
    report["depends_on"] = [{"task_key": "characterise"}]
    report["notebook_task"]["notebook_path"] = "../notebooks/reports.py"
    hourly = broken["resources"]["jobs"]["tracelake_zhejiang_hourly"]["tasks"][0]
    hourly["notebook_task"]["base_parameters"]["hours"] = "2024052400"
    hourly["libraries"] = []
    assert check(Bundle(bundle.root, bundle.config, {path: broken}), "dev", LAKE) == [
        "tracelake_pipeline: not a job the bundle's job schema takes: Unexpected field 'retries' for class Task",
        "tracelake_pipeline.ingest_itp: passes extra, which the notebook does not read",
        "tracelake_pipeline.characterize: job cluster big is not declared in job_clusters",
        f"tracelake_pipeline.report: notebook {BUNDLE / 'notebooks' / 'reports.py'} does not exist",
        "tracelake_pipeline.report: depends on characterise, not a task of tracelake_pipeline",
        "tracelake_pipeline: ingest_itp and ingest_zeus write the lake and may run at once (no depends_on path between them)",
        "tracelake_zhejiang_hourly.ingest_hour: no tracelake wheel library (dist/*.whl of the bundle's whl artifact)",
        "tracelake_zhejiang_hourly.ingest_hour: runs more than daily (0 10 * * * ?) and passes hours '2024052400', "
        "no trigger-time reference",
    ]


@pytest.mark.parametrize(("notebook", "widgets", "error"), [
    ("ingest.py", {"source": "itp", "lake": "/Volumes/main/tracelake/lake"}, VOLUME),
    ("explore.py", {"lake": "/Volumes/main/tracelake/lake"}, VOLUME),
    ("report.py", {"lake": "/Volumes/main/tracelake/lake", "out": "/tmp/unused"}, VOLUME),
    ("ingest.py", {"source": "zhejiang", "lake": "s3://tracelake-test/lake", "hours": ""},
     "hours is empty: pass an hour YYYYMMDDHH, a range FROM..TO, 'all' for every hour folder, or the trigger time "
     "({{job.trigger.time.iso_datetime}})"),
])
def test_the_notebooks_refuse_before_any_engine_starts(notebook, widgets, error):
    ran = run_notebook(notebook, {"profile": "local", "raw": "/nonexistent", **widgets}, timeout=120)
    assert ran.returncode == 1 and "DISPLAYED" not in ran.stdout
    assert ran.stderr.strip().splitlines()[-1] == f"tracelake.errors.TracelakeError: {error}"


@pytest.mark.parametrize("lake", ["/Volumes/main/tracelake/lake", "dbfs:/tracelake/lake", "DBFS:/x", "/dbfs/mnt/lake"])
def test_a_lake_unity_catalog_cannot_register_is_refused(lake):
    with pytest.raises(TracelakeError, match=r"Unity Catalog defines no (external )?table") as refused:
        check_uc_location(lake)
    assert str(refused.value).startswith(f"lake {lake} is ") and "\n" not in str(refused.value)


@pytest.mark.parametrize("lake", ["s3://bucket/lake", "abfss://lake@acct.dfs.core.windows.net/t", "/data/lake",
                                  "/VolumesOfData/lake"])
def test_other_lakes_pass_the_unity_catalog_check(lake):
    check_uc_location(lake)


@pytest.mark.parametrize(("trigger", "folder"), [
    ("2024-05-23T17:10:00Z", "2024052400"),  # [16:00, 17:00) UTC is 00:00-01:00 of the 24th in China
    ("2024-05-23T17:10:00", "2024052400"),  # Databricks' iso_datetime: UTC, no offset
    ("2024-05-23T17:00:00", "2024052400"),  # the hour that ended at the trigger itself
    ("2024-05-23T16:59:59.999", "2024052323"),
    ("2024-05-24T01:10:00+08:00", "2024052400"),
    ("2024-12-31T17:05:00", "2025010100"),  # a new year in China, still the old one in UTC
    ("2024-03-01T00:30:00Z", "2024030107"),
])
def test_a_trigger_time_ingests_the_hour_that_closed_at_it(trigger, folder):
    assert hour_closed_at(trigger) == folder
    assert scheduled_hours(f" {trigger} ") == folder


def test_hours_as_the_notebook_takes_them():
    assert scheduled_hours("all") is None
    assert scheduled_hours("none") == "none"
    assert scheduled_hours("2024052400") == "2024052400"
    assert scheduled_hours("2024052400..2024052402") == "2024052400..2024052402"
    for refused, message in [("", "hours is empty"), ("  ", "hours is empty"),
                             ("{{job.trigger.time.iso_datetime}}", "is not an hour YYYYMMDDHH"),
                             ("2024052499", "is not an hour YYYYMMDDHH")]:
        with pytest.raises(TracelakeError, match=message):
            scheduled_hours(refused)
