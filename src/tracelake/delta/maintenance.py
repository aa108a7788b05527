"""Delta table maintenance: where job code branches on the engine for what Sail's SQL lacks
(staged_files.py is the only other branch: a speed path with the same result).

`DESCRIBE HISTORY`, `OPTIMIZE` and `VACUUM` are Delta Lake SQL, not Spark SQL: delta-spark
(`spark` profile, Databricks) has them, Sail does not. So:

- `local` (Sail in this process): always the `deltalake` package on the table path;
- `spark`: Delta's SQL;
- `connect`: whatever the server speaks. The first call asks it once with `DESCRIBE HISTORY`
  (`Engine.delta_sql_supported`); a server that answers with a parser error (Sail) is served
  through `deltalake`, provided this process can reach the table path (a local or mounted path,
  or an object-store URI with credentials in the environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracelake.errors import TracelakeError, first_line

if TYPE_CHECKING:  # `--retain-hours` is checked (check_retention) before any engine library loads
    from tracelake.engine import Engine

MAX_RETENTION_HOURS = 100 * 8766  # 100 years; far larger spans overflow deltalake's time arithmetic (a panic)


@dataclass(frozen=True)
class Commit:
    version: int
    operation: str
    timestamp_ms: int | None


def _use_sql(engine: Engine, path: str) -> bool:
    return engine.delta_sql_supported(path)


def _delta_table(engine: Engine, path: str):
    """The table through the `deltalake` package, or a clear error when this process cannot
    reach the path the engine writes to."""
    from deltalake import DeltaTable

    from tracelake.delta.protocol import has_commit

    if "://" not in path and not has_commit(path):
        raise TracelakeError(
            f"{path} is not a Delta table readable from this process; the '{engine.profile}' engine "
            "has no DESCRIBE HISTORY/OPTIMIZE/VACUUM SQL, so maintenance needs the lake path "
            "mounted here at the same path (or an object-store lake_root with credentials in the "
            "environment)"
        )
    try:
        return DeltaTable(path)
    except Exception as exc:  # noqa: BLE001 - e.g. missing object-store credentials
        raise TracelakeError(f"cannot open Delta table {path} from this process: {first_line(exc)}") from exc


def history(engine: Engine, path: str, limit: int | None = None) -> list[Commit]:
    """Newest first."""
    if not _use_sql(engine, path):
        rows: list[dict[str, Any]] = _delta_table(engine, path).history(limit)
        return [Commit(int(r["version"]), str(r.get("operation")), r.get("timestamp")) for r in rows]
    sql = f"DESCRIBE HISTORY delta.`{path}`" + (f" LIMIT {int(limit)}" if limit else "")
    return [
        Commit(int(r["version"]), str(r["operation"]), int(r["timestamp"].timestamp() * 1000))
        for r in engine.spark.sql(sql).collect()
    ]


def optimize(engine: Engine, path: str) -> None:
    if not _use_sql(engine, path):
        _delta_table(engine, path).optimize.compact()
    else:
        engine.spark.sql(f"OPTIMIZE delta.`{path}`").collect()


def vacuum(engine: Engine, path: str, retention_hours: int = 168, enforce_retention: bool = True) -> None:
    """Delete files older than the retention; below Delta's 7-day minimum only when asked."""
    check_retention(retention_hours)
    if not _use_sql(engine, path):
        _delta_table(engine, path).vacuum(
            retention_hours=retention_hours, dry_run=False, enforce_retention_duration=enforce_retention
        )
    else:
        if not enforce_retention:
            engine.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        engine.spark.sql(f"VACUUM delta.`{path}` RETAIN {int(retention_hours)} HOURS").collect()


def check_retention(hours: int) -> None:
    """Refuse a retention deltalake cannot take: a negative one is a ValueError and a huge one
    a Rust panic (a BaseException with a traceback), both after the engine started."""
    if not 0 <= hours <= MAX_RETENTION_HOURS:
        raise TracelakeError(f"vacuum retention must be 0 to {MAX_RETENTION_HOURS} hours (100 years), got {hours}")


def active_files(engine: Engine, path: str) -> int:
    """Data files the current version reads: what compaction brings down."""
    if not _use_sql(engine, path):
        return len(_delta_table(engine, path).file_uris())
    return int(engine.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"])
