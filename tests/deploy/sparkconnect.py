"""Apache Spark's own Spark Connect server (`SparkConnectServer`, from pyspark's jars) with
delta-spark, on 127.0.0.1, in a process group of its own, stopped by PID.

Only this user can use it: it takes a bearer token (`spark.connect.authenticate.token`) from a
spark-defaults.conf only we may read (0600, in a 0700 SPARK_CONF_DIR), and clients hand the
token over in TRACELAKE_CONNECT_URL (an environment variable: a token on a command line would
show in any user's `ps`). pyspark sends a token to `localhost` over gRPC's local credentials."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from deploykit import free_port, stop_process_group, wait_listening
from helpers import child_environ

from tracelake.deltajars import fetch

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


@contextlib.contextmanager
def spark_connect_server(base: Path, master: str = "local[2]") -> Iterator[str]:
    """Yields the URL with its token: sc://localhost:PORT/;token=… (`master`: e.g.
    local-cluster[2,1,1024], two executor JVMs of their own)."""
    conf = base / "conf"
    conf.mkdir(mode=0o700, parents=True)
    defaults = conf / "spark-defaults.conf"
    defaults.touch(mode=0o600)
    port, token = free_port(), secrets.token_hex(16)
    defaults.write_text(
        f"spark.connect.grpc.binding.address 127.0.0.1\nspark.connect.grpc.binding.port {port}\n"
        f"spark.connect.authenticate.token {token}\n"
        "spark.sql.extensions io.delta.sql.DeltaSparkSessionExtension\n"
        "spark.sql.catalog.spark_catalog org.apache.spark.sql.delta.catalog.DeltaCatalog\n"
        "spark.databricks.delta.snapshotPartitions 2\n"
        "spark.ui.enabled false\nspark.driver.memory 4g\n")
    env = {**child_environ(), "SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    jars = ",".join(str(j) for j in fetch())
    log = base / "connect-server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(SPARK_SUBMIT), "--master", master, "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--name", "tracelake-connect", "--jars", jars, "spark-internal"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_listening(proc, port, log, "SparkConnectServer", 120)
        yield f"sc://localhost:{port}/;token={token}"
    finally:
        stop_process_group(proc)
