"""The quality gate: one Great Expectations suite per table (expectations/<layer>.<table>.json).

Each expectation's `meta.severity` says what a failure does:
  critical   – the run aborts with nothing committed to the target table;
  quarantine – the failing rows are set aside: found by the rule evaluated as a Spark column
               (tracelake.quality.rowrules), or for a rule type it does not cover through GX's
               unexpected_index_list;
  warning    – recorded in ops.quality_results, and a line in the run's summary;
  info       – a count, recorded in ops.quality_results only (e.g. the blank lines of a log:
               not a problem, but how many there are is worth keeping).
The suites are the only place rules live. The types tracelake.quality.rowrules covers (all the project's
suites use) are evaluated here, with GX's SUMMARY figures (tests/quality/test_rowrules.py compares
them with GX's own validation); GX validates any other type, and is imported only then.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tracelake.errors import TracelakeError
from tracelake.io.staging import Footers, Scratch, staged_footers
from tracelake.quality.rowrules import TABLE_RULES, evaluates, in_domain, map_summary, missing, rejects, row_count_success
from tracelake.resources import resource_dir
from tracelake.schema import RESERVED_PREFIX

SEVERITIES = ("critical", "quarantine", "warning", "info")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")


@dataclass(frozen=True)
class RuleResult:
    expectation_id: str
    expectation: str
    kwargs_json: str
    severity: str
    success: bool
    element_count: int | None
    unexpected_count: int | None
    unexpected_percent: float | None
    observed_value: str | None
    counts: str = "rows"  # what unexpected_count counts (meta.counts: an aggregate query's rows are not rows)


@dataclass
class GateOutcome:
    results: list[RuleResult]
    # row id -> ids of the quarantine-severity expectations the row failed (rules GX names rows for)
    quarantined: dict[str, list[str]]
    # expectation id -> column true for the rows it rejects (rules evaluated where the rows are)
    rejected_by: dict[str, Column] = field(default_factory=dict)
    rows: int | None = None  # rows validated (counted in the gate's scan)

    @property
    def sets_rows_aside(self) -> bool:
        return bool(self.quarantined or self.rejected_by)

    @property
    def critical_failures(self) -> list[RuleResult]:
        return [r for r in self.results if r.severity == "critical" and not r.success]


def expectation_id(config: dict[str, Any]) -> str:
    """A stable, readable id: the type and the columns it looks at, unless meta.id names one."""
    meta = config.get("meta") or {}
    if meta.get("id"):
        return str(meta["id"])
    kwargs = config.get("kwargs") or {}
    cols = kwargs.get("column") or kwargs.get("column_list")
    if cols is None and "column_A" in kwargs:
        cols = [kwargs["column_A"], kwargs["column_B"]]
    short = config["type"].removeprefix("expect_")
    if isinstance(cols, list):
        return f"{short}({','.join(cols)})"
    return f"{short}({cols})" if cols else short


@cache
def load_suite(full_name: str, suite_dir: Path | None = None) -> dict[str, Any]:
    directory = suite_dir or resource_dir("expectations")
    path = directory / f"{full_name}.json"
    if not path.exists():
        raise TracelakeError(f"no expectation suite for {full_name}: expected {path}")
    suite = json.loads(path.read_text(encoding="utf-8"))
    seen: set[str] = set()
    for exp in suite.get("expectations", []):
        severity = (exp.get("meta") or {}).get("severity")
        if severity not in SEVERITIES:
            raise TracelakeError(
                f"{path}: {exp.get('type')}: meta.severity must be one of {SEVERITIES}, got {severity!r}"
            )
        ident = expectation_id(exp)
        if ident in seen:
            raise TracelakeError(f"{path}: two expectations share the id '{ident}': set meta.id")
        seen.add(ident)
        _with_limits(exp, f"{path}: {ident}")
        _check_proof(exp, f"{path}: {ident}")
    return suite


def _with_limits(exp: dict[str, Any], where: str) -> None:
    """`exp` with its thresholds (meta.limits: name -> number) written into its arguments, where they
    name them as `{name}`: a threshold is stated once, and a parser that proves the rule reads it
    there (limits_proven_by)."""
    limits = (exp.get("meta") or {}).get("limits") or {}
    kwargs = exp.get("kwargs") or {}
    for name, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TracelakeError(f"{where}: meta.limits.{name} must be a number, got {value!r}")
        named = [k for k, v in kwargs.items() if isinstance(v, str) and f"{{{name}}}" in v]
        if not named:
            raise TracelakeError(f"{where}: meta.limits.{name} is named by none of its arguments as {{{name}}}")
        for key in named:
            kwargs[key] = kwargs[key].replace(f"{{{name}}}", repr(value))


def _check_proof(exp: dict[str, Any], where: str) -> None:
    """meta.proven_by names the parser that proves the rule itself, and for a rule with a query
    the column of its rows true where the query could return the row."""
    proof = (exp.get("meta") or {}).get("proven_by")
    if proof is None:
        return
    if not isinstance(proof, dict) or not isinstance(proof.get("parser"), str) or set(proof) - {"parser", "column"}:
        raise TracelakeError(f"{where}: meta.proven_by must be {{\"parser\": name[, \"column\": name]}}, got {proof!r}")
    column = proof.get("column")
    if exp["type"] == "unexpected_rows_expectation" and column is None:
        raise TracelakeError(f"{where}: a rule with a query is proven by a column: meta.proven_by.column")
    if column is not None and not str(column).startswith(RESERVED_PREFIX):
        raise TracelakeError(f"{where}: meta.proven_by.column {column!r} must start with {RESERVED_PREFIX}")


def proofs(suite: dict[str, Any], parser: str) -> dict[str, str | None]:
    """The rules of `suite` the parser named `parser` proves (meta.proven_by), by id: the column of
    its rows true where the rule's query could return the row, or None for a row rule that no row
    of its fast parse can fail."""
    return {expectation_id(e): e["meta"]["proven_by"].get("column") for e in suite.get("expectations", [])
            if parser and (e["meta"].get("proven_by") or {}).get("parser") == parser}


def limits_proven_by(suite: dict[str, Any], parser: str) -> dict[str, float]:
    """The thresholds (meta.limits) of the rules of `suite` that `parser` proves: what its checks
    must hold the rows to."""
    chosen = proofs(suite, parser)
    return {name: value for e in suite.get("expectations", []) if expectation_id(e) in chosen
            for name, value in (e["meta"].get("limits") or {}).items()}


class _GxRunner:
    """One ephemeral GX context per process; a fresh validation per (suite, severity group)."""

    def __init__(self) -> None:
        import great_expectations as gx

        self._gx = gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self._context = gx.get_context(mode="ephemeral")
        self._context.variables.progress_bars = ProgressBarsConfig(
            globally=False, metric_calculations=False
        )
        source = self._context.data_sources.add_spark("tracelake")
        self._batch = source.add_dataframe_asset("frame").add_batch_definition_whole_dataframe("all")
        self._count = 0

    def run(self, df: DataFrame, expectations: list[dict], result_format: dict) -> list[Any]:
        from great_expectations.core import ExpectationSuite

        self._count += 1
        name = f"suite_{self._count}"
        suite = self._context.suites.add(ExpectationSuite(name=name, expectations=expectations))
        definition = self._context.validation_definitions.add(
            self._gx.ValidationDefinition(name=name, data=self._batch, suite=suite)
        )
        try:
            result = definition.run(batch_parameters={"dataframe": df}, result_format=result_format)
        finally:
            self._context.validation_definitions.delete(name)
            self._context.suites.delete(name)
        return list(result.results)


_GX_LOCK = threading.Lock()  # tables may be prepared in threads (run.alongside)


@lru_cache(maxsize=1)
def _runner() -> _GxRunner:
    return _GxRunner()


def _observed(result: dict[str, Any]) -> str | None:
    if "observed_value" not in result:
        return None
    value = result["observed_value"]
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _raised(info: dict[str, Any] | None) -> str | None:
    """The error an expectation ran into, if any. GX reports it at the top level, or nested per
    metric (a failing unexpected_rows query): a rule that could not run must not read as a
    failed rule with no counts."""
    if not info:
        return None
    entries = [info] + [v for v in info.values() if isinstance(v, dict)]
    for entry in entries:
        if entry.get("raised_exception"):
            return str(entry.get("exception_message") or "unknown error").splitlines()[0][:500]
    return None


def _to_rule_result(raw: Any, by_id: dict[str, dict]) -> tuple[RuleResult, dict]:
    config = raw.expectation_config
    exp = {"type": config.type, "kwargs": dict(config.kwargs), "meta": dict(config.meta or {})}
    ident = expectation_id(exp)
    severity = by_id[ident]["meta"]["severity"]
    failure = _raised(raw.exception_info)
    if failure is not None:
        raise TracelakeError(f"expectation {ident} could not run: {failure}")
    result = dict(raw.result or {})
    if config.type == "unexpected_rows_expectation" and isinstance(result.get("observed_value"), int):
        result.setdefault("unexpected_count", result["observed_value"])  # rows the query returned
    kwargs = {k: v for k, v in exp["kwargs"].items() if k not in ("batch_id", "result_format")}
    percent = result.get("unexpected_percent")
    return (
        RuleResult(
            expectation_id=ident,
            expectation=config.type,
            kwargs_json=json.dumps(kwargs, sort_keys=True, default=str),
            severity=severity,
            success=bool(raw.success),
            element_count=result.get("element_count"),
            unexpected_count=result.get("unexpected_count"),
            unexpected_percent=None if percent is None else float(percent),
            observed_value=_observed(result),
            counts=by_id[ident]["meta"].get("counts", "rows"),
        ),
        result,
    )


def _with_rate(rule: RuleResult, total: int) -> RuleResult:
    percent = rule.unexpected_count / total * 100 if total else None
    return replace(rule, element_count=total, unexpected_percent=percent)


def _kwargs_json(expectation: dict[str, Any]) -> str:
    kwargs = {k: v for k, v in (expectation.get("kwargs") or {}).items() if k not in ("batch_id", "result_format")}
    return json.dumps(kwargs, sort_keys=True, default=str)


def _result(ident: str, exp: dict, success: bool, element: int | None = None, unexpected: int | None = None,
            percent: float | None = None, observed: str | None = None) -> RuleResult:
    return RuleResult(ident, exp["type"], _kwargs_json(exp), exp["meta"]["severity"], success,
                      element, unexpected, percent, observed, exp["meta"].get("counts", "rows"))


def _evaluate(
    df: DataFrame, rules: dict[str, dict], flagged: Mapping[str, str], cleared: Collection[str] = (),
    settled: Collection[str] = (), rows: int | None = None, narrowed: Mapping[str, DataFrame] | None = None,
) -> tuple[list[RuleResult], dict[str, Column], int]:
    """GX's SUMMARY results for the rules rowrules evaluates: every map rule's element, missing
    and unexpected counts in one scan (window columns projected first), one query per
    unexpected_rows rule; plus, per quarantine rule that failed rows, its reject column. When
    `rows` (df's row count) is known and every map rule is `settled` (see run_gate), the scan
    is not needed: each such rule saw every row, none missing, none unexpected."""
    maps = {i: e for i, e in rules.items() if e["type"] not in TABLE_RULES}
    rejected = {i: F.col(flagged[i]) if i in flagged else rejects(e) for i, e in maps.items()}
    if rows is not None and all(i in settled and not e.get("kwargs", {}).get("row_condition") for i, e in maps.items()):
        counts = [rows, *[rows if k % 3 == 0 else 0 for k in range(3 * len(maps))]]
    else:
        measures = []
        for n, (ident, exp) in enumerate(maps.items()):
            domain = in_domain(exp)
            measures += [domain.cast("int").alias(f"_e{n}"), (domain & missing(exp)).cast("int").alias(f"_m{n}"),
                         F.coalesce(rejected[ident], F.lit(False)).cast("int").alias(f"_u{n}")]
        sums = [F.coalesce(F.sum(c), F.lit(0)) for n in range(len(maps)) for c in (f"_e{n}", f"_m{n}", f"_u{n}")]
        counts = (df.select(*measures) if measures else df).agg(F.count(F.lit(1)), *sums).first()
    total = int(counts[0])
    results, rejected_by = [], {}
    for n, (ident, exp) in enumerate(maps.items()):
        element, missed, unexpected = (int(v) for v in counts[1 + 3 * n: 4 + 3 * n])
        success, count, percent = map_summary(exp, element, missed, unexpected)
        results.append(_result(ident, exp, success, element, count, percent))
        if unexpected and exp["meta"]["severity"] == "quarantine":
            rejected_by[ident] = rejected[ident]
    for ident, exp in rules.items():
        if exp["type"] == "expect_table_row_count_to_be_between":
            results.append(_result(ident, exp, row_count_success(exp, total), observed=json.dumps(total)))
        elif exp["type"] == "unexpected_rows_expectation":
            found = 0 if ident in cleared else _query_rows((narrowed or {}).get(ident, df), ident,
                                                           exp["kwargs"]["unexpected_rows_query"])
            percent = found / total * 100 if total else None
            results.append(_result(ident, exp, found == 0, total, found, percent, json.dumps(found)))
    return results, rejected_by, total


def _query_rows(df: DataFrame, ident: str, query: str) -> int:
    """Rows an unexpected_rows_query returns, with {batch} standing for `df` (as in GX)."""
    view = f"tracelake_batch_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(view)
    try:
        return df.sparkSession.sql(query.replace("{batch}", view)).count()
    except Exception as exc:  # noqa: BLE001 - any engine error: the rule could not run
        message = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else type(exc).__name__
        raise TracelakeError(f"expectation {ident} could not run: {message}") from exc
    finally:
        df.sparkSession.catalog.dropTempView(view)


def cleared_beside(spark: SparkSession, files: str | Path | Scratch, rows: DataFrame | None, suite: dict[str, Any],
                   parser: str, columns: list[str]) -> tuple[set[str], dict[str, DataFrame]]:
    """The unexpected_rows rules that the parser named `parser`, which staged the Parquet files at
    `files`, proves (proofs: a boolean column of the files, true on a row the rule's query could
    return) and that no row fails: the files' footers show no row true, and the query returns
    nothing from `rows` (the rows computed beside the files; None: none). run_gate's `cleared`
    for a derived table whose rows are mostly files staged earlier in the run, so the rule's
    query is run over the few rows computed now instead of every row (delta.commit.StagedBeside);
    with run_gate's `narrowed` for the others (where_rules_can_fail, the gate's `columns`)."""
    by_id = {expectation_id(e): e for e in suite.get("expectations", [])}
    asked = {i: c for i, c in proofs(suite, parser).items()
             if c is not None and by_id[i]["type"] == "unexpected_rows_expectation"}
    footers = staged_footers(files, asked.values()) if asked else None
    if footers is None:
        return set(), {}
    cleared = cleared_with(asked, footers.true, rows, suite)
    return cleared, where_rules_can_fail(spark, asked, cleared, footers, rows, columns)


def where_rules_can_fail(spark: SparkSession, checked: Mapping[str, str], cleared: Collection[str],
                         footers: Footers, beside: DataFrame | None, columns: list[str]) -> dict[str, DataFrame]:
    """run_gate's `narrowed`: the only rows each rule a parse checked (`checked`: id -> its column,
    true on a row the rule's query could return) can fail, where that is fewer than every row:
    the staged files whose footers find its column true, and the rows `beside` them, which the
    proof does not cover, as `columns`. A file whose column is true nowhere holds no row the
    query returns, so one AcmeTrace file with a bad-window column does not make the query read
    a whole month. A rule is left out (its query reads every row) where the files lack one of
    `columns`."""
    narrowed = {}
    for ident, column in checked.items():
        files = footers.true_in.get(column, ())
        if ident in cleared or len(files) == footers.files:
            continue
        parts = [] if beside is None else [beside.select(*columns)]
        if files:
            read = spark.read.parquet(*files)
            if not set(columns) <= set(read.columns):
                continue
            parts.insert(0, read.select(*columns))
        narrowed[ident] = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return narrowed


def cleared_with(checked: Mapping[str, str], true: Collection[str], rows: DataFrame | None,
                 suite: dict[str, Any]) -> set[str]:
    """Of the unexpected_rows rules `checked` (id -> the column of staged files that proves it),
    those whose column is true on no row of the files (`true`: the columns their footers found
    true on some row) and whose query returns nothing from `rows`, computed beside the files
    (None: none)."""
    by_id = {expectation_id(e): e for e in suite.get("expectations", [])}
    return {ident for ident, column in checked.items() if column not in true
            and by_id[ident]["type"] == "unexpected_rows_expectation"
            and (rows is None or _query_rows(rows, ident, by_id[ident]["kwargs"]["unexpected_rows_query"]) == 0)}


def run_gate(
    df: DataFrame, suite: dict[str, Any], row_id_column: str | None, flagged: Mapping[str, str] | None = None,
    cleared: Collection[str] = (), settled: Collection[str] = (), rows: int | None = None,
    narrowed: Mapping[str, DataFrame] | None = None,
) -> GateOutcome:
    """Validate `df` against the suite. The rule types tracelake.quality.rowrules covers are evaluated
    here (one scan for all row rules, one query per unexpected_rows rule); GX validates any
    other type, and names the rows of such a quarantine rule by `row_id_column`. `flagged` maps
    a quarantine rule's id to a column of `df` that already holds its rejects (computed as the
    rows were staged), which is then summed instead of evaluated again. `cleared` names
    unexpected_rows rules the parse already checked for every row and found nothing for
    (meta.proven_by with a column): recorded as passed, with the figures their query would give,
    without running it; `narrowed` maps such a rule that some rows may fail to the only rows of
    `df` its query can return (the staged files its column is true in, and the rows parsed beside
    them), which its query then reads instead of `df`. `rows` is df's row count where it is known
    without a scan (the bronze step counted it; a staged partition's footers give it). `settled`
    names map rules the parse proved on every row of `df`: none of their columns is missing and
    none is rejected (meta.proven_by without one). With `rows` and every map rule settled (or
    none), the scan for the map rules and the row count is not run."""
    expectations = suite.get("expectations", [])
    by_id = {expectation_id(e): e for e in expectations}
    for ident, exp in by_id.items():
        if exp["meta"]["severity"] == "quarantine" and exp["type"] in TABLE_RULES:
            raise TracelakeError(
                f"expectation {ident} is not row-level and cannot quarantine rows: give it severity warning or critical"
            )
    ours = {i: e for i, e in by_id.items() if evaluates(e)}
    results, rejected_by, total = _evaluate(df, ours, flagged or {}, cleared, settled, rows, narrowed)
    quarantined: dict[str, list[str]] = {}
    others = [e for i, e in by_id.items() if i not in ours]
    if others:
        results += _gx_results(df, others, by_id, row_id_column, quarantined)
    order = {ident: i for i, ident in enumerate(by_id)}
    results.sort(key=lambda r: order[r.expectation_id])
    if any(r.unexpected_count is not None and r.element_count is None for r in results):
        total = df.count()
        results = [_with_rate(r, total) if r.element_count is None and r.unexpected_count is not None
                   else r for r in results]
    return GateOutcome(results=results, quarantined=quarantined, rejected_by=rejected_by, rows=total)


def _gx_results(
    df: DataFrame, expectations: list[dict], by_id: dict[str, dict], row_id_column: str | None,
    quarantined: dict[str, list[str]],
) -> list[RuleResult]:
    """Results of the rule types only GX evaluates; the rows a quarantine rule of such a type
    fails are added to `quarantined` by id (brought to the driver: keep such rules rare)."""
    with _GX_LOCK:  # one ephemeral context per process: its suites are added and deleted by name
        results: list[RuleResult] = []
        runner = _runner()
        summary = [e for e in expectations if e["meta"]["severity"] != "quarantine"]
        if summary:
            results += [_to_rule_result(raw, by_id)[0] for raw in runner.run(df, summary, {"result_format": "SUMMARY"})]
        by_rows = [e for e in expectations if e["meta"]["severity"] == "quarantine"]
        if by_rows:
            if row_id_column is None:
                raise TracelakeError("quarantine rules of types the gate does not evaluate need a row id column")
            fmt = {"result_format": "COMPLETE", "unexpected_index_column_names": [row_id_column]}
            for raw in runner.run(df, by_rows, fmt):
                rule, result = _to_rule_result(raw, by_id)
                results.append(rule)
                if rule.success and not rule.unexpected_count:
                    continue
                if "unexpected_index_list" not in result:
                    raise TracelakeError(
                        f"expectation {rule.expectation_id} is not row-level and cannot quarantine "
                        "rows: give it severity warning or critical"
                    )
                for item in result["unexpected_index_list"]:
                    quarantined.setdefault(item[row_id_column], []).append(rule.expectation_id)
    return results
