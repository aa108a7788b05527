"""The release folder's layout and the cluster's fixed names, defined once for the parsers,
transforms and generator (docs/formats/zhejiang.md §1, §3)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from tracelake.errors import TracelakeError

TRAFFIC = "trafficinfo"
TASKINFO = "taskinfo"
HOUR_DIR = re.compile(r"^\d{10}$")  # trafficinfo/<YYYYMMDDHH>, China time (UTC+8)
MGMT_PORT = "M-GigabitEthernet0/0/0"  # the 1G management port: the only 32-bit counters
UPLINK_PORTS = tuple(f"FourHundredGigE1/0/{p}" for p in range(33, 63))  # leaf → spine


def _hour(text: str, what: str) -> datetime:
    try:
        if HOUR_DIR.match(text):
            return datetime.strptime(text, "%Y%m%d%H")
    except ValueError:
        pass
    raise TracelakeError(f"{what} '{text}' is not an hour YYYYMMDDHH (China time)")


def parse_hours(spec: str) -> tuple[str, ...]:
    """`--hours` text: one hour `H` or a range `FROM..TO` (both included), as folder names."""
    first, sep, last = spec.partition("..")
    start = _hour(first.strip(), "--hours")
    end = _hour(last.strip(), "--hours") if sep else start
    if end < start:
        raise TracelakeError(f"--hours {spec}: the range ends before it starts")
    hours = []
    while start <= end:
        hours.append(f"{start:%Y%m%d%H}")
        start += timedelta(hours=1)
    return tuple(hours)


def hour_folders(raw_dir: Path, hours: tuple[str, ...] | None = None) -> list[Path]:
    """trafficinfo/<hour> folders under the release folder, all or the chosen ones; a chosen
    hour without a folder is an error (a scheduler's run for an hour that has not arrived)."""
    root = Path(raw_dir) / TRAFFIC
    if hours is None:
        return sorted(p for p in root.iterdir() if p.is_dir() and HOUR_DIR.match(p.name)) if root.is_dir() else []
    missing = [h for h in hours if not (root / h).is_dir()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise TracelakeError(f"{root}: no hour folder {missing[0]}{more}")
    return [root / h for h in hours]
