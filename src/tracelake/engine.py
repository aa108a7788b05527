"""Session building for the three engine profiles; the only place that knows which engine runs.

`local`   Sail in a child process whose port no other user can reach (private_engine.py; for a
          lake on object storage it reaches the store through this process), or,
          with local_engine: tcp, inside this process on 127.0.0.1 with an ephemeral port.
`spark`   classic PySpark with the Delta extension; reuses an active session (Databricks,
          spark-submit) and fails fast, naming the fix, when the Delta jars are missing.
`connect` any remote Spark Connect URL.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from tracelake import deltajars, private_engine
from tracelake.config import SESSION_TIME_ZONE, TIME_ZONE_KEY, UTC_SPELLINGS, Config, spark_submit_remote
from tracelake.errors import TracelakeError, first_line
from tracelake.io import s3a

JAR_KEYS = ("spark.jars", "spark.jars.packages")  # a user's own way to the Delta jars: theirs wins


@dataclass
class Engine:
    """A running session plus whatever must be stopped with it."""

    profile: str
    spark: SparkSession
    _server: Any = field(default=None, repr=False)
    _owns_session: bool = True
    # None until probed: whether the engine's SQL has DESCRIBE HISTORY / OPTIMIZE / VACUUM
    _delta_sql: bool | None = field(default=None, repr=False)

    @property
    def delta_native_sql(self) -> bool:
        """Whether DESCRIBE HISTORY / OPTIMIZE / VACUUM work as SQL: never on Sail (`local`),
        always with delta-spark (`spark`); on `connect` as probed by `delta_sql_supported`
        (True until then: most Connect servers are Spark with Delta)."""
        if self.profile == "local":
            return False
        if self.profile == "spark":
            return True
        return self._delta_sql is not False

    @property
    def catalog_ends_with_it(self) -> bool:
        """Whether the names registered in this engine's catalog end when it stops: the local
        profile's own server, started for this engine. Not a Spark Connect server or classic
        Spark, whose catalog (a metastore, Unity Catalog) others read after this process, nor a
        session on the engine `tracelake serve` keeps running."""
        return self.profile == "local" and self._server is not None

    def reaches_stores(self, lake_root: str) -> bool:
        """Whether the engine's tasks can open object-store URLs themselves: a Spark Connect
        server (given the store's settings, as a deployment gives them); classic Spark when its
        lake is at a URL (its file system is then set up for the store); the local profile's
        engine on a 127.0.0.1 port, or the private one started with its way out (a lake at a
        URL). Not a session attached to an engine someone else started (`serve`)."""
        if self.profile == "connect":
            return True
        if self.profile == "spark":
            return "://" in lake_root
        if isinstance(self._server, private_engine.PrivateServer):
            return self._server.egress is not None
        return self._server is not None

    def tasks_here(self) -> bool:
        """Whether the engine's tasks surely run on this machine, so they read the files this
        process makes on its disk: the local profile's engine (in this process or its private
        child), classic Spark on a local master. Not a Spark Connect server, wherever its address
        points: from a URL this process cannot tell where the tasks run (127.0.0.1 may be a
        tunnel, `kubectl port-forward` or `ssh -L`, to a cluster)."""
        if self.profile == "local":
            return True
        if self.profile == "spark":
            try:
                return str(self.spark.sparkContext.master).startswith("local")
            except Exception:  # noqa: BLE001 - no context to ask: assume the tasks are elsewhere
                return False
        return False

    def delta_sql_supported(self, probe_path: str) -> bool:
        """Ask the engine once, with `DESCRIBE HISTORY` on an existing table, whether it speaks
        Delta's maintenance SQL; the answer is kept for the rest of the session. A Sail server
        answers with a parser error; any other error (e.g. the path is not a table) is raised."""
        if self.profile != "connect" or self._delta_sql is not None:
            return self.delta_native_sql
        try:
            self.spark.sql(f"DESCRIBE HISTORY delta.`{probe_path}` LIMIT 1").collect()
            self._delta_sql = True
        except Exception as exc:  # noqa: BLE001 - classified below
            if not _is_unsupported_sql(exc):
                raise
            self._delta_sql = False
        return self._delta_sql

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

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _is_unsupported_sql(exc: BaseException) -> bool:
    """A parser/unsupported-statement error, as opposed to a missing table or a lost server."""
    name = type(exc).__name__
    text = str(exc)
    lowered = text.lower()
    return (
        "ParseException" in name
        or "PARSE_SYNTAX_ERROR" in text
        or ("found history" in lowered and "expected" in lowered)
        or "not supported" in lowered
        or "unsupported" in lowered
        or "not implemented" in lowered
    )


def spark_submit_mode(environ: Mapping[str, str] | None = None) -> str | None:
    """'remote' under `spark-submit --remote sc://…`, 'master' under `spark-submit --master …`,
    None when this Python was not started by spark-submit."""
    environ = os.environ if environ is None else environ
    if spark_submit_remote(environ):
        return "remote"
    if environ.get("PYSPARK_GATEWAY_PORT") and environ.get("MASTER"):
        return "master"
    return None


def _check_submit_mode(config: Config) -> None:
    """Under spark-submit, the profile must match how it was submitted; say which one does."""
    mode = spark_submit_mode()
    if mode == "master" and config.profile != "spark":
        raise TracelakeError(
            f"spark-submit --master {os.environ.get('MASTER')} starts classic Spark, which profile "
            f"'{config.profile}' cannot use: pass --profile spark (with --packages {deltajars.delta_package()}), "
            "or submit with --remote sc://HOST:PORT and --profile connect"
        )
    if mode == "remote" and config.profile != "connect":
        raise TracelakeError(
            f"spark-submit --remote {spark_submit_remote()} connects to a Spark Connect server, "
            f"which profile '{config.profile}' does not use: pass --profile connect"
        )


WORKER_PYTHON = re.compile(r"Python in worker has different version:? (\S+) than that in driver:? ([\d.]+)")
WORKER_MODULE = re.compile(r"Error from python worker:.*?ModuleNotFoundError: No module named '([^']+)'", re.DOTALL)


def explain_worker_failure(text: str) -> str | None:
    """The fix, in one line, when the engine's Python workers cannot run tracelake's functions:
    another Python minor version than the driver's (a cluster's workers installed apart), or a
    Python without a package the functions import. Spark says so only deep inside a task's trace."""
    if found := WORKER_PYTHON.search(text):
        worker, driver = found.groups()
        return (f"the engine's Python workers run Python {worker}, this driver Python {driver}; PySpark needs "
                f"the same minor version on both: point PYSPARK_PYTHON (spark.pyspark.python under spark-submit) "
                f"at a Python {driver} with tracelake's packages on every worker")
    if found := WORKER_MODULE.search(text):
        return (f"the engine's Python workers have no module '{found.group(1)}': point PYSPARK_PYTHON "
                f"(spark.pyspark.python under spark-submit) at a Python with tracelake's packages on every worker")
    return None


def explain_engine_error(exc: BaseException) -> str | None:
    """The root cause of a JVM-side failure (py4j's Py4JJavaError only names the Java call,
    e.g. `o1199.save`), with the fix when it is a known one; None for other errors."""
    if type(exc).__name__ != "Py4JJavaError":
        return None
    chain: list[str] = []  # "Class: message", outermost first
    try:
        cause = exc.java_exception  # type: ignore[attr-defined]
        while cause is not None and len(chain) < 20:
            chain.append(f"{cause.getClass().getName()}: {cause.getMessage() or ''}".strip())
            cause = cause.getCause()
    except Exception:  # noqa: BLE001 - the gateway may be gone: read the printed trace instead
        text = str(exc)
        chain = [ln.strip().removeprefix("Caused by: ") for ln in text.splitlines()
                 if ln.strip() and not ln.strip().startswith(("at ", "...", "An error occurred"))]
    if not chain:
        return None
    # Spark's own errors carry an error class ("[DATA_SOURCE_NOT_FOUND] …"): the most telling
    # line; otherwise the innermost cause
    classed = [c for c in chain if ": [" in c]
    first = (classed[0] if classed else chain[-1]).splitlines()[0]
    whole = " ".join(chain)
    if ("DATA_SOURCE_NOT_FOUND" in whole and "delta" in whole.lower()) or "delta.DefaultSource" in whole \
            or "DeltaCatalog" in whole:
        return (
            f"{first} -- the Delta Lake jars are not on the classpath: run with "
            f"`spark-submit --packages {deltajars.delta_package()}` (deploy/spark-submit.sh adds it)"
        )
    return first


def start_engine(config: Config) -> Engine:
    _check_submit_mode(config)
    builders = {"local": _start_local, "spark": _start_classic, "connect": _start_connect}
    engine = builders[config.profile](config)
    atexit.register(engine.stop)
    _use_utc(engine.spark)
    return engine


def _use_utc(spark: SparkSession) -> None:
    """Run the session in UTC, whatever the platform's default (a Databricks cluster, a Connect
    server, an attached session): the jobs read naive times in the session's zone and convert
    to UTC assuming it is UTC (config.utc_session_conf). Checked after setting, so a server
    that ignores the setting fails here instead of shifting times."""
    spark.conf.set(TIME_ZONE_KEY, SESSION_TIME_ZONE)
    zone = spark.conf.get(TIME_ZONE_KEY)
    if zone not in UTC_SPELLINGS:
        raise TracelakeError(f"the engine kept {TIME_ZONE_KEY} at '{zone}' after it was set to UTC; "
                             "tracelake needs a UTC session")


def _apply_runtime_conf(spark: SparkSession, conf: dict[str, str]) -> None:
    for key, value in conf.items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - static confs cannot change on a live session
            if "CANNOT_MODIFY" not in str(exc) and "static" not in str(exc).lower():
                raise


def _new_session(url: str) -> SparkSession:
    """A session of its own on the server at `url`, which the engine owns and stops. Why not
    getOrCreate(): it returns any session already active in this process, whatever its server
    (a notebook's, or another engine's), and the engine's stop() would then close it."""
    return SparkSession.builder.remote(url).create()


def _start_local(config: Config) -> Engine:
    if importlib.util.find_spec("pysail") is None:  # pragma: no cover - pysail is a core dependency
        raise TracelakeError("profile 'local' needs the pysail package: pip install pysail")
    if config.local_engine == "tcp":  # any local user can reach it: for a machine no one else uses
        from pysail.spark import SparkConnectServer

        server = SparkConnectServer(ip="127.0.0.1", port=0)
        server.start(background=True)
        host, port = server.listening_address
        spark = _new_session(f"sc://{host}:{port}")
    else:
        try:
            # a lake on object storage: the engine reaches the store through this process
            server = private_engine.start(egress="://" in config.lake_root)
        except private_engine.Unavailable as exc:
            raise TracelakeError(
                f"cannot keep the local engine private ({exc}); on a machine no one else uses, "
                "run it on a 127.0.0.1 port any local user can reach with --conf local_engine=tcp"
            ) from None
        spark = private_engine.session(server)
    _apply_runtime_conf(spark, config.spark_conf)
    return Engine("local", spark, _server=server)


def serve_private(config: Config) -> private_engine.PrivateServer:
    """`tracelake serve`: the local profile's private engine, started to outlive this command's
    session (later commands attach to its socket with `attach_served`). Only the private form:
    a served engine on a 127.0.0.1 port any local user could reach is not offered."""
    if config.profile != "local" or config.local_engine != "private":
        raise TracelakeError(f"serve runs the local profile's private engine only (profile '{config.profile}', "
                             f"local_engine '{config.local_engine}')")
    try:
        return private_engine.start()
    except private_engine.Unavailable as exc:
        raise TracelakeError(f"cannot keep the local engine private ({exc})") from None


def attach_served(config: Config, socket_path: str) -> Engine:
    """A session of its own on the engine `tracelake serve` runs (its socket, in a folder only we
    may enter), set up as start_engine sets one up; stopping it ends the session, not the engine."""
    spark = private_engine.session(private_engine.PrivateServer(None, Path(socket_path)))
    _apply_runtime_conf(spark, config.spark_conf)
    engine = Engine("local", spark)
    atexit.register(engine.stop)
    _use_utc(spark)
    return engine


def _start_connect(config: Config) -> Engine:
    url = config.connect_url or ""
    shown = _shown_url(url)
    if not url.startswith("sc://"):
        raise TracelakeError(f"connect_url must start with sc://, got '{shown}'")
    _check_reachable(url)
    try:
        spark = _new_session(url)
    except Exception as exc:  # noqa: BLE001
        raise TracelakeError(f"cannot reach Spark Connect at {shown}: {first_line(exc)}") from exc
    try:
        _apply_runtime_conf(spark, config.spark_conf)
    except BaseException as exc:  # the session's first calls: a server that ends them leaves no session open
        with contextlib.suppress(Exception):
            spark.stop()
        refused = re.search(r"\b(UNAUTHENTICATED|PERMISSION_DENIED)\b", str(exc))
        if refused:
            raise TracelakeError(
                f"the Spark Connect server at {shown} refused this client ({refused.group(1)}): give its token "
                "in the URL (sc://HOST:PORT/;token=...), best in TRACELAKE_CONNECT_URL, not on a command line") from None
        raise
    return Engine("connect", spark)


def _shown_url(url: str) -> str:
    """A Connect URL as a message may print it: a token's value never shows."""
    return re.sub(r"(?i)(;token=)[^;]*", r"\1***", url)


CONNECT_TIMEOUT_S = 10.0
DEFAULT_CONNECT_PORT = 15002


def _check_reachable(url: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail in seconds when nothing listens at a Spark Connect URL: the client itself retries
    an unreachable server without end."""
    match = re.match(r"^sc://(\[[^\]]+\]|[^:/;]+)(?::(\d+))?", url)
    if not match:
        raise TracelakeError(f"connect_url '{_shown_url(url)}' is not sc://host[:port]")
    host = match.group(1).strip("[]")
    port = int(match.group(2) or DEFAULT_CONNECT_PORT)
    reason = _no_answer(host, port, timeout_s)
    if reason is not None:
        raise TracelakeError(f"cannot reach Spark Connect at {_shown_url(url)}: {reason}")


def _no_answer(host: str, port: int, timeout_s: float) -> str | None:
    """Why nothing answers at host:port within the timeout, or None when something listens."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return None
    except OSError as exc:
        return "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))


# what pyspark sets in os.environ for a process's own Spark Connect session
CONNECT_MODE_MARKS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")


def _drop_inherited_connect_mode() -> None:
    """pyspark marks a process that made a Spark Connect session with SPARK_CONNECT_MODE_ENABLED
    in os.environ, which every child inherits: a child that asks for classic Spark (spark-submit's
    driver, `--profile spark` started from a process running the local profile) then got
    CONNECT_URL_NOT_SET. The mark is this process's own only while a Connect session lives here."""
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is not None and connect.SparkSession.getActiveSession() is not None:
        return
    for key in CONNECT_MODE_MARKS:
        os.environ.pop(key, None)


def _start_classic(config: Config) -> Engine:
    _drop_inherited_connect_mode()
    _quiet_query_context_logs()
    # Python workers must use this interpreter, or UDFs fail with "No module named pyarrow".
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if config.master:  # named by the user: checked whatever session is then used
        _check_master(config.master)
    if config.spark_conf.get("spark.jars"):
        deltajars.check_jar_versions(config.spark_conf["spark.jars"].split(","))
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
        # the session catalog's databases (`bronze`, …) only name tables by their location: kept out
        # of the working folder, where Spark's default would leave a spark-warehouse/ behind
        conf.setdefault("spark.sql.warehouse.dir", _scratch_warehouse())
        if not config.delta_required:
            # without the jars the catalog plugin cannot load at all: leave Delta out entirely
            conf.pop("spark.sql.catalog.spark_catalog", None)
            conf.pop("spark.sql.extensions", None)
        elif not any(conf.get(k) for k in JAR_KEYS):
            # run directly (not by spark-submit, which brings its --packages): the cached jars
            if not os.environ.get("PYSPARK_GATEWAY_PORT"):
                jars = deltajars.fetch(quiet=False)  # checked as fetched
                if s3a.wanted(config.lake_root):
                    jars = [*jars, *deltajars.fetch_s3a(quiet=False)]
                conf["spark.jars"] = ",".join(str(j) for j in jars)
        if s3a.wanted(config.lake_root):
            conf = {**s3a.settings(), **conf}  # the user's spark_conf wins
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark, owns = builder.getOrCreate(), True
    if config.delta_required:
        _check_delta_available(spark)
    return Engine("spark", spark, _owns_session=owns)


def _quiet_query_context_logs() -> None:
    """pyspark logs every failed statement's JVM stack as a JSON line at ERROR (its query-context
    loggers); tracelake says the failure in one line of its own, so those loggers are quieted."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _scratch_warehouse() -> str:
    """A folder of this process's own for classic Spark's warehouse, removed when it ends."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="tracelake-warehouse-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _check_master(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A standalone master (spark://host:port[,host:port]) must answer in seconds: the Spark
    context itself retries an unreachable one for minutes before it gives up."""
    if not master.startswith("spark://"):
        return
    failures = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        reason = _no_answer(host.strip("[]"), int(port) if port.isdigit() else 7077, timeout_s)
        if reason is None:
            return
        failures.append(reason)
    raise TracelakeError(f"the Spark master {master} does not answer ({'; '.join(failures)}): start it, or name "
                         "another with --conf master=spark://HOST:PORT")


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
                f"Run with `spark-submit --packages {deltajars.delta_package()}`, or fetch them once "
                f"into {deltajars.cache_dir()} with `python -m tracelake.deltajars`; "
                "set delta_required: false to run without Delta I/O"
            ) from exc
        raise
