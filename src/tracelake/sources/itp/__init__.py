"""Microsoft ITP jobs from the ElasticFlow release: raw-traces.tar.gz and elasticflow-traces.tar.gz.

Both archives use the same member names (cluster01.csv …), so each is unpacked into its own
staging folder; lineage names keep the archive (`raw-traces.tar.gz!cluster01.csv`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.errors import TracelakeError

if TYPE_CHECKING:
    from tracelake.api.contract import TableInput
    from tracelake.api.source import Source
    from tracelake.io.text import RawFile

RAW_ARCHIVE = "raw-traces.tar.gz"
ELASTICFLOW_ARCHIVE = "elasticflow-traces.tar.gz"
CLUSTER_MEMBER = re.compile(r"(cluster\d{2})\.csv")
TESTBED_MEMBER = "195job.csv"


def _csv_members(archive: Path, staging: Path) -> dict[str, Path]:
    """Every member that looks like data, `.CSV` or `.csv.bak` too: the callers refuse a name
    they do not know rather than leave its rows unread (LICENSE and the like stay skipped)."""
    from tracelake.io.archives import extract_members

    return extract_members(archive, staging / archive.name.split(".")[0], lambda n: ".csv" in n.lower())


def _raw_files(archive: Path, staging: Path) -> list[RawFile]:
    from tracelake.io.text import RawFile

    files = []
    for member, path in sorted(_csv_members(archive, staging).items()):
        match = CLUSTER_MEMBER.fullmatch(Path(member).name)
        if not match:
            raise TracelakeError(f"{archive.name}: unexpected CSV member '{member}' (want clusterNN.csv)")
        files.append(RawFile(str(path), f"{archive.name}!{member}", {"cluster": match.group(1)}))
    return files


def _elasticflow_files(archive: Path, staging: Path) -> list[RawFile]:
    from tracelake.io.text import RawFile

    files = []
    for member, path in sorted(_csv_members(archive, staging).items()):
        base = Path(member).name
        match = CLUSTER_MEMBER.fullmatch(base)
        if match:
            constants = {"variant": "elasticflow", "cluster": match.group(1)}
        elif base == TESTBED_MEMBER:
            constants = {"variant": "testbed", "cluster": None}
        else:
            raise TracelakeError(f"{archive.name}: unexpected CSV member '{member}'")
        files.append(RawFile(str(path), f"{archive.name}!{member}", constants))
    return files


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    from tracelake.api.contract import TableInput
    from tracelake.io.text import regular_file

    inputs = []
    if os.path.lexists(raw_dir / RAW_ARCHIVE) and regular_file(raw_dir / RAW_ARCHIVE, RAW_ARCHIVE):
        inputs.append(TableInput("bronze.itp_jobs", _raw_files(raw_dir / RAW_ARCHIVE, staging)))
    if os.path.lexists(raw_dir / ELASTICFLOW_ARCHIVE) and regular_file(raw_dir / ELASTICFLOW_ARCHIVE, ELASTICFLOW_ARCHIVE):
        files = _elasticflow_files(raw_dir / ELASTICFLOW_ARCHIVE, staging)
        inputs.append(TableInput("bronze.elasticflow_jobs", files))
    if not inputs:
        raise TracelakeError(f"{raw_dir}: neither {RAW_ARCHIVE} nor {ELASTICFLOW_ARCHIVE} found")
    return inputs


def declare() -> Source:
    """This source's declaration, built when the registry first asks (the package's top
    imports nothing heavy)."""
    from tracelake.api.source import Source

    # silver.jobs and gold.jobs_* read ITP too: tracelake.crosstrace
    return Source("itp", plan)

