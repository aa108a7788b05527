"""Session building for the three engine profiles; the only place that knows which engine runs.

`local`   Sail started inside this process on 127.0.0.1 with an ephemeral port (Spark Connect).
`spark`   classic PySpark with the Delta extension; reuses an active session (Databricks,
          spark-submit) and fails fast, naming the fix, when the Delta jars are missing.
`connect` any remote Spark Connect URL.
"""

from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from tracelake.config import Config
from tracelake.errors import TracelakeError

DELTA_SPARK_VERSION = "4.4.1"
DELTA_PACKAGE = f"io.delta:delta-spark_2.13:{DELTA_SPARK_VERSION}"


@dataclass
class Engine:
    """A running session plus whatever must be stopped with it."""

    profile: str
    spark: SparkSession
    _server: Any = field(default=None, repr=False)
    _owns_session: bool = True

    @property
    def delta_native_sql(self) -> bool:
        """Whether DESCRIBE HISTORY / OPTIMIZE / VACUUM work as SQL (not on Sail)."""
        return self.profile != "local"

    def stop(self) -> None:
        if self._owns_session:
            try:
                self.spark.stop()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
        if self._server is not None:
            try:
                self._server.stop()
            except Exception:  # noqa: BLE001
                pass
            self._server = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_engine(config: Config) -> Engine:
    builders = {"local": _start_local, "spark": _start_classic, "connect": _start_connect}
    engine = builders[config.profile](config)
    atexit.register(engine.stop)
    return engine


def _apply_runtime_conf(spark: SparkSession, conf: dict[str, str]) -> None:
    for key, value in conf.items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - static confs cannot change on a live session
            if "CANNOT_MODIFY" not in str(exc) and "static" not in str(exc).lower():
                raise


def _start_local(config: Config) -> Engine:
    try:
        from pysail.spark import SparkConnectServer
    except ImportError as exc:  # pragma: no cover - pysail is a core dependency
        raise TracelakeError("profile 'local' needs the pysail package: pip install pysail") from exc
    server = SparkConnectServer(ip="127.0.0.1", port=0)
    server.start(background=True)
    host, port = server.listening_address
    spark = SparkSession.builder.remote(f"sc://{host}:{port}").getOrCreate()
    _apply_runtime_conf(spark, config.spark_conf)
    return Engine("local", spark, _server=server)


def _start_connect(config: Config) -> Engine:
    url = config.connect_url or ""
    if not url.startswith("sc://"):
        raise TracelakeError(f"connect_url must start with sc://, got '{url}'")
    try:
        spark = SparkSession.builder.remote(url).getOrCreate()
    except Exception as exc:  # noqa: BLE001
        raise TracelakeError(f"cannot reach Spark Connect at {url}: {exc}") from exc
    _apply_runtime_conf(spark, config.spark_conf)
    return Engine("connect", spark)


def _start_classic(config: Config) -> Engine:
    # Python workers must use this interpreter, or UDFs fail with "No module named pyarrow".
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:  # Databricks notebook or spark-submit that built it already
        _apply_runtime_conf(active, config.spark_conf)
        spark, owns = active, False
    else:
        builder = SparkSession.builder.appName("tracelake")
        master = _classic_master(config)
        if master:
            builder = builder.master(master)
        conf = dict(config.spark_conf)
        if not config.delta_required:
            # without the jars the catalog plugin cannot load at all: leave Delta out entirely
            conf.pop("spark.sql.catalog.spark_catalog", None)
            conf.pop("spark.sql.extensions", None)
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark, owns = builder.getOrCreate(), True
    if config.delta_required:
        _check_delta_available(spark)
    return Engine("spark", spark, _owns_session=owns)


def _classic_master(config: Config) -> str | None:
    """An explicit master wins; under spark-submit (which hands Python a gateway port) its
    --master must not be overridden; run directly, default to all local cores."""
    if config.master:
        return config.master
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]"


def _check_delta_available(spark: SparkSession) -> None:
    """Touch the session catalog: with the Delta catalog conf but no jars this fails."""
    try:
        spark.catalog.listDatabases()
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        if "DeltaCatalog" in text or "ClassNotFound" in text or "delta" in text.lower():
            raise TracelakeError(
                "profile 'spark': the Delta Lake jars are not on the classpath "
                f"(io.delta.sql.DeltaSparkSessionExtension / DeltaCatalog not found). "
                f"Run with `spark-submit --packages {DELTA_PACKAGE}` or add "
                f"spark.jars.packages={DELTA_PACKAGE} to conf/spark.yaml; "
                "set delta_required: false to run without Delta I/O"
            ) from exc
        raise
