"""An offline check of a Databricks Asset Bundle's jobs, for what `databricks bundle validate`
cannot see without a workspace and what it does not check at all: each job as the typed job
class of the `databricks-bundles` package takes it, every task's entry point on disk, its compute
and the tracelake wheel, depends_on, the notebook's parameters, the lake's location, one writer
at a time, and the hours an hourly Zhejiang job passes. `check` returns the problems as lines."""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml
from databricks.bundles.jobs import Job

from tracelake.delta.catalog import check_uc_location
from tracelake.errors import TracelakeError, first_line

VAR = re.compile(r"\$\{var\.(\w+)\}")
WIDGET = re.compile(r"""dbutils\.widgets\.(?:text|get|dropdown|combobox|multiselect)\(\s*["']([^"']+)["']""")
TRIGGER_TIME = "{{job.trigger.time."  # a dynamic value reference to the run's trigger time
CLOUD_SCHEMES = ("s3", "s3a", "abfss", "gs")  # URIs a Unity Catalog external location governs


@dataclass
class Bundle:
    root: Path  # the folder of databricks.yml
    config: dict  # databricks.yml
    resources: dict[Path, dict]  # each included file, as loaded


def load(root: Path) -> Bundle:
    config = yaml.safe_load((root / "databricks.yml").read_text(encoding="utf-8"))
    files = {path: yaml.safe_load(path.read_text(encoding="utf-8"))
             for pattern in config.get("include", []) for path in sorted(root.glob(pattern))}
    return Bundle(root, config, files)


def _values(config: dict, target: str, given: dict[str, str], problems: list[str]) -> dict:
    """Variable values as a deploy of `target` with `--var` for each of `given` sees them."""
    declared = config.get("variables") or {}
    values = {name: spec["default"] for name, spec in declared.items() if "default" in spec}
    values |= ((config.get("targets") or {}).get(target) or {}).get("variables") or {}
    values |= given
    problems += [f"variable {name}: not declared" for name in values if name not in declared]
    problems += [f"variable {name}: no value (pass --var {name}=…)" for name in declared if name not in values]
    return values


def _substitute(value, values: dict, declared: dict, problems: list[str], where: str):
    """`value` with each ${var.NAME} replaced; a name no variable declares is a problem (a
    declared one without a value was said once, for the variable)."""
    if isinstance(value, dict):
        return {k: _substitute(v, values, declared, problems, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, values, declared, problems, where) for v in value]
    if not isinstance(value, str):
        return value
    problems += [f"{where}: ${{var.{name}}} names no declared variable" for name in VAR.findall(value)
                 if name not in declared]
    whole = VAR.fullmatch(value)
    if whole and whole.group(1) in values:
        return values[whole.group(1)]  # keeps a number a number
    return VAR.sub(lambda m: str(values.get(m.group(1), m.group(0))), value)


def _lake_problem(lake: str) -> str | None:
    if "${var." in lake:  # no value: said once, for the variable
        return None
    try:
        check_uc_location(lake)
    except TracelakeError as exc:
        return str(exc)
    if "://" not in lake or lake.partition("://")[0] not in CLOUD_SCHEMES:
        return f"lake {lake} is not a cloud URI inside an external location (s3://, abfss://, gs://)"
    return None


def check(bundle: Bundle, target: str, given: dict[str, str]) -> list[str]:
    problems: list[str] = []
    values = _values(bundle.config, target, given, problems)
    if (problem := _lake_problem(str(values.get("lake_root", "${var.lake_root}")))) is not None:
        problems.append(f"variable lake_root: {problem}")
    wheel_dir = _wheel_dir(bundle)
    for path, content in bundle.resources.items():
        for key, job in (((content or {}).get("resources") or {}).get("jobs") or {}).items():
            job = _substitute(job, values, bundle.config.get("variables") or {}, problems, key)
            problems += _check_job(key, job, path.parent, wheel_dir, bundle)
    return problems


def _wheel_dir(bundle: Bundle) -> Path | None:
    """Where the bundle's wheel artifact is built: its path's dist/ (`pip wheel --wheel-dir dist`)."""
    wheels = [a for a in (bundle.config.get("artifacts") or {}).values() if a.get("type") == "whl"]
    return (bundle.root / wheels[0]["path"] / "dist").resolve() if wheels else None


def _check_job(key: str, job: dict, base: Path, wheel_dir: Path | None, bundle: Bundle) -> list[str]:
    problems = []
    try:
        Job.from_dict(copy.deepcopy(job))
    except Exception as exc:  # noqa: BLE001 - the package's own words for what it refuses
        problems.append(f"{key}: not a job the bundle's job schema takes: {first_line(exc)}")
    clusters = {c.get("job_cluster_key") for c in job.get("job_clusters") or []}
    environments = {e.get("environment_key"): e for e in job.get("environments") or []}
    tasks = {t.get("task_key"): t for t in job.get("tasks") or []}
    parents = {k: [d.get("task_key") for d in t.get("depends_on") or []] for k, t in tasks.items()}
    notebooks = {}
    for name, task in tasks.items():
        where = f"{key}.{name}"
        problems += _compute(where, task, clusters, environments, base, wheel_dir)
        entry, text = _entry_point(where, task, base, bundle)
        problems += entry
        problems += [f"{where}: depends on {p}, not a task of {key}" for p in parents[name] if p not in tasks]
        params = (task.get("notebook_task") or {}).get("base_parameters") or {}
        if text is not None:
            notebooks[name] = text
            problems += _parameters(where, params, job, text)
        if "lake" in params and (problem := _lake_problem(str(params["lake"]))) is not None:
            problems.append(f"{where}: {problem}")
        if params.get("source") == "zhejiang":
            problems += _hours(where, str(params.get("hours", "")), job)
    problems += _one_writer(key, job, notebooks, tasks, parents)
    return problems


def _compute(where, task, clusters, environments, base: Path, wheel_dir: Path | None) -> list[str]:
    if cluster := task.get("job_cluster_key"):
        if cluster not in clusters:
            return [f"{where}: job cluster {cluster} is not declared in job_clusters"]
        wheels = [lib["whl"] for lib in task.get("libraries") or [] if "whl" in lib]
    elif task.get("existing_cluster_id") or task.get("new_cluster"):
        wheels = [lib["whl"] for lib in task.get("libraries") or [] if "whl" in lib]
    elif (env := task.get("environment_key")) is not None:
        if env not in environments:
            return [f"{where}: environment {env} is not declared in environments"]
        wheels = [d for d in ((environments[env].get("spec") or {}).get("dependencies") or []) if d.endswith(".whl")]
    else:
        return [f"{where}: no compute (job_cluster_key, existing_cluster_id, new_cluster or environment_key)"]
    if wheel_dir is None or not any((base / w).resolve().parent == wheel_dir for w in wheels):
        return [f"{where}: no tracelake wheel library (dist/*.whl of the bundle's whl artifact)"]
    return []


def _entry_point(where, task, base: Path, bundle: Bundle) -> tuple[list[str], str | None]:
    """(problems, the notebook's text when the task runs one)."""
    if notebook := task.get("notebook_task"):
        path = (base / notebook.get("notebook_path", "")).resolve()
        if not path.is_file():
            return [f"{where}: notebook {path} does not exist"], None
        text = path.read_text(encoding="utf-8")
        if not text.startswith("# Databricks notebook source\n"):
            return [f"{where}: {path.name} lacks the '# Databricks notebook source' header"], None
        return [], text
    if script := task.get("spark_python_task"):
        path = (base / script.get("python_file", "")).resolve()
        return ([] if path.is_file() else [f"{where}: Python file {path} does not exist"]), None
    if wheel := task.get("python_wheel_task"):
        art = next(a for a in bundle.config["artifacts"].values() if a.get("type") == "whl")
        project = tomllib.loads((bundle.root / art["path"] / "pyproject.toml").read_text())["project"]
        if wheel.get("package_name") != project["name"] or wheel.get("entry_point") not in project.get("scripts", {}):
            return [f"{where}: wheel entry point {wheel.get('entry_point')} is not in {project['name']}'s scripts"], None
        return [], None
    return [f"{where}: no notebook, Python file or wheel entry point"], None


def _parameters(where, params: dict, job: dict, text: str) -> list[str]:
    read = set(WIDGET.findall(text))
    passed = set(params) | {p.get("name") for p in job.get("parameters") or []}
    return ([f"{where}: the notebook reads {name}, which the task does not pass" for name in sorted(read - passed)]
            + [f"{where}: passes {name}, which the notebook does not read" for name in sorted(set(params) - read)])


def _hours(where, hours: str, job: dict) -> list[str]:
    if not hours.strip():
        return [f"{where}: hours is empty (every hour folder on every run); pass all, an hour, "
                "or {{job.trigger.time.iso_datetime}}"]
    cron = str((job.get("schedule") or {}).get("quartz_cron_expression", ""))
    hour_field = (cron.split() + ["", "", ""])[2]
    if hour_field and not hour_field.isdigit() and TRIGGER_TIME not in hours:
        return [f"{where}: runs more than daily ({cron}) and passes hours {hours!r}, no trigger-time reference"]
    return []


def _one_writer(key, job, notebooks: dict[str, str], tasks: dict, parents: dict) -> list[str]:
    """Writing tasks (notebooks that run an ingest) one after another, and readers after every
    writer of the job; the job one run at a time."""
    def ancestors(name: str, seen: set[str]) -> set[str]:
        for parent in parents.get(name, []):
            if parent in tasks and parent not in seen:
                seen.add(parent)
                ancestors(parent, seen)
        return seen

    before = {name: ancestors(name, set()) for name in tasks}
    writers = sorted(n for n, text in notebooks.items() if "run_ingest(" in text)
    problems = [] if not writers or job.get("max_concurrent_runs") == 1 else [
        f"{key}: writes the lake and does not set max_concurrent_runs: 1"]
    problems += [f"{key}: {a} and {b} write the lake and may run at once (no depends_on path between them)"
                 for i, a in enumerate(writers) for b in writers[i + 1:] if a not in before[b] and b not in before[a]]
    readers = [n for n in sorted(notebooks) if n not in writers]
    problems += [f"{key}.{r}: may read the lake before {w} wrote it (no depends_on path)"
                 for r in readers for w in writers if w not in before[r]]
    return problems
