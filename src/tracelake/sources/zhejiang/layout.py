"""The release folder's layout and the cluster's fixed names, defined once for the parsers,
transforms and generator (docs/formats/zhejiang.md §1, §3)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from tracelake.errors import HourNotThere, TracelakeError
from tracelake.io.storetree import as_folder

TRAFFIC = "trafficinfo"
TASKINFO = "taskinfo"
HOUR = "hour_cst"  # the column (and file constant) of the CST hour folder a traffic row came from
HOUR_DIR = re.compile(r"\d{10}")  # trafficinfo/<YYYYMMDDHH>, China time (UTC+8)
CHINA = timezone(timedelta(hours=8))  # the hour folders' clock; China has no daylight saving
EVERY_HOUR = "all"  # a scheduler's word for every hour folder, where an empty value is refused
MGMT_PORT = "M-GigabitEthernet0/0/0"  # the 1G management port: the only 32-bit counters
MAX_HOURS = 87_660  # the longest --hours range: 10 years of hours (10 × 365.25 × 24)
UPLINK_PORTS = tuple(f"FourHundredGigE1/0/{p}" for p in range(33, 63))  # leaf → spine


def _hour(text: str, what: str) -> datetime:
    try:
        if HOUR_DIR.fullmatch(text):
            return datetime.strptime(text, "%Y%m%d%H")
    except ValueError:
        pass
    raise TracelakeError(f"{what} '{text}' is not an hour YYYYMMDDHH (China time)")


NO_HOURS = "none"  # `--hours none`: what is in no hour folder (the workbook, taskinfo/) and no traffic


def parse_hours(spec: str) -> tuple[str, ...]:
    """`--hours` text: one hour `H`, a range `FROM..TO` (both included) or `none`, as folder names. A
    range is at most MAX_HOURS long: a typo such as 1000010100 would otherwise list millions of
    hours (and stepping past year 9999 overflows)."""
    if not spec.strip():
        raise TracelakeError("--hours is empty: give an hour YYYYMMDDHH (China time), a range FROM..TO or none")
    if spec.strip() == NO_HOURS:
        return ()
    first, sep, last = spec.partition("..")
    start = _hour(first.strip(), "--hours")
    end = _hour(last.strip(), "--hours") if sep else start
    if end < start:
        raise TracelakeError(f"--hours {spec}: the range ends before it starts")
    count = (end - start) // timedelta(hours=1) + 1
    if count > MAX_HOURS:
        raise TracelakeError(
            f"--hours {spec}: the range covers {count} hours, more than the {MAX_HOURS} (10 years) one run may take"
        )
    return tuple(f"{start + timedelta(hours=i):%Y%m%d%H}" for i in range(count))


def hour_folders(raw_dir: Path, hours: tuple[str, ...] | None = None) -> list[Path]:
    """trafficinfo/<hour> folders under the release folder, all or the chosen ones; a chosen
    hour without a folder is an error (a scheduler's run for an hour that has not arrived).
    The folder is listed once: a long range is compared with the listing, not probed hour by hour.
    Anything else in it but dot files (`2024052400_old/`, a stray file) stops the run, as in an
    hour folder: its rows would otherwise be left unread without a word."""
    root = as_folder(raw_dir) / TRAFFIC
    entries = [p for p in root.iterdir() if not p.name.startswith(".")] if root.is_dir() else []
    for entry in entries:
        if not (entry.is_dir() and HOUR_DIR.fullmatch(entry.name)):
            raise TracelakeError(f"{TRAFFIC}/{entry.name}: not an hour folder (trafficinfo holds YYYYMMDDHH "
                                 "folders, China time)")
    present = sorted(p.name for p in entries)
    if hours is None:
        return [root / h for h in present]
    missing = sorted(set(hours) - set(present))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise HourNotThere(f"{root}: no hour folder {missing[0]}{more}")
    return [root / h for h in hours]


SWITCH_DIR = re.compile(r"NH-DC-(NM\d+)-([A-Z]\d{2})-ROCE-(?P<leaf>(?:ST-)?[Ll]eaf-\d+)_GPU_S9825")
PORT_FILE = re.compile(r"(?P<sw>[Ll]eaf-\d+)_(?P<p>\d+)(?:_(?P<s>[12]))?\.csv")
BREAKOUT_PORT = re.compile(r"TwoHundredGigE1/0/(\d+):([12])")
FULL_PORT = re.compile(r"FourHundredGigE1/0/(\d+)")


# ---------------------------------------------------------------- naming rules (docs/formats/zhejiang.md §1, §3.2)

def device_name(folder: str) -> str:
    """The switch's DeviceName: the folder name with `_GPU_S9825` spelled `.GPU.S9825`."""
    if not SWITCH_DIR.fullmatch(folder):
        raise TracelakeError(f"'{folder}' is not a switch folder (NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)")
    return folder.removesuffix("_GPU_S9825") + ".GPU.S9825"


def file_prefix(folder: str) -> str:
    """Port files of a GPU leaf start `Leaf-<n>_`; of a storage leaf `leaf-<n>_` (no `ST-`)."""
    match = SWITCH_DIR.fullmatch(folder)
    if not match:
        raise TracelakeError(f"'{folder}' is not a switch folder (NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)")
    return match.group("leaf").removeprefix("ST-")


def port_name_for_file(file_name: str) -> str:
    """§3.2: `_0` management port, `_<p>_<s>` a 200G breakout lane, `_<p>` a 400G port."""
    match = PORT_FILE.fullmatch(file_name)
    if not match:
        raise TracelakeError(f"'{file_name}' is not a port file name (<leaf>_<p>[_<s>].csv)")
    port, lane = int(match.group("p")), match.group("s")
    if port == 0:
        if lane:
            raise TracelakeError(f"'{file_name}': the management port _0 has no breakout lane")
        return MGMT_PORT
    return f"TwoHundredGigE1/0/{port}:{lane}" if lane else f"FourHundredGigE1/0/{port}"


def port_exists(prefix: str, port_name: str) -> bool:
    """§3.2: a GPU leaf has the management port, 200G lanes 1–30:1–2 and 400G ports 31–64; a
    storage leaf (`leaf-<n>`) the management port and 400G ports 1–64."""
    if port_name == MGMT_PORT:
        return True
    storage = prefix.startswith("leaf-")
    if match := BREAKOUT_PORT.fullmatch(port_name):
        return not storage and 1 <= int(match.group(1)) <= 30
    if match := FULL_PORT.fullmatch(port_name):
        return (1 if storage else 31) <= int(match.group(1)) <= 64
    return False


def file_name_for_port(folder: str, port_name: str) -> str:
    """The inverse rule: where a switch port's counters are written (used by the generator)."""
    prefix = file_prefix(folder)
    if port_name == MGMT_PORT:
        return f"{prefix}_0.csv"
    if match := BREAKOUT_PORT.fullmatch(port_name):
        return f"{prefix}_{int(match.group(1))}_{match.group(2)}.csv"
    if match := FULL_PORT.fullmatch(port_name):
        return f"{prefix}_{int(match.group(1))}.csv"
    raise TracelakeError(f"'{port_name}' is not a leaf port name this release uses")


def hour_closed_at(trigger: str) -> str:
    """The hour folder of the last whole hour that ended at or before `trigger`, an ISO 8601
    time (UTC when it has no offset, as Databricks' `{{job.trigger.time.iso_datetime}}`): a run
    fired at 2024-05-23T17:10:00Z ingests [16:00, 17:00) UTC, the folder 2024052400, whose files
    are complete; the hour still running is left to the next run."""
    try:
        moment = datetime.fromisoformat(trigger.strip())
    except ValueError:
        raise TracelakeError(f"hours '{trigger}' is not an hour YYYYMMDDHH, a range FROM..TO, "
                             f"'{EVERY_HOUR}' or an ISO 8601 trigger time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    started = moment.astimezone(CHINA).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    return f"{started:%Y%m%d%H}"


def scheduled_hours(value: str) -> str | None:
    """`--hours` of a scheduled or hand-started run's `hours` parameter: `all` is every hour
    folder (None); `none`, no hour folder; a trigger time, the hour that closed at it; an hour or a range, as given.
    Empty is refused: a schedule whose reference came through empty must not re-read every hour."""
    text = value.strip()
    if not text:
        raise TracelakeError(f"hours is empty: pass an hour YYYYMMDDHH, a range FROM..TO, '{EVERY_HOUR}' for "
                             "every hour folder, or the trigger time ({{job.trigger.time.iso_datetime}})")
    if text == EVERY_HOUR:
        return None
    if text == NO_HOURS:  # the workbook and task logs alone, beside an hourly job
        return text
    if HOUR_DIR.fullmatch(text.partition("..")[0].strip()):
        parse_hours(text)  # a bad hour or range stops here, before any engine work
        return text
    return hour_closed_at(text)
