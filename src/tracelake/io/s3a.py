"""Classic Spark's way to an S3 lake: Hadoop's S3A file system (hadoop-aws), set from the same
AWS_* variables the local profile's object_store clients read, so one environment serves both
profiles. Keys never enter Spark's conf (where its UI and logs would show them): S3A's default
credential chain reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN itself."""

from __future__ import annotations

import os

from tracelake.io.objectstore import is_url, s3_endpoint

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def wanted(lake_root: str) -> bool:
    """Whether a classic session on this lake needs S3A: an s3:// or s3a:// lake."""
    return is_url(lake_root) and lake_root.split("://", 1)[0].lower() in ("s3", "s3a")


def settings() -> dict[str, str]:
    """spark.hadoop.fs.s3a.* for the environment's endpoint and region; `s3://` served by S3A too."""
    conf = {"spark.hadoop.fs.s3.impl": S3A, "spark.hadoop.fs.s3a.impl": S3A}
    endpoint, scheme = s3_endpoint()
    if endpoint:  # a store of one's own (MinIO, moto, …): its address, buckets by path
        conf["spark.hadoop.fs.s3a.endpoint"] = f"{scheme}://{endpoint}"
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(scheme == "https").lower()
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf
