"""Zhejiang per-switch-port counters: trafficinfo/<hour>/<switch folder>/<port file>.csv (docs/formats/zhejiang.md §3).

One file per leaf port, a 10-column CSV polled about every 0.5 s. The file name says which port
it is (§3.2, the rule table below, verified on every real file); the rows say it again, and both
are kept so the quality gate can check they agree. `SaveTimeUTC` (epoch ms) is the time key;
`SaveTime` (China time with a Chinese weekday) is kept as delivered text.

Reading: one pass per file (portpass). A DataFrame of the hour's file paths goes through
mapInArrow; each file is read once, whole, by pyarrow's CSV reader where the task runs, checked
(field counts, UTF-8, types, the port and switch on every line), typed, and rated with numpy in
the same pass (one file is one port's series: no shuffle, no sort of the hour), on from the
carried state of the hour before (carried_into_pass). The rows are staged once with their rates;
bronze.zj_port_counters is committed from them, and so is silver.zj_port_rates, which computes
again only the rows of the files the pass set apart (from_pass). A file that fails a check is parsed line by line
instead (one text read of that file, each line split once), so every quarantine row and reason
is the exact parse's. Rejected earlier, measured: Spark's CSV reader per switch folder with
checks after the fact (a second read of every file, and window rates over the hour: a sort of
every row), binaryFile + pyarrow in mapInArrow (the bytes through the engine, ~15 s an hour).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from tracelake.api.contract import TableInput, derived
from tracelake.api.tables import StagedBeside, changed_groups, commits_staged, read_tables, staged_clean, staged_parse
from tracelake.config import Config
from tracelake.errors import TracelakeError
from tracelake.io import objectstore, progress
from tracelake.io.frames import takes_dictionary_strings, union_all
from tracelake.io.parse import PARSE_ERRORS, REPEAT_COPY, ROW_ID, split_fields, type_fields
from tracelake.io.staging import Checked, Scratch, parse_path, stage
from tracelake.io.storetree import as_folder, listed_size
from tracelake.io.text import RawFile, check_header, file_size, read_lines, regular_file
from tracelake.schema import TableSchema, load_schema
from tracelake.sources.zhejiang import portcarry, portgroup, portpass
from tracelake.sources.zhejiang.clock import hours_to_rebuild, shift_hour
from tracelake.sources.zhejiang.layout import (  # the naming rules (layout.py: the generator uses them too)
    PORT_FILE,
    SWITCH_DIR,
    TRAFFIC,
    device_name,
    file_prefix,
    hour_folders,
    port_exists,
    port_name_for_file,
)
from tracelake.sources.zhejiang.transforms.ports import (
    carried_state,
    first_instants,
    opening_cuts,
    overlapping,
    port_rates,
    rates_from_pass,
    rates_of,
    relabelled,
)

log = logging.getLogger(__name__)

TABLE = "bronze.zj_port_counters"
RATES_TABLE = "silver.zj_port_rates"
# ---------------------------------------------------------------- planning

def _hour(name: str, where: str) -> str:
    try:
        datetime.strptime(name, "%Y%m%d%H")
    except ValueError as exc:
        raise TracelakeError(f"{where}: hour folder '{name}' is not a valid YYYYMMDDHH (CST) hour") from exc
    return name


def _switch_files(raw_dir: Path, hour: str, folder: Path) -> list[RawFile]:
    """The port files of one switch folder; macOS dot files are skipped, anything else, or no
    port file at all, is an error."""
    prefix, device = file_prefix(folder.name), device_name(folder.name)
    files = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        where = path.relative_to(raw_dir).as_posix()
        if path.name.endswith(".csv") and not path.is_dir():
            regular_file(path, where)
        if not path.is_file() or not path.name.endswith(".csv"):
            raise TracelakeError(f"{where}: unexpected entry in a switch folder (only port CSVs belong there)")
        port = port_name_for_file(path.name)
        if PORT_FILE.fullmatch(path.name).group("sw") != prefix:
            raise TracelakeError(f"{where}: a {prefix} folder holds a file of another switch")
        if not port_exists(prefix, port):
            kind = "storage leaf" if prefix.startswith("leaf-") else "GPU leaf"
            raise TracelakeError(f"{where}: a {kind} has no port {port} (docs/formats/zhejiang.md §3.2)")
        constants = {"hour_cst": hour, "folder_device_name": device, "file_port_name": port}
        files.append(RawFile(str(path), where, constants, size=listed_size(path)))
    if not files:  # a copy that failed part way: the switch's hour would be missing without a word
        raise TracelakeError(f"{TRAFFIC}/{hour}/{folder.name}: a switch folder with no port files")
    return files


def find_port_files(raw_dir: Path, hours: tuple[str, ...] | None = None) -> list[RawFile]:
    """Every trafficinfo/<hour>/<switch folder>/<port file>.csv under the release folder.

    Files directly in an hour folder (the hourly flow/nic/link/port CSVs) belong to another part;
    a sub-folder that is not a switch folder stops the run rather than being left out."""
    files: list[RawFile] = []
    for hour_dir in hour_folders(raw_dir, hours):
        hour = _hour(hour_dir.name, f"{TRAFFIC}/{hour_dir.name}")
        for folder in sorted(p for p in hour_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not SWITCH_DIR.fullmatch(folder.name):
                raise TracelakeError(
                    f"{TRAFFIC}/{hour}/{folder.name}: not a switch folder "
                    "(NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)"
                )
            files += _switch_files(as_folder(raw_dir), hour, folder)
    return files


def plan(raw_dir: Path, staging: Path, hours: tuple[str, ...] | None = None) -> list[TableInput]:
    files = find_port_files(raw_dir, hours)
    return [TableInput(TABLE, files, partial(parse_port_files, staging=staging, config=None))] if files else []


# ---------------------------------------------------------------- parsing

def _read_lines(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """Data lines of every file with its lineage name and the constants its path implies; a BOM
    or CR is stripped only in files that have them (io.text.read_lines)."""
    return read_lines(spark, files, schema.delimiter.join(schema.raw_header), detect_endings=True)


def parse_fields(lines: DataFrame, schema: TableSchema) -> DataFrame:
    """io.parse.parse_lines' contract and error texts for text lines, each split once, with
    io.parse.finish's measured shortcuts: problem messages and raw_values_json only for rows that
    failed to parse (a parsed row's raw_line splits exactly into the header's fields; to_json on
    every row costs more than the rest of the parse). `format: epoch_ms` columns hold whole
    Unix milliseconds."""
    return type_fields(split_fields(lines, schema.delimiter, len(schema.raw_header)), schema, lean=True)


POLL_VALUES = ("save_time", "in_pkts", "in_octets", "out_pkts", "out_octets", "in_ratio", "out_ratio")


def repeated_polls(parsed: DataFrame) -> DataFrame:
    """Two parsed rows of one file with one (switch, port, instant) key: the same poll delivered
    twice. When they agree on every value, every copy but one is marked
    REPEAT_COPY (counted as repeated, not kept); when any value differs, every row of that key
    is quarantined with the reason and the file, since which one is true cannot be told (the
    port pass sends such a file here)."""
    ok = F.size(PARSE_ERRORS) == 0
    key = Window.partitionBy("source_file", "device_name", "port_name", "save_time_utc", ok)
    digest = F.xxhash64(*POLL_VALUES)
    marked = parsed.select("*", F.count(F.lit(1)).over(key).alias("_copies"),
                           F.row_number().over(key.orderBy("raw_line")).alias("_nth"),
                           (F.min(digest).over(key) != F.max(digest).over(key)).alias("_conflict"))
    twice = ok & (F.col("_copies") > 1)
    reason = F.concat(F.lit("the same poll (switch, port, SaveTimeUTC) delivered "), F.col("_copies").cast("string"),
                      F.lit(" times with different values in "), F.col("source_file"))
    conflict = twice & F.col("_conflict")
    return marked.select(
        *[F.when(conflict, F.array(reason)).otherwise(F.col(c)).alias(c) if c == PARSE_ERRORS else F.col(c)
          for c in parsed.columns],
        (twice & ~F.col("_conflict") & (F.col("_nth") > 1)).alias(REPEAT_COPY))


# ---------------------------------------------------------------- the one pass: each file read, checked, typed and rated

def _file_rows(spark: SparkSession, files: list[RawFile]) -> DataFrame:
    """One row per port file (portpass.FILE_COLUMNS), spread over the engine's partitions."""
    rows = [(f.path, f.name, f.constants["hour_cst"], f.constants["folder_device_name"],
             f.constants["file_port_name"]) for f in files]
    frame = spark.createDataFrame(rows, ", ".join(f"{c} string" for c in portpass.FILE_COLUMNS))
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 2)
    return frame.repartition(min(partitions, len(files)))


def one_pass(spark: SparkSession, files: list[RawFile], schema: TableSchema, state: dict | None = None,
             carry: Path | None = None) -> DataFrame:
    """The parse contract of `files` from portpass, one pass each, with the rate columns it adds
    (portpass.RATE_COLUMNS, continuing from `state`: portpass.state_of the hour before) and its
    marker rows (portpass.EXACT: files to parse line by line, which carry a parse problem so
    that nothing counts them as rows). With `carry` (a folder on this machine, where the engine's
    tasks run too), the state the files leave for the hour after is written there (portcarry)."""
    tally = progress.expect([f.path for f in files], [file_size(f) for f in files])  # the step's ETA (io.progress)
    if carry is not None:
        portcarry.expect(carry, len(files), sorted({f.constants["hour_cst"] for f in files}))
    parse = partial(portgroup.parse_files, state=state, dictionary=takes_dictionary_strings(spark),
                    carry=None if carry is None else str(carry))
    out = _file_rows(spark, files).mapInArrow(progress.tallying(parse, tally), portpass.OUTPUT_DDL)
    return out.select(
        *[F.col(c.name) for c in schema.data_columns], "source_file",
        F.lit(None).cast("string").alias("raw_line"), F.lit(None).cast("string").alias("raw_values_json"),
        F.concat(F.col("source_file"), F.lit(":"), F.col("line_number").cast("string")).alias(ROW_ID),
        PARSE_ERRORS, *[name for name, _ in portpass.RATE_COLUMNS], portpass.REPEATED_INSTANT,
        portpass.SAVE_TIME_UNPROVEN, portpass.RATE_OUT_OF_BOUNDS, portpass.OUTSIDE_HOUR, REPEAT_COPY, portpass.EXACT,
        portpass.RERATE,
    )


KEY_RULE = "port_sample_unique"  # expectations/bronze.zj_port_counters.json
# its quarantine rules the pass checks on every row it yields (portpass._holds: a file with a row
# naming another port or switch goes line by line), so their flags need no evaluation
PROVEN_RULES = ("port_matches_file_name", "device_matches_folder")
RATES_RULE = "rates_within_line_rate"  # expectations/silver.zj_port_rates.json: the pass checks it (portpass.RATE_OUT_OF_BOUNDS)
SAVE_TIME_RULE = "save_time_matches_utc"  # its warning rule that the pass checks too (portpass.save_time_unproven)
HOUR_RULE = "samples_in_hour_folder"  # and this one (portpass.outside_hour)


def _only_rated(exact: Callable[[list[RawFile]], DataFrame], files: list[RawFile]) -> Callable:
    """Checked.rest: the staged pass without its marker rows, and the exact parse of the files
    they name (by their lineage names)."""
    by_name = {f.name: f for f in files}

    def rest(staged: DataFrame) -> tuple[DataFrame, DataFrame]:
        marked = sorted(r[0] for r in staged.filter(F.col(portpass.EXACT)).select("source_file").collect())
        log.info("%s: %d file(s) parsed line by line", TABLE, len(marked))
        return staged.filter(~F.col(portpass.EXACT)), exact([by_name[name] for name in marked])
    return rest


def state_path(scratch: Scratch, hour_before: str) -> Scratch:
    """Where a run stages carried_state of the stored hour `hour_before` (no later_firsts): the
    pass's state and the rates of the rows it set apart read the one scan of that hour."""
    return scratch / f"zj_port_state_{hour_before}"


def carry_path(scratch: Scratch) -> Scratch:
    """Where the one pass of a run writes the state its hour leaves for the next (portcarry)."""
    return scratch / "zj_port_carry"


def carried_into_pass(spark: SparkSession, config: Config | None, hours: list[str],
                      scratch: Scratch | None = None) -> dict | None:
    """portpass.state_of the stored hour before the files' hour (one hour's files, a lake that
    holds that hour): carried_state's few rows per port, collected so that the pass rates each
    file on from them. Measured on a full stored hour: 0.5-1.0 s (one scan of its counters).
    With `scratch`, the state is staged there (state_path) on the way, so that the rates of the
    rows the pass sets apart (from_pass) read it instead of scanning the hour again: 0.6 s of a
    full hour's rebuild of silver.zj_port_rates, measured."""
    if config is None or len(hours) != 1:
        return None
    (counters,) = read_tables(spark, config, TABLE)
    if counters is None:
        return None
    before = shift_hour(hours[0], -1)
    left = portcarry.left_for(config, before)  # the state that hour's own pass left, when it still holds
    if left is not None:
        if scratch is not None:  # where the rates of the rows the pass sets apart read it (from_pass)
            state_path(scratch, before).remove()
            state_path(scratch, before).local().mkdir(parents=True)
            pq.write_table(left, state_path(scratch, before).local() / "left.parquet")
        return portpass.state_of(zip(left.column("device_name").to_pylist(), left.column("port_name").to_pylist(),
                                     (t // 1000 for t in left.column("save_time_utc").cast(pa.int64()).to_pylist()),
                                     left.column("in_pkts").to_pylist()))
    state = carried_state(counters.filter(F.col("hour_cst") == before))
    if scratch is not None:
        state = stage(state, state_path(scratch, before))
    rows = state.select("device_name", "port_name", F.unix_millis("save_time_utc"), "in_pkts")
    return portpass.state_of([tuple(r) for r in rows.collect()])


def parse_port_files(
    spark: SparkSession, files: list[RawFile], schema: TableSchema, staging: Path | None = None,
    config: Config | None = None,
) -> DataFrame | Checked:
    """The TableInput parser. With `staging` (an ingest), the one pass: every file read once,
    checked, typed and rated in Arrow (portpass), continuing from the hour before stored in the
    lake of `config` (bound by the ingest: api.contract.lake_bound); a file that fails a check is
    parsed line by line instead (io.text.read_lines, io.parse: each line keeps its value or its
    reasons, and a file whose header is not the documented one, or that is not UTF-8, is
    refused, naming it). Without `staging`, the exact parse of every file."""
    if not files:
        raise TracelakeError(f"no input files for {schema.full_name}")

    def exact(chosen: list[RawFile] = files) -> DataFrame:
        for raw in chosen:
            check_header(raw, schema)
        return repeated_polls(parse_fields(_read_lines(spark, chosen, schema), schema))

    if staging is None:
        return exact()
    def holds(staged: DataFrame) -> bool:
        return not staged.filter(F.col(portpass.EXACT)).limit(1).collect()
    # the suite's key rule, a group-by of the hour, is the pass's own per-file check: one port,
    # one file an hour, and every row of a file the pass took names that port and switch; the
    # SaveTime rule's cast of every row's text (0.9-1.0 s of a full hour's gate) is its byte check
    verified = {KEY_RULE: portpass.REPEATED_INSTANT, SAVE_TIME_RULE: portpass.SAVE_TIME_UNPROVEN,
                HOUR_RULE: portpass.OUTSIDE_HOUR}
    hours = sorted({f.constants["hour_cst"] for f in files})
    scratch = Scratch(str(staging))
    carry = carry_path(scratch) if config is not None and len(hours) == 1 and commits_staged(
        config, load_schema(TABLE), [tuple(hours)]) else None
    if not objectstore.is_url(str(scratch)):
        carry_path(scratch).remove()  # an earlier pass's of this run
    frame = one_pass(spark, files, schema, carried_into_pass(spark, config, hours, scratch),
                     None if carry is None else carry.local())
    # the rows to rate again staged apart only where silver can then take the others' files (a
    # write by folders sorts each task's rows on a Spark cluster)
    apart = config is not None and commits_staged(config, load_schema(RATES_TABLE), [tuple(hours)])
    return Checked(frame, holds, exact, _only_rated(exact, files), verified, PROVEN_RULES,
                   apart=portpass.RERATE if apart else None, clean=True)


# ---------------------------------------------------------------- derived

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
        portcarry.keep(config, carry_path(scratch).local(), parse_path(scratch, TABLE).local(), own[0])
    following = [h for h in hours if h not in own]
    # first the hours after: when none of them changes (a retried hour), the changed hour is the
    # only one replaced, and its rates can be the files its counters were staged in
    rebuilt, redone = following_hours(counters, stored, following, scratch) if following else ([], [])
    if passed is not None and portpass.RERATE in passed.columns:  # the one pass rated them on from the hour before
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
    on from the carried state, except the rows it staged apart (portpass.RERATE: a port whose
    polls overlap the hour before, a wrapped 32-bit port, a file parsed line by line), computed
    again here (rates_from_pass, with the state of the hour before grown by the overlap). When
    the pass's other staged files hold kept rows only (staged_clean) and the hour is the only
    one replaced (`alone`), they are given as they lie (StagedBeside): silver.zj_port_rates then
    takes the same files as bronze.zj_port_counters, and nothing rewrites the hour's rates."""
    columns = [c.name for c in load_schema(RATES_TABLE).columns]
    apart = F.coalesce(F.col(portpass.RERATE), F.lit(True))
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
    return whole if files is None else StagedBeside(files, again, whole, {RATES_RULE: portpass.RATE_OUT_OF_BOUNDS})


def carried(earlier: DataFrame, later_firsts: DataFrame, path: Scratch, staged: Scratch | None = None) -> DataFrame:
    """carried_state of `earlier`, staged at `path`, or read from `staged` where this run's pass
    staged it already (carried_into_pass: the same hour, before anything of it could change).
    Where a port of the hour after starts before
    its hour before ends (polls delivered again in both folders: transforms/ports.overlapping), it
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
    to its cut (transforms/ports.opening_cuts) and the first one after it, per port."""
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


DERIVED = [replace(derived(RATES_TABLE, port_rates, (TABLE,)), rebuild=rebuild_rates)]
