#!/usr/bin/env bash
# Run `tracelake ingest` through spark-submit, in one of two modes:
#
#   remote  (SPARK_REMOTE=sc://host:port[/;token=…]): the driver script talks to a Spark Connect
#           server (Sail, Apache Spark's SparkConnectServer, Databricks); no --master, no
#           --packages, profile `connect`; a token in the URL never reaches a command line.
#   cluster (default; SPARK_MASTER, default local[*]): classic Spark with the delta-spark jars
#           (the cached ones of .jars/ by --jars, else from Maven by --packages), profile `spark`.
#
#   deploy/spark-submit.sh SOURCE RAW_DIR [LAKE_DIR] [extra tracelake flags...]
#   SPARK_REMOTE=sc://10.0.0.5:50051 deploy/spark-submit.sh zeus /shared/raw/zeus /shared/lake
#   SPARK_MASTER=spark://head:7077   deploy/spark-submit.sh itp  /shared/raw/itp  /shared/lake
#
# The tracelake package must be installed for the driver's Python (pip install -e . from this
# checkout, or the wheel). Which Python: $PYSPARK_PYTHON, else `python3` on PATH; its
# spark-submit (pyspark's) is used unless SPARK_SUBMIT names another. RAW_DIR is read on the
# driver and LAKE_DIR is written by the engine, so away from one machine both must be on storage
# mounted at the same path on the driver and the engine (see deploy/README.md).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: [SPARK_REMOTE=sc://host:port | SPARK_MASTER=url] $0 SOURCE RAW_DIR [LAKE_DIR] [tracelake flags...]" >&2
    exit 2
fi

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE="$1"
RAW_DIR="$2"
LAKE_DIR="${3:-$PWD/lake}"
shift $(( $# < 3 ? $# : 3 ))

PYTHON_BIN="${PYSPARK_PYTHON:-$(command -v python3 || command -v python)}"
# pyspark's spark-submit finds SPARK_HOME through the python on PATH: put the driver's first
export PATH="$(dirname "$PYTHON_BIN"):$PATH"
if [[ -z "${SPARK_SUBMIT:-}" ]]; then
    if [[ -x "$(dirname "$PYTHON_BIN")/spark-submit" ]]; then
        SPARK_SUBMIT="$(dirname "$PYTHON_BIN")/spark-submit"
    else
        SPARK_SUBMIT=spark-submit
    fi
fi
# conf/, schemas/ and expectations/ are read from this checkout unless TRACELAKE_HOME says otherwise
export TRACELAKE_HOME="${TRACELAKE_HOME:-$REPO_ROOT}"
# workers must run the same interpreter as the driver (pyarrow, pandas UDFs)
export PYSPARK_PYTHON="$PYTHON_BIN"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PYTHON_BIN}"

if [[ -n "${SPARK_REMOTE:-}" ]]; then
    if [[ -n "${SPARK_MASTER:-}" ]]; then
        echo "$0: set SPARK_REMOTE (Spark Connect) or SPARK_MASTER (classic cluster), not both" >&2
        exit 2
    fi
    if [[ "$SPARK_REMOTE" != sc://* ]]; then
        echo "$0: SPARK_REMOTE must look like sc://host:port, got '${SPARK_REMOTE%%;*}'" >&2
        exit 2
    fi
    # no jars: the server has Delta. The URL's parameters (a token) stay off the command line,
    # where any user's `ps` shows them: the driver takes the whole URL from TRACELAKE_CONNECT_URL,
    # spark-submit's --remote only the server's address
    export TRACELAKE_CONNECT_URL="${TRACELAKE_CONNECT_URL:-$SPARK_REMOTE}"
    exec "$SPARK_SUBMIT" \
        --remote "${SPARK_REMOTE%%/;*}" \
        --name "tracelake-ingest-$SOURCE" \
        "$REPO_ROOT/jobs/ingest.py" "$SOURCE" \
        --raw "$RAW_DIR" \
        --lake "$LAKE_DIR" \
        --profile connect \
        "$@"
fi

# the delta-spark release of the driver's pip package: its cached jars (python -m tracelake.deltajars,
# which `bash dev` runs) shipped with --jars, else Maven coordinates that spark-submit resolves itself
DELTA_JARS="$("$PYTHON_BIN" -c 'from tracelake.deltajars import cached_jars; j = cached_jars(); print(",".join(map(str, j or [])))')"
# a lake in S3: hadoop-aws and the AWS SDK bundle it names, fetched once into the same cache
S3A_JARS="$("$PYTHON_BIN" -c 'import sys; from tracelake.io.s3a import wanted; from tracelake.deltajars import fetch_s3a
print(",".join(map(str, fetch_s3a(quiet=False))) if wanted(sys.argv[1]) else "")' "$LAKE_DIR")"
if [[ -n "$DELTA_JARS" ]]; then
    JAR_FLAGS=(--jars "$DELTA_JARS${S3A_JARS:+,$S3A_JARS}")
else
    PACKAGES="$("$PYTHON_BIN" -c 'from tracelake.deltajars import delta_package; print(delta_package())')"
    JAR_FLAGS=(--packages "$PACKAGES" ${S3A_JARS:+--jars "$S3A_JARS"})
fi

exec "$SPARK_SUBMIT" \
    --master "${SPARK_MASTER:-local[*]}" \
    --name "tracelake-ingest-$SOURCE" \
    "${JAR_FLAGS[@]}" \
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
    "$REPO_ROOT/jobs/ingest.py" "$SOURCE" \
    --raw "$RAW_DIR" \
    --lake "$LAKE_DIR" \
    --profile spark \
    "$@"
