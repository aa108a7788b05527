#!/usr/bin/env bash
# Run `tracelake ingest` on a Spark cluster with the classic `spark` profile.
#
#   deploy/spark-submit.sh SOURCE RAW_DIR [LAKE_DIR] [extra tracelake flags...]
#   SPARK_MASTER=spark://head:7077 deploy/spark-submit.sh itp /shared/raw/itp /shared/lake
#
# The tracelake package must be installed for the driver's Python (pip install -e . from this
# checkout, or the wheel); executors only need pyspark/pyarrow. RAW_DIR is read on the driver
# and LAKE_DIR is written by the executors, so on a real cluster both must be on shared
# storage (NFS mount, or an object-store URI for LAKE_DIR).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 SOURCE RAW_DIR [LAKE_DIR] [extra tracelake flags...]" >&2
    exit 2
fi

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE="$1"
RAW_DIR="$2"
LAKE_DIR="${3:-$PWD/lake}"
shift $(( $# < 3 ? $# : 3 ))

DELTA_PACKAGE="io.delta:delta-spark_2.13:4.4.1"   # keep in step with tracelake.engine
MASTER="${SPARK_MASTER:-local[*]}"

# Workers must run the same interpreter as the driver (pyarrow, pandas UDFs).
PYTHON_BIN="$(command -v python3 || command -v python)"
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PYTHON_BIN}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PYSPARK_PYTHON}"
# conf/, schemas/ and expectations/ are read from the checkout, not from the installed package.
export TRACELAKE_HOME="$REPO_ROOT"

exec "${SPARK_SUBMIT:-spark-submit}" \
    --master "$MASTER" \
    --name "tracelake-ingest-$SOURCE" \
    --packages "$DELTA_PACKAGE" \
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
    "$REPO_ROOT/jobs/ingest.py" "$SOURCE" \
    --raw "$RAW_DIR" \
    --lake "$LAKE_DIR" \
    --profile spark \
    "$@"
