"""AcmeTrace jobs: trace_seren.csv and trace_kalos.csv → bronze.acme_jobs.

The two files have different headers but one table: the schema's raw header is Kalos's 17
columns, and Seren's 13 are the same list without the four Kalos-only columns. Each file is
parsed against a view of the schema with its own exact header (so the header check stays
strict per file), and the Kalos-only columns come out null for Seren.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tracelake.api.contract import TableInput
from tracelake.errors import TracelakeError
from tracelake.io.forms import find_one
from tracelake.io.frames import union_all
from tracelake.io.parse import parse_lines
from tracelake.io.text import RawFile, check_header, read_raw_lines
from tracelake.io.unpack import unpacked
from tracelake.schema import TableSchema
from tracelake.sources.acme.layout import CLUSTERS, FILE_NAME, KALOS_ONLY, RELEASE_FOLDER, SEREN_HEADER, TABLE


def cluster_view(schema: TableSchema, cluster: str) -> TableSchema:
    """The schema as one cluster's file sees it: its exact header; absent columns become null."""
    if cluster == "kalos":
        return schema
    header = tuple(h for h in schema.raw_header if h not in KALOS_ONLY)
    if header != SEREN_HEADER:  # the two documented headers drifted apart
        raise TracelakeError(f"{schema.full_name}: Kalos header minus {KALOS_ONLY} is not Seren's header")
    columns = tuple(replace(c, source=None) if c.source in KALOS_ONLY else c for c in schema.columns)
    return replace(schema, raw_header=header, columns=columns)


def _absent_columns(schema: TableSchema, cluster: str) -> dict[str, None]:
    """Columns the cluster's file lacks, supplied as nulls (Kalos-only columns for Seren)."""
    return {} if cluster == "kalos" else {c.name: None for c in schema.columns if c.source in KALOS_ONLY}


def parse_acme_jobs(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """Both clusters' files into one frame with the parse_lines contract; `cluster` comes from
    each RawFile's constants."""
    frames = []
    for raw in files:
        cluster = raw.constants.get("cluster")
        if cluster not in CLUSTERS:
            raise TracelakeError(f"{raw.name}: unknown AcmeTrace cluster {cluster!r}")
        view = cluster_view(schema, cluster)
        check_header(raw, view)
        constants = {**_absent_columns(schema, cluster), **raw.constants}
        lines = read_raw_lines(spark, [replace(raw, constants=constants)], view)
        frames.append(parse_lines(lines, view))
    if not frames:
        raise TracelakeError(f"no input files for {schema.full_name}")
    return union_all(frames)


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    """The job CSVs found in raw_dir (or raw_dir/job_trace), each plain or `.gz`; [] when there are none."""
    files = []
    for cluster in CLUSTERS:
        name = FILE_NAME.format(cluster=cluster)
        found = find_one(raw_dir, [name, f"{RELEASE_FOLDER}/{name}"], (".gz",))
        if found is not None:  # a .gz unpacked into staging within io.unpack's bounds
            path = unpacked(found.path, staging / "acme_jobs", found.name)
            files.append(RawFile(str(path), found.name, {"cluster": cluster}, aliases=found.aliases))
    return [TableInput(TABLE, files, parse_acme_jobs)] if files else []
