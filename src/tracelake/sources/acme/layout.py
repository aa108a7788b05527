"""The AcmeTrace job files' names and headers, defined once for the parser and the generator
(docs/formats/acmetrace.md); importing this loads no engine library."""

from __future__ import annotations

TABLE = "bronze.acme_jobs"
CLUSTERS = ("seren", "kalos")
FILE_NAME = "trace_{cluster}.csv"
RELEASE_FOLDER = "job_trace"  # the release keeps the job CSVs in data/job_trace/
KALOS_ONLY = ("mem_per_pod_GB", "shared_mem_per_pod", "fail_time", "stop_time")
SEREN_HEADER = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state",
    "submit_time", "start_time", "end_time", "duration", "queue", "gpu_time",
)
