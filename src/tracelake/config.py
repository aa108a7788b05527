"""Layered configuration: conf/base.yaml < conf/<profile>.yaml < TRACELAKE_* env < CLI flags.

Every layer may only set keys that base.yaml declares, so a typo is an error rather than a
setting that silently does nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tracelake.errors import TracelakeError
from tracelake.resources import resource_dir

PROFILES = ("local", "spark", "connect")
# keys whose value is a free-form mapping (any sub-key allowed)
OPEN_MAPPINGS = ("spark_conf", "raw_roots")
ENV_PREFIX = "TRACELAKE_"
# characters a local path may hold and still reach Sail's Delta writer unchanged; with others (a
# space, %, #, non-ASCII) it writes the log under the URL-encoded path and the data files under
# the twice-encoded one: two sibling folders, neither a readable table (measured, Sail 0.7)
ENGINE_SAFE_PATH = re.compile(r"[A-Za-z0-9/._+=,@~-]*")


TIME_ZONE_KEY = "spark.sql.session.timeZone"
SESSION_TIME_ZONE = "UTC"
# spellings of UTC itself; any other zone (even one at +00:00 today, such as Europe/London in
# winter) is refused
UTC_SPELLINGS = ("UTC", "Etc/UTC", "Z", "+00:00")
# `local` profile: the engine reachable by our user only (private_engine.py), or on a 127.0.0.1
# port any local user can reach (for a machine no one else uses, where namespaces are not allowed)
LOCAL_ENGINES = ("private", "tcp")
# object stores a lake or raw root may be on (what Sail, deltalake and pyarrow.fs read); any other
# `scheme://` is refused, so a typo (`s4://`) is not taken for a folder or a store
OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "abfss", "abfs", "az")
# hosts of a Spark Connect server on this machine: its tasks read this machine's folders


def check_store_url(url: str, what: str = "path") -> str:
    """`url` when its scheme is an object store's and it names a bucket; else a TracelakeError."""
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in OBJECT_STORE_SCHEMES:
        known = ", ".join(f"{s}://" for s in OBJECT_STORE_SCHEMES)
        raise TracelakeError(
            f"{what} {url}: unknown scheme '{scheme}://' (object stores: {known}; a local folder is a plain path)")
    if not rest.strip("/"):
        raise TracelakeError(f"{what} {url}: names no bucket or container")
    return url


def local_staging_for(lake_root: str) -> str:
    """The default staging folder of a lake on object storage: a folder on this machine (archives
    are unpacked and raw files copied there by this process, and read there by the engine), one
    per lake, in the temp dir."""
    digest = hashlib.sha256(lake_root.encode()).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / "tracelake-staging" / digest)


@dataclass(frozen=True)
class Config:
    profile: str
    lake_root: str
    staging_dir: str
    raw_roots: dict[str, str]
    catalog: str | None
    spark_conf: dict[str, str]
    connect_url: str | None
    master: str | None
    delta_required: bool
    local_engine: str = "private"
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    engine_root: str = ""  # lake_root as the engine is given it (see engine_safe_path); "" = lake_root

    def table_name(self, layer: str, table: str) -> str:
        """The SQL name of a lake table, e.g. `bronze.itp_jobs`."""
        name = f"{layer}.{table}"
        return f"{self.catalog}.{name}" if self.catalog else name

    def table_path(self, layer: str, table: str) -> str:
        return f"{(self.engine_root or self.lake_root).rstrip('/')}/{layer}/{table}"


def engine_safe_path(local: Path) -> str:
    """A path to the local folder `local` that the embedded engine writes correctly: the folder
    itself when its path is plain, else a symlink to it whose path is (one per folder, in the
    temp dir). The files still land in `local`; only the engine sees the alias."""
    if ENGINE_SAFE_PATH.fullmatch(str(local)):
        return str(local)
    local.mkdir(parents=True, exist_ok=True)
    aliases = Path(tempfile.gettempdir()) / "tracelake-paths"
    aliases.mkdir(exist_ok=True)
    alias = aliases / hashlib.sha256(str(local).encode()).hexdigest()[:16]
    if not (alias.is_symlink() and os.readlink(alias) == str(local)):
        temp = alias.with_name(f"{alias.name}.{os.getpid()}")
        temp.unlink(missing_ok=True)
        temp.symlink_to(local, target_is_directory=True)
        temp.replace(alias)  # atomic: a concurrent run sees the old or the new link, never none
    if not ENGINE_SAFE_PATH.fullmatch(str(alias)):
        raise TracelakeError(f"lake path {local}: the temp dir {aliases} has characters the engine cannot write")
    return str(alias)


def spark_submit_remote(environ: Mapping[str, str] | None = None) -> str | None:
    """The Spark Connect URL that spark-submit was given: `--remote sc://…` reaches the Python
    driver as `spark.remote` in PYSPARK_REMOTE_INIT_CONF_<i> (JSON); SPARK_REMOTE is the
    environment form PySpark itself honours."""
    environ = os.environ if environ is None else environ
    url = environ.get("SPARK_REMOTE")
    try:
        count = int(environ.get("PYSPARK_REMOTE_INIT_CONF_LEN", "0"))
    except ValueError:
        count = 0
    for i in range(count):
        try:
            init = json.loads(environ.get(f"PYSPARK_REMOTE_INIT_CONF_{i}", "{}"))
        except ValueError:
            continue
        if isinstance(init, dict) and init.get("spark.remote"):
            url = str(init["spark.remote"])
    return url or None


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    with path.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise TracelakeError(f"{path}: expected a mapping at the top level")
    return data


def _merge(base: dict[str, Any], over: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key not in base:
            known = ", ".join(sorted(base))
            raise TracelakeError(f"{where}: unknown config key '{key}' (known: {known})")
        if isinstance(base[key], dict) and value is not None:
            if not isinstance(value, Mapping):
                raise TracelakeError(f"{where}: '{key}' must be a mapping")
            if key in OPEN_MAPPINGS:
                out[key] = {**base[key], **value}
            else:
                out[key] = _merge(base[key], value, f"{where}: {key}")
        else:
            out[key] = value
    return out


def _env_layer(base: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """TRACELAKE_<KEY> for scalar top-level keys (TRACELAKE_LAKE_ROOT, TRACELAKE_PROFILE, …)."""
    layer: dict[str, Any] = {}
    for key, value in base.items():
        if isinstance(value, dict):
            continue
        env_value = environ.get(ENV_PREFIX + key.upper())
        if env_value is not None:
            layer[key] = yaml.safe_load(env_value) if key == "delta_required" else env_value
    return layer


def _parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """`--conf spark_conf.spark.sql.shuffle.partitions=2` style dotted overrides."""
    layer: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise TracelakeError(f"--conf expects KEY=VALUE, got '{pair}'")
        key, value = pair.split("=", 1)
        head, _, rest = key.partition(".")
        if rest:
            layer.setdefault(head, {})[rest] = value
        else:
            layer[head] = yaml.safe_load(value)
    return layer


def load_config(
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    conf_pairs: list[str] | None = None,
    environ: Mapping[str, str] | None = None,
    conf_dir: Path | None = None,
) -> Config:
    environ = os.environ if environ is None else environ
    conf_dir = conf_dir or resource_dir("conf")
    base = _read_yaml(conf_dir / "base.yaml")
    if not base:
        raise TracelakeError(f"{conf_dir / 'base.yaml'} is missing or empty")
    pairs = _parse_overrides(conf_pairs or [])
    chosen = profile or pairs.get("profile") or environ.get(ENV_PREFIX + "PROFILE") or base.get("profile") or "local"
    if chosen not in PROFILES:
        raise TracelakeError(f"unknown profile '{chosen}' (choose one of {', '.join(PROFILES)})")
    merged = _merge(base, _read_yaml(conf_dir / f"{chosen}.yaml"), f"conf/{chosen}.yaml")
    merged = _merge(merged, _env_layer(base, environ), "environment")
    merged = _merge(merged, pairs, "--conf")
    cli = {k: v for k, v in (overrides or {}).items() if v is not None}
    merged = _merge(merged, cli, "command line")
    merged["profile"] = chosen
    if chosen == "connect" and not merged.get("connect_url"):
        # under `spark-submit --remote sc://…` the URL need not be repeated
        merged["connect_url"] = spark_submit_remote(environ)
    return _build(merged)


def utc_session_conf(spark_conf: Mapping[str, Any]) -> dict[str, str]:
    """spark_conf with the session time zone set to UTC, or an error naming another zone. The
    jobs convert every time to UTC themselves and read naive times (TIMESTAMP literals in the
    suites, naive log and IPMI times) in the session's zone: any other zone shifts them."""
    conf = {k: str(v) for k, v in spark_conf.items()}
    zone = conf.get(TIME_ZONE_KEY, SESSION_TIME_ZONE)
    if zone not in UTC_SPELLINGS:
        raise TracelakeError(
            f"spark_conf.{TIME_ZONE_KEY} must be UTC, got '{zone}': tracelake converts every time to "
            "UTC itself and needs a UTC session (another zone would shift the stored times)"
        )
    return {**conf, TIME_ZONE_KEY: SESSION_TIME_ZONE}


TEXT_KEYS = ("lake_root", "staging_dir", "connect_url", "master")  # text, or null where base.yaml has null
CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# spark_conf keys tracelake itself reads as whole numbers, with their least value
SPARK_COUNTS = {"spark.sql.shuffle.partitions": 1}


def check_types(merged: Mapping[str, Any]) -> None:
    """Every key of the merged configuration, typed, in one place: a wrong value stops the command
    (exit 2) naming the key and what it takes, before an engine starts."""
    for key in TEXT_KEYS:
        value = merged.get(key)
        if value is not None and not isinstance(value, str | int | float) or isinstance(value, bool):
            raise TracelakeError(f"config {key}: takes a text value, got {value!r}")
    if not isinstance(merged.get("delta_required"), bool):
        raise TracelakeError(f"config delta_required: takes true or false, got {merged.get('delta_required')!r}")
    if merged.get("local_engine") not in LOCAL_ENGINES:
        raise TracelakeError(f"config local_engine: takes {' or '.join(LOCAL_ENGINES)}, got {merged.get('local_engine')!r}")
    catalog = (merged.get("tables") or {}).get("catalog")
    if catalog is not None and not (isinstance(catalog, str) and CATALOG_NAME.fullmatch(catalog)):
        raise TracelakeError(f"config tables.catalog: takes a catalog name of letters, digits and _ "
                             f"(SQL names are written unquoted), got {catalog!r}")
    for source, root in (merged.get("raw_roots") or {}).items():
        if root is not None and not isinstance(root, str):
            raise TracelakeError(f"config raw_roots.{source}: takes a folder or URL, got {root!r}")
    for key, value in (merged.get("spark_conf") or {}).items():
        if isinstance(value, dict | list) or value is None:
            raise TracelakeError(f"config spark_conf.{key}: takes one value, got {value!r}")
        if key in SPARK_COUNTS:
            text = str(value).strip()
            if not text.isdigit() or int(text) < SPARK_COUNTS[key]:
                raise TracelakeError(f"config spark_conf.{key}: takes a whole number of at least "
                                     f"{SPARK_COUNTS[key]}, got {value!r}")


def _build(merged: dict[str, Any]) -> Config:
    check_types(merged)
    if not str(merged.get("lake_root") or "").strip():  # "" would resolve to the current folder
        raise TracelakeError("the lake path is empty: give a folder with --lake DIR, TRACELAKE_LAKE_ROOT or lake_root in conf")
    lake_root = str(merged["lake_root"])
    if "://" in lake_root:
        lake_root = check_store_url(lake_root.rstrip("/"), "lake")
    else:
        lake_root = str(Path(lake_root).expanduser().resolve())
    for source, root in (merged.get("raw_roots") or {}).items():
        if "://" in str(root):
            check_store_url(str(root), f"raw_roots.{source}")
    engine_root = ""
    if merged["profile"] == "local" and "://" not in lake_root:
        engine_root = engine_safe_path(Path(lake_root))
    staging = f"{engine_root or lake_root}/_staging"
    if "://" in lake_root:
        # this process's files (unpacked archives, progress tallies) stay on its disk; an engine
        # whose tasks run elsewhere gets its scratch under <lake>/_staging (run.pipeline)
        staging = local_staging_for(lake_root)
    if merged.get("staging_dir"):
        staging = str(merged["staging_dir"])
        if merged["profile"] == "local" and "://" not in staging:
            staging = engine_safe_path(Path(staging).expanduser().resolve())
    if merged["profile"] == "connect" and not merged.get("connect_url"):
        raise TracelakeError(
            "profile 'connect' needs a Spark Connect URL: --connect-url sc://host:port, "
            "TRACELAKE_CONNECT_URL, connect_url in conf/connect.yaml, or spark-submit --remote "
            "(SPARK_REMOTE)"
        )
    delta_required, local_engine = merged["delta_required"], merged["local_engine"]
    return Config(
        profile=merged["profile"],
        lake_root=lake_root,
        staging_dir=str(staging),
        raw_roots={k: str(v) for k, v in (merged.get("raw_roots") or {}).items()},
        catalog=(merged.get("tables") or {}).get("catalog"),
        spark_conf=utc_session_conf(merged.get("spark_conf") or {}),
        connect_url=merged.get("connect_url"),
        master=merged.get("master"),
        delta_required=delta_required,
        local_engine=local_engine,
        engine_root=engine_root if engine_root != lake_root else "",
        raw=merged,
    )
