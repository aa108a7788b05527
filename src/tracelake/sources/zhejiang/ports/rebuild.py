"""silver.zj_port_rates's partial rebuild: the rates of the changed hours, most of them as the one pass
staged them (parser.py), the rest computed again from the carried state of the hour before (window.py);
and the stored hour after each changed one, whose opening rows continue from it."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.api.tables import StagedBeside, changed_groups, read_tables, staged_clean, staged_parse
from tracelake.config import Config
from tracelake.io.frames import union_all
from tracelake.io.staging import Scratch, parse_path, stage
from tracelake.schema import load_schema
from tracelake.sources.zhejiang.clock import hours_to_rebuild, shift_hour
from tracelake.sources.zhejiang.ports import RATES_TABLE, TABLE, carry, filepass
from tracelake.sources.zhejiang.ports.parser import PortParser, carry_path, state_path
from tracelake.sources.zhejiang.ports.window import (
    carried_state,
    first_instants,
    opening_cuts,
    overlapping,
    rates_from_pass,
    rates_of,
    relabelled,
)


def rebuild_rates(spark: SparkSession, config: Config, changed: dict, scratch: Scratch) -> tuple[DataFrame, tuple] | None:
    """The rates of the changed hours, from their counters plus the carried state of the hour
    before each (for an hour this run's one pass rated, the rates it staged: from_pass); and of
    the stored hour after each, whose
    opening rows continue from it: only those rows are recomputed, and the hour is replaced only
    when they differ from the stored ones. Nothing else of the lake is read, so a re-ingested
    hour costs about what a new one does."""
    counters, stored = read_tables(spark, config, TABLE, RATES_TABLE)
    if counters is None:
        return None
    own = sorted({values[0] for values in changed[TABLE]})
    hours, _ = hours_to_rebuild(counters, set(own))
    after = {shift_hour(h, -1): h for h in own if shift_hour(h, -1) not in own}  # a carried hour -> the hour it precedes
    passed = staged_parse(spark, scratch, TABLE) if len(own) == 1 else None
    if passed is not None and carry_path(scratch).exists():  # the pass's state for the next hour, if it holds
        carry.keep(config, carry_path(scratch).local(), parse_path(scratch, TABLE).local(), own[0])
    following = [h for h in hours if h not in own]
    # first the hours after: when none of them changes (a retried hour), the changed hour is the
    # only one replaced, and its rates can be the files its counters were staged in
    rebuilt, redone = following_hours(counters, stored, following, scratch) if following else ([], [])
    if passed is not None and filepass.RERATE in passed.columns:  # the one pass rated them on from the hour before
        rates = from_pass(passed, counters, after, own[0], scratch, alone=not redone)
    else:
        rows = passed if passed is not None else counters.filter(F.col("hour_cst").isin(own))
        firsts = first_instants(rows.filter(F.col("hour_cst").isin(list(after.values()))), {h: b for b, h in after.items()})
        rates = rates_of(rows, carried(counters.filter(F.col("hour_cst").isin(list(after))), firsts,
                                       scratch / "zj_port_state"), own)
    if not redone:
        return rates, tuple((h,) for h in own)
    return union_all([rates, *rebuilt]), tuple((h,) for h in sorted([*own, *redone]))  # alone=False: a frame


def from_pass(passed: DataFrame, counters: DataFrame, after: dict[str, str], hour: str, scratch: Scratch,
              alone: bool) -> DataFrame | StagedBeside:
    """The rates of the hour the one pass staged (`passed`, its kept rows): as the pass rated them
    on from the carried state, except the rows it staged apart (filepass.RERATE: a port whose
    polls overlap the hour before, a wrapped 32-bit port, a file parsed line by line), computed
    again here (rates_from_pass, with the state of the hour before grown by the overlap). When
    the pass's other staged files hold kept rows only (staged_clean) and the hour is the only
    one replaced (`alone`), they are given as they lie (StagedBeside): silver.zj_port_rates then
    takes the same files as bronze.zj_port_counters, and nothing rewrites the hour's rates."""
    columns = [c.name for c in load_schema(RATES_TABLE).columns]
    apart = F.coalesce(F.col(filepass.RERATE), F.lit(True))
    rest = passed.filter(apart)
    again = None
    if rest.limit(1).collect():
        opening = rest.filter(F.col("hour_cst").isin(list(after.values())) & F.col("dt_s").isNull())
        firsts = first_instants(opening, {h: b for b, h in after.items()})
        state = carried(counters.filter(F.col("hour_cst").isin(list(after))), firsts, scratch / "zj_port_state",
                        state_path(scratch, shift_hour(hour, -1)))
        again = rates_from_pass(rest, state, hour)
    kept = passed.filter(~apart).select(*columns)
    whole = kept if again is None else kept.unionByName(again.select(*columns))
    files = staged_clean(passed.sparkSession, scratch, TABLE) if alone else None
    return whole if files is None else StagedBeside(files, again, whole, made_by=PortParser.name)


def carried(earlier: DataFrame, later_firsts: DataFrame, path: Scratch, staged: Scratch | None = None) -> DataFrame:
    """carried_state of `earlier`, staged at `path`, or read from `staged` where this run's pass
    staged it already (carried_into_pass: the same hour, before anything of it could change).
    Where a port of the hour after starts before
    its hour before ends (polls delivered again in both folders: window.overlapping), it
    is computed again with those ports' rows from there on; otherwise that costs nothing more
    than the one aggregation (a join of the hour's rows costs about as much again, measured)."""
    stored = earlier.sparkSession.read.parquet(str(staged)) if staged is not None and staged.exists() else None
    state = stored if stored is not None and stored.columns else stage(carried_state(earlier), path)  # no file: no rows
    overlap = overlapping(later_firsts, state)
    if not overlap.limit(1).collect():
        return state
    return stage(carried_state(earlier, overlap), path.beside("-overlap"))


def following_hours(counters: DataFrame, stored: DataFrame | None, following: list[str],
                    scratch: Scratch) -> tuple[list[DataFrame], list[str]]:
    """(the new rates of the hours after changed ones whose opening rows changed, those hours).
    An hour whose stored rates do not hold a row per counter row (none yet, or a run stopped
    between the two commits) is rebuilt whole instead. The opening rows of an hour are those up
    to its cut (window.opening_cuts) and the first one after it, per port."""
    keys = ["hour_cst", "device_name", "port_name"]
    after = {shift_hour(h, -1): h for h in following}
    hours = F.col("hour_cst").isin(following)
    firsts = stage(first_instants(counters.filter(hours)), scratch / "zj_port_firsts_following")
    labelled = firsts.select(relabelled(F.col("hour_cst"), {h: b for b, h in after.items()}).alias("hour_cst"),
                             "device_name", "port_name", "_first")
    before = carried(counters.filter(F.col("hour_cst").isin(list(after))), labelled, scratch / "zj_port_state_following")
    rows = dict(firsts.groupBy("hour_cst").agg(F.sum("_rows")).collect())
    kept = dict(stored.filter(hours).groupBy("hour_cst").count().collect()) if stored is not None else {}
    whole = [h for h in following if kept.get(h) != rows.get(h)]
    opened = [h for h in following if h not in whole]
    frames = []
    if whole:
        frames.append(rates_of(counters.filter(F.col("hour_cst").isin(whole)), before, whole))
    if opened:
        in_opened = F.col("hour_cst").isin(opened)
        cuts = opening_cuts(firsts.filter(in_opened), before, after)
        past = counters.filter(in_opened).join(F.broadcast(cuts), keys).filter(
            F.unix_micros(F.col("save_time_utc")) > F.col("_cut_us"))
        nearest = past.groupBy(*keys).agg(F.min("save_time_utc").alias("_next"))
        bounds = stage(cuts.join(nearest, keys, "left"), scratch / "zj_port_cuts_following")
        opening_row = (F.unix_micros(F.col("save_time_utc")) <= F.col("_cut_us")) | \
            F.coalesce(F.col("save_time_utc") == F.col("_next"), F.lit(False))
        opening = counters.filter(in_opened).join(F.broadcast(bounds), keys).filter(opening_row)
        fresh = rates_of(opening.select(*counters.columns), before, opened)
        old = stored.filter(in_opened).join(F.broadcast(bounds), keys)
        columns = list(fresh.columns)
        differ = changed_groups(old.filter(opening_row).select(*columns), fresh, columns, "hour_cst")
        if differ:
            tail = old.filter(F.col("hour_cst").isin(differ) & ~opening_row).select(*columns)
            frames.append(tail.unionByName(fresh.filter(F.col("hour_cst").isin(differ))))
        opened = differ
    return frames, sorted([*whole, *opened])

