"""The rate rules (rules.py) as Spark windows: port_rates, the reference the one pass is held to
row for row and the rates' rebuild of the rows the pass set apart, and the carried state of the
hours before that lets an hour's rates continue from them.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tracelake.sources.zhejiang.layout import MGMT_PORT
from tracelake.sources.zhejiang.ports.rules import COUNTERS, LINE_RATES_BPS, MAX_GAP_S, MAX_UTIL, WRAP


def line_rate_bps(port_name: Column) -> Column:
    """Bits per second of a port from its name; null for a name this release does not use."""
    rate = F.lit(None).cast("bigint")
    for prefix, bps in reversed(LINE_RATES_BPS):
        rate = F.when(port_name.startswith(prefix), F.lit(bps)).otherwise(rate)
    return rate


def unwrap_32bit(value: Column, is_32bit: Column) -> Column:
    """A negative delta of a 32-bit counter that wrapped, put back in range; other counters as they are."""
    return F.when(is_32bit & (value < 0), value + F.lit(WRAP)).otherwise(value)


def counter_columns() -> list[Column]:
    """A counter row's counters as silver keeps them (a 32-bit wrap undone), whether they wrapped,
    and the port's line rate: what every rated row carries beside its rate."""
    is_32bit = F.col("port_name") == F.lit(MGMT_PORT)  # the only counters that are 32-bit (rules.is_32bit)
    return [*[unwrap_32bit(F.col(c), is_32bit).alias(c) for c in COUNTERS],
            (is_32bit & _negative()).alias("counter_wrapped"), line_rate_bps(F.col("port_name")).alias("line_rate_bps")]


def _negative() -> Column:
    return reduce(Column.__or__, [F.col(c) < 0 for c in COUNTERS])


def port_rates(counters: DataFrame, max_gap_s: float = MAX_GAP_S, max_util: float = MAX_UTIL) -> DataFrame:
    """One row per counter row: its status, the interval its bytes cover, bytes/s and utilisation."""
    # hour_cst breaks a tie of instants: a poll two hour folders both hold (one outside its hour)
    # is rated once, in the earlier folder; a tie within one folder is a critical bronze failure
    port = Window.partitionBy("device_name", "port_name").orderBy("save_time_utc", "hour_cst")
    before = port.rowsBetween(Window.unboundedPreceding, -1)
    ms = F.unix_millis(F.col("save_time_utc"))
    base = counters.select(
        "hour_cst", "device_name", "port_name", "save_time_utc", ms.alias("_ms"), *counter_columns(),
        ((F.col("port_name") != F.lit(MGMT_PORT)) & _negative()).alias("_negative"),
    )
    zero = reduce(Column.__and__, [F.col(c) == 0 for c in COUNTERS])
    ordered = base.select(
        "*",
        zero.alias("_zero"),
        F.lag("_ms").over(port).alias("_prev_ms"),
        F.min("_ms").over(before).alias("_first_ms"),
        F.max(F.when(~zero, F.col("_ms"))).over(before).alias("_update_ms"),
    )
    anchor = F.coalesce(F.col("_update_ms"), F.col("_first_ms"))
    limit_ms = F.lit(max_gap_s * 1000.0)
    dt_ms = F.col("_ms") - F.col("_prev_ms")
    waiting = (F.col("_ms") - anchor) <= limit_ms  # a zero row still within the carry window
    carried = (F.col("_prev_ms") - anchor) <= limit_ms  # the zero rows before an update were waiting
    status = (
        F.when(F.col("_prev_ms").isNull(), "first")
        .when(dt_ms == 0, "repeated")
        .when(dt_ms > limit_ms, "gap")
        .when(~F.col("_zero"), "update")
        .when(waiting, "no_new_data")
        .otherwise("idle")
    )
    start_ms = (
        F.when(status == "update", F.when(carried, anchor).otherwise(F.col("_prev_ms")))
        .when(status == "idle", F.col("_prev_ms"))
    )
    staged = ordered.select("*", status.alias("_status"), start_ms.alias("_start_ms"))
    seconds = (F.col("_ms") - F.col("_start_ms")) / 1000.0
    rated = staged.select(
        "*",
        seconds.alias("interval_s"),
        (F.col("in_octets") / seconds).alias("_in_bps"),
        (F.col("out_octets") / seconds).alias("_out_bps"),
    )
    util_in = F.col("_in_bps") * 8 / F.col("line_rate_bps")
    util_out = F.col("_out_bps") * 8 / F.col("line_rate_bps")
    too_fast = (F.col("_status") == "update") & (F.greatest(util_in, util_out) > F.lit(max_util))
    withheld = F.coalesce(too_fast, F.lit(False)) | F.col("_negative")
    keep = F.col("_start_ms").isNotNull() & ~withheld
    return rated.select(
        "hour_cst", "device_name", "port_name", "save_time_utc",
        F.when(F.col("_negative"), "negative_counter").when(too_fast, "over_line_rate")
        .otherwise(F.col("_status")).alias("status"),
        F.when(keep, F.timestamp_millis(F.col("_start_ms"))).alias("interval_start_utc"),
        F.when(keep, F.col("interval_s")).alias("interval_s"),
        (dt_ms / 1000.0).alias("dt_s"),
        *COUNTERS, "counter_wrapped", "line_rate_bps",
        F.when(keep, F.col("_in_bps")).alias("in_bytes_per_s"),
        F.when(keep, F.col("_out_bps")).alias("out_bytes_per_s"),
        F.when(keep, util_in).alias("in_util"),
        F.when(keep, util_out).alias("out_util"),
    )


def first_instants(rows: DataFrame, relabel: dict[str, str] | None = None) -> DataFrame:
    """Per hour and port of counter rows: its first instant, `_first`, and its rows, `_rows`. With
    `relabel` (hour -> hour), hour_cst is renamed, e.g. to the hour before, for carried_state's
    `later_firsts`."""
    firsts = rows.groupBy("hour_cst", "device_name", "port_name").agg(
        F.min("save_time_utc").alias("_first"), F.count(F.lit(1)).alias("_rows"))
    if not relabel:
        return firsts
    return firsts.select(relabelled(F.col("hour_cst"), relabel).alias("hour_cst"), "device_name", "port_name",
                         "_first", "_rows")


def carried_state(earlier: DataFrame, later_firsts: DataFrame | None = None) -> DataFrame:
    """The counter rows of earlier hours that the rates after them depend on: per hour and port
    its first row, its last row (the previous poll) and its last non-zero row (the carry anchor),
    and, given `later_firsts` (first_instants of the hours after, labelled with the earlier hour),
    every row at or after the port's first instant of the hour after. Those overlap: a collector
    that retried can deliver minutes of polls again in the next hour folder, and each copy must
    find its twin here to be `repeated`, however long the overlap. Per hour, so that hours that
    are not adjacent each keep their own last rows. Only what the rates after them read is kept
    of these rows: the instant and whether the row is all zeros (a non-zero row's counters read
    1), in one row per instant.

    port_rates of later rows computed over these rows + the later rows equal port_rates over
    the whole history, except for a port whose earlier stretch has no non-zero row and which
    also had rows before that stretch (its anchor would then be older still): an hour-long
    stretch of zeros, which classifies as idle either way."""
    nonzero = ~reduce(Column.__and__, [F.col(c) == 0 for c in COUNTERS])
    port = ["hour_cst", "device_name", "port_name"]
    ts = F.col("save_time_utc")
    marks = earlier.groupBy(*port).agg(  # plain min/max: aggregating structs cost 5 s a full hour
        F.min(ts).alias("_first"), F.max(ts).alias("_last"),
        F.min(F.when(nonzero, ts)).alias("_first_update"), F.max(F.when(nonzero, ts)).alias("_update"))

    at = F.explode(F.array("_first", "_last", "_update")).alias("save_time_utc")  # a null _update: no row
    rows = marks.select(*port, "_first_update", "_update", at).filter(F.col("save_time_utc").isNotNull())
    is_update = F.coalesce(ts == F.col("_first_update"), F.lit(False)) | F.coalesce(ts == F.col("_update"), F.lit(False))
    rows = rows.select(*port, "save_time_utc", is_update.cast("bigint").alias("_nz"))
    if later_firsts is not None:
        # the later hour's first instants as the build side of the join (Sail builds on the left:
        # the hour's rows there took 4 GB), and the hour's rows as they are, rebuilt as plain
        # values so the union's two sides agree in metadata and nullability (Sail 0.7.2 refuses
        # a union of a Delta column with a computed one)
        overlap = F.broadcast(later_firsts.select(*port, "_first")).join(earlier, port).filter(ts >= F.col("_first"))
        rows = rows.unionByName(overlap.select(
            *port, F.timestamp_micros(F.unix_micros(ts)).alias("save_time_utc"),
            F.when(F.lit(True), nonzero.cast("bigint")).alias("_nz")))
    # one row per instant (the last row is often the last update): a group-by, as Sail 0.7.2's
    # dropDuplicates over exploded values kept one row per port (measured)
    one = rows.groupBy(*port, "save_time_utc").agg(F.max("_nz").alias("_nz"))
    return one.select(*port, "save_time_utc", *[F.col("_nz").alias(c) for c in COUNTERS])


def overlapping(firsts: DataFrame, state: DataFrame) -> DataFrame:
    """The rows of `firsts` (first_instants of later hours, labelled with the hour before) whose
    port's first instant is not after the last carried row of the hour before: the ports whose
    hour folders overlap, for which carried_state needs `later_firsts`. Small: both sides are."""
    keys = ["hour_cst", "device_name", "port_name"]
    last = state.groupBy(*keys).agg(F.max("save_time_utc").alias("_last"))
    return firsts.join(last, keys).filter(F.col("_first") <= F.col("_last")).select(*firsts.columns)


def opening_cuts(firsts: DataFrame, state: DataFrame, after: dict[str, str], max_gap_s: float = MAX_GAP_S) -> DataFrame:
    """Per hour and port of `firsts` (first_instants): where its opening prefix ends, `_cut_us`
    in epoch micros: 2 x max_gap_s after the later of its first row and the last row of the
    state of the hour before it (`after`: a state hour -> the hour after it); with none, after
    its first row. See prefix_cuts for why no row after the first one past the cut depends on
    the hours before."""
    keys = ["hour_cst", "device_name", "port_name"]
    last = state.groupBy(*keys).agg(F.max("save_time_utc").alias("_last"))
    last = last.select(relabelled(F.col("hour_cst"), after).alias("hour_cst"), "device_name", "port_name", "_last")
    joined = firsts.join(F.broadcast(last), keys, "left")
    reach = F.greatest(F.col("_first"), F.coalesce(F.col("_last"), F.col("_first")))
    return joined.select(*keys, (F.unix_micros(reach) + F.lit(int(2 * max_gap_s * 1_000_000))).alias("_cut_us"))


def relabelled(hour: Column, names: dict[str, str]) -> Column:
    """An hour column renamed by `names` (hour -> hour); null for an hour it does not name."""
    renamed = F.lit(None).cast("string")
    for old, new in names.items():
        renamed = F.when(hour == old, F.lit(new)).otherwise(renamed)
    return renamed


def rates_of(counters: DataFrame, state: DataFrame, hours: list[str], **limits: float) -> DataFrame:
    """port_rates of the counter rows of `hours`, continuing from `state` (carried_state of
    the hours before them); only rows of `hours` are returned."""
    columns = ["hour_cst", "device_name", "port_name", "save_time_utc", *COUNTERS]
    rows = state.select(*columns).unionByName(counters.select(*columns))
    return port_rates(rows, **limits).filter(F.col("hour_cst").isin(hours))


def prefix_cuts(rated: DataFrame, state: DataFrame, max_gap_s: float = MAX_GAP_S) -> DataFrame:
    """Per port of `rated` (one pass's rows) that has rows in `state`: where its opening prefix
    ends, `_cut_us` in epoch micros: 2 x max_gap_s after the later of its hour's first row (the
    pass rated it `first`, with no previous row) and the state's last row. A row whose previous
    row in its hour lies after the cut has the same previous poll, the same anchor (an update of
    its hour, or one more than max_gap_s before it either way), and so the same status, interval
    and rate with or without the hour before. The rows up to the first after the cut form a
    prefix in time: computed again with the state, they see every row before them."""
    port = ["device_name", "port_name"]
    first = rated.filter(F.col("dt_s").isNull()).select(*port, F.col("save_time_utc").alias("_first"))
    last = state.groupBy(*port).agg(F.max("save_time_utc").alias("_last"))
    cut = F.unix_micros(F.greatest("_first", "_last")) + F.lit(int(2 * max_gap_s * 1_000_000))
    return first.join(last, port).select(*port, cut.alias("_cut_us"))


def rates_from_pass(rows: DataFrame, state: DataFrame, hour: str, **limits: float) -> DataFrame:
    """port_rates of one hour's counter rows that carry the rates the one pass computed with the
    hour alone (its columns named as silver's; null in rows of files parsed line by line), continuing from `state`
    (carried_state of the hour before): equal to rates_of(rows, state, [hour]), computing again
    only the opening prefix of each port the state reaches (prefix_cuts) and the ports the pass
    did not rate. The hour's rows are only filtered: the join with the cuts takes the rows
    before the latest cut of any port, a few seconds of the hour. The rows kept as the pass rated
    them are one scan of the hour joined with the cuts, not a second scan of every column for the
    few early rows (about 0.6 s of a full next hour's 5.5-6 s stage in a one-off in-process
    experiment, not a bench/ figure)."""
    counters = ["hour_cst", "device_name", "port_name", "save_time_utc", *COUNTERS]
    port = ["device_name", "port_name"]
    rated = rows.filter(F.col("status").isNotNull())
    cuts = prefix_cuts(rated, state, **limits)
    bound = cuts.agg(F.max("_cut_us")).first()[0]
    previous_us = F.unix_micros(F.col("save_time_utc")) - F.round(F.col("dt_s") * 1_000_000).cast("bigint")
    unrated = rows.filter(F.col("status").isNull()).select(*counters)
    if bound is None:  # no port continues from the hour before
        late, again = rated, unrated
    else:  # one pass over the rows for those kept as rated: a broadcast join with one cut per port
        prefix = F.col("_cut_us").isNotNull() & (F.col("dt_s").isNull() | (previous_us <= F.col("_cut_us")))
        late = rated.join(F.broadcast(cuts), port, "left").filter(~prefix).drop("_cut_us")
        early = F.col("dt_s").isNull() | (previous_us <= F.lit(bound))  # the prefixes lie before `bound`
        again = rated.filter(early).select(*counters, "dt_s").join(F.broadcast(cuts), port) \
            .filter(prefix).select(*counters).unionByName(unrated)
    kept = late.select(
        "hour_cst", "device_name", "port_name", "save_time_utc",
        "status", "interval_start_utc", "interval_s", "dt_s", *counter_columns(),
        "in_bytes_per_s", "out_bytes_per_s", "in_util", "out_util",
    )
    return kept.unionByName(rates_of(again, state, [hour], **limits))
