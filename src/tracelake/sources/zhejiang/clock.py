"""China-local times of the hourly CSVs (docs/formats/zhejiang.md §4): parsed as Spark column expressions,
and written by the generator in the same forms.

The files come from zh-CN Excel/.NET output: `2024/5/24 上午12:00:00` (12-hour clock, 上午 = AM,
下午 = PM, midnight is 上午12) in flow.csv, and `2024/5/24 上午00:00:04` (marker plus a 24-hour
hour, so 下午13:..) in nic/link/port.csv. Both conventions are read by one rule:
下午 with h < 12 adds 12, 上午 with h == 12 is midnight, 上午 with h > 12 is invalid. Times without
a marker (a re-saved CSV: `2024/5/24 0:00:04`) and ISO forms are read as 24-hour. China has no
DST, so UTC = local − 8 h.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the column functions are imported where used: the generator's times need no engine
    from pyspark.sql import Column, DataFrame

CST = timezone(timedelta(hours=8))
AM, PM = "上午", "下午"
TIME_PATTERN = (
    r"^(\d{4})[/-](\d{1,2})[/-](\d{1,2})(?:\s+|T)(?:(上午|下午)\s*)?"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\.(\d{1,6}))?$"
)
GROUPS = 8  # TIME_PATTERN's: year, month, day, marker, hour, minute, second, fraction
FORMAT_DOC = "yyyy/M/d {上午|下午}h:mm:ss (12-hour) or {上午|下午}HH:mm:ss, China time UTC+8"


def time_groups(text: Column) -> Column:
    """One regex pass over a local-time string: TIME_PATTERN's groups joined by `|` where the
    text matches, the text as it is where it does not. A match always changes (its `/` or `-`
    separators become `|`), so utc_from_groups tells the two apart by comparing. Give it a
    projection of its own: engines on Spark Connect do not share an expression between the
    expressions that use it, and the conversion takes eight groups."""
    from pyspark.sql import functions as F

    return F.regexp_replace(F.trim(text), TIME_PATTERN, "|".join(f"${i}" for i in range(1, GROUPS + 1)))


def utc_from_groups(text: Column, groups: Column) -> Column:
    """A local-time string column -> UTC timestamp, null when it is not a valid time; `groups`
    is time_groups(text), computed once (measured on an hour's four hourly CSVs, 130 K rows: eight
    regexp_extract and an rlike per value cost 0.6 s of the engine's CPU, one rewrite 0.05 s)."""
    from pyspark.sql import functions as F

    def group(i: int) -> Column:
        return F.split_part(groups, F.lit("|"), F.lit(i))

    matched = groups != F.trim(text)
    marker, hour = group(4), group(5).cast("int")
    hour24 = (
        F.when((marker == PM) & (hour < 12), hour + 12)
        .when((marker == AM) & (hour == 12), F.lit(0))
        .when((marker == AM) & (hour > 12), F.lit(None).cast("int"))
        .otherwise(hour)
    )
    seconds = F.when(group(7) == "", F.lit("00")).otherwise(F.lpad(group(7), 2, "0"))
    fraction = F.rpad(group(8), 6, "0")
    iso = F.concat(
        group(1), F.lit("-"), F.lpad(group(2), 2, "0"), F.lit("-"), F.lpad(group(3), 2, "0"),
        F.lit(" "), F.lpad(hour24.cast("string"), 2, "0"), F.lit(":"), group(6), F.lit(":"),
        seconds, F.lit("."), fraction, F.lit("+08:00"),
    )
    return F.when(matched, F.try_to_timestamp(iso, F.lit("yyyy-MM-dd HH:mm:ss.SSSSSSXXX")))


def cst_to_utc(text: Column) -> Column:
    """A local-time string column -> UTC timestamp, null when it is not a valid time, in one
    expression (a parse of many rows computes time_groups in a projection of its own)."""
    return utc_from_groups(text, time_groups(text))


def hour_start_utc(hour: str) -> datetime:
    """`YYYYMMDDHH` (a CST hour folder) -> the UTC instant it starts."""
    local = datetime.strptime(hour, "%Y%m%d%H").replace(tzinfo=CST)
    return local.astimezone(UTC)


def format_cst(epoch_s: float, hour_style: str) -> str:
    """The generator's text for a UTC instant, in China time.

    hour_style `12h`: `2024/5/24 上午12:00:00` (flow.csv); `24h`: `2024/5/24 上午00:00:04`
    (nic/link/port.csv, marker plus zero-padded 24-hour hour)."""
    local = datetime.fromtimestamp(int(epoch_s), CST)
    marker = AM if local.hour < 12 else PM
    if hour_style == "12h":
        hour = f"{(local.hour % 12) or 12}"
    elif hour_style == "24h":
        hour = f"{local.hour:02d}"
    else:
        raise ValueError(f"unknown hour style {hour_style!r}")
    return f"{local.year}/{local.month}/{local.day} {marker}{hour}:{local.minute:02d}:{local.second:02d}"


def cst_hour(ts: Column) -> Column:
    """The CST hour folder name (YYYYMMDDHH) of a UTC timestamp column, by arithmetic on epoch
    seconds and a DATE, so it does not depend on the session time zone."""
    from pyspark.sql import functions as F

    hours = F.floor((F.unix_seconds(ts) + 8 * 3600) / 3600)
    day = F.date_from_unix_date(F.floor(hours / 24).cast("int"))
    return F.concat(F.date_format(day, "yyyyMMdd"), F.lpad((hours % 24).cast("string"), 2, "0"))


def shift_hour(hour: str, hours: int) -> str:
    """A CST hour folder name (YYYYMMDDHH) moved by `hours`: the hour before is shift_hour(h, -1)."""
    return f"{datetime.strptime(hour, '%Y%m%d%H') + timedelta(hours=hours):%Y%m%d%H}"


def hours_to_rebuild(stored: DataFrame, changed: set[str]) -> tuple[list[str], list[str]]:
    """For an hourly derived table whose rows continue from the hour before (rates from
    counters): (the hours to rebuild: the changed ones and each stored hour right after one,
    whose first rows continue from it; the hours before those, whose last rows they continue
    from). `stored` is the input table, read for its hour_cst partition values only."""
    from pyspark.sql import functions as F

    after = sorted({shift_hour(h, 1) for h in changed} - changed)
    found = stored.filter(F.col("hour_cst").isin(after)).select("hour_cst").distinct().collect()
    hours = sorted(changed | {r.hour_cst for r in found})
    before = sorted({shift_hour(h, -1) for h in hours} - set(hours))
    return hours, before
