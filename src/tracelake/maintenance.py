"""Delta table maintenance: the one place job code may branch on the engine.

Sail's SQL has no DESCRIBE HISTORY / OPTIMIZE / VACUUM, so on `local` these go through the
`deltalake` package (which reads Sail's tables); elsewhere through Delta's SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracelake.engine import Engine


@dataclass(frozen=True)
class Commit:
    version: int
    operation: str
    timestamp_ms: int | None


def history(engine: Engine, path: str, limit: int | None = None) -> list[Commit]:
    """Newest first."""
    if not engine.delta_native_sql:
        from deltalake import DeltaTable

        rows: list[dict[str, Any]] = DeltaTable(path).history(limit)
        return [Commit(int(r["version"]), str(r.get("operation")), r.get("timestamp")) for r in rows]
    sql = f"DESCRIBE HISTORY delta.`{path}`" + (f" LIMIT {int(limit)}" if limit else "")
    return [
        Commit(int(r["version"]), str(r["operation"]), int(r["timestamp"].timestamp() * 1000))
        for r in engine.spark.sql(sql).collect()
    ]


def optimize(engine: Engine, path: str) -> None:
    if not engine.delta_native_sql:
        from deltalake import DeltaTable

        DeltaTable(path).optimize.compact()
    else:
        engine.spark.sql(f"OPTIMIZE delta.`{path}`").collect()


def vacuum(engine: Engine, path: str, retention_hours: int = 168, enforce_retention: bool = True) -> None:
    """Delete files older than the retention; below Delta's 7-day minimum only when asked."""
    if not engine.delta_native_sql:
        from deltalake import DeltaTable

        DeltaTable(path).vacuum(
            retention_hours=retention_hours, dry_run=False, enforce_retention_duration=enforce_retention
        )
    else:
        if not enforce_retention:
            engine.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        engine.spark.sql(f"VACUUM delta.`{path}` RETAIN {int(retention_hours)} HOURS").collect()
