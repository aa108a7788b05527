"""The contract for a parser that proves rules itself (api.contract.Parser, io.staging.FastParse):
the kernel gives a parser the lake and the run's scratch only where it says it needs them; the
suite says which rules a parser proves (meta.proven_by) and states their thresholds once
(meta.limits); a pass that does not hold is finished by its parser's remainder."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tracelake.api.contract import FastParse, Parser, limits_proven_by
from tracelake.errors import TracelakeError
from tracelake.io.parse import EXACT, KEPT, PARSE_ERRORS, VERDICT
from tracelake.io.staging import Scratch, Sink
from tracelake.io.text import RawFile
from tracelake.quality.gate import load_suite, proofs
from tracelake.run.parsing import call_parser, settle_parse
from tracelake.schema import load_schema
from tracelake.sources.acme.utilization import UtilizationParser
from tracelake.sources.zhejiang.ports import RATES_TABLE, TABLE, filepass
from tracelake.sources.zhejiang.ports.parser import PortParser


class _Asking(Parser):
    """Says what it was given."""

    needs_scratch = True

    def parse(self, spark, files, schema, *, lake=None, scratch=None):
        return lake, scratch


@pytest.mark.portable
def test_a_parser_gets_the_lake_and_the_scratch_only_where_it_says_it_needs_them(config):
    scratch = Scratch("s3://bucket/lake/_staging/run/scratch")
    schema = load_schema(TABLE)
    assert call_parser(None, _Asking(), [], schema, config, scratch) == (None, scratch)
    lake_too = type("LakeToo", (_Asking,), {"needs_lake": True})
    assert call_parser(None, lake_too(), [], schema, config, scratch) == (config, scratch)
    assert call_parser(None, lambda spark, files, s: "plain", [], schema, config, scratch) == "plain"
    sink = Sink(Scratch("s3://bucket/lake/_staging/run/scratch/x-written"), {"ingest_run_id": "r"})
    writing = type("Writing", (_Asking,), {"needs_sink": True, "parse": lambda self, spark, files, schema, *, lake=None,
                                           scratch=None, sink=None: (lake, scratch, sink)})
    assert call_parser(None, writing(), [], schema, config, scratch, sink) == (None, scratch, sink)
    assert call_parser(None, _Asking(), [], schema, config, scratch, sink) == (None, scratch)


def test_a_fast_parse_is_data_and_a_parser_declares_its_needs():
    assert all(not callable(getattr(FastParse, f.name, None)) for f in dataclasses.fields(FastParse))
    assert {f.name for f in dataclasses.fields(FastParse)} == {"frame", "apart", "clean", "needs_raw", "alone", "written"}
    assert (PortParser.needs_lake, PortParser.needs_scratch, PortParser.needs_sink) == (True, True, True)
    assert (UtilizationParser.needs_lake, UtilizationParser.needs_scratch, UtilizationParser.needs_sink) == \
        (False, True, True)


def test_the_suites_say_what_the_port_pass_proves_with_columns_it_yields():
    counters = proofs(load_suite(TABLE), PortParser.name)
    rates = proofs(load_suite(RATES_TABLE), PortParser.name)
    assert sorted(counters) == ["device_matches_folder", "port_matches_file_name", "port_sample_unique",
                                "samples_in_hour_folder", "save_time_matches_utc"]
    assert sorted(rates) == ["rates_within_line_rate"]
    columns = [c for c in (*counters.values(), *rates.values()) if c is not None]
    assert len(columns) == 4 and set(columns) <= set(filepass.OUTPUT.names)
    assert limits_proven_by(RATES_TABLE, PortParser.name) == {"max_util": 1.05}


def _suite(tmp_path, meta: dict, query: str = "SELECT * FROM {batch} WHERE n > {most}") -> dict:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "bronze.x.json").write_text(json.dumps({"name": "bronze.x", "expectations": [
        {"type": "unexpected_rows_expectation", "kwargs": {"unexpected_rows_query": query},
         "meta": {"severity": "warning", "id": "r", **meta}}]}))
    return load_suite("bronze.x", tmp_path)


def test_a_limit_is_written_into_its_rule_and_a_proof_is_checked(tmp_path):
    suite = _suite(tmp_path / "a", {"limits": {"most": 2.5}, "proven_by": {"parser": "p", "column": "_tl_r"}})
    assert suite["expectations"][0]["kwargs"]["unexpected_rows_query"] == "SELECT * FROM {batch} WHERE n > 2.5"
    assert proofs(suite, "p") == {"r": "_tl_r"} and proofs(suite, "other") == {}
    for where, meta, match in (("b", {"limits": {"least": 1}}, "named by none"),
                               ("c", {"limits": {"most": "2"}}, "must be a number"),
                               ("d", {"proven_by": {"parser": "p"}}, "proven by a column"),
                               ("e", {"proven_by": {"parser": "p", "column": "r"}}, "must start with"),
                               ("f", {"proven_by": "p"}, "proven_by must be")):
        with pytest.raises(TracelakeError, match=match):
            _suite(tmp_path / where, meta)


@pytest.mark.portable
def test_a_pass_that_does_not_hold_keeps_its_rows_and_parses_the_marked_files_again(spark, tmp_path):
    class Marked(Parser):
        name = "marked"

        def parse(self, spark, files, schema, *, lake=None, scratch=None):
            rows = [("a.csv", [], KEPT), ("b.csv", ["file parsed line by line"], EXACT)]
            return FastParse(spark.createDataFrame(rows, f"source_file string, {PARSE_ERRORS} array<string>, "
                                                         f"{VERDICT} tinyint"))

        def exact(self, spark, files, schema, *, scratch=None):
            return spark.createDataFrame([(f.name, [], KEPT) for f in files for _ in range(2)],
                                         f"source_file string, {PARSE_ERRORS} array<string>, {VERDICT} tinyint")

    files = [RawFile("/nowhere/a.csv", "a.csv"), RawFile("/nowhere/b.csv", "b.csv")]
    staged = settle_parse(spark, Marked(), files, load_schema(TABLE), Scratch(str(tmp_path / "p.parquet")),
                          suite={"expectations": []})
    assert not staged.held and not staged.whole
    assert sorted(r.source_file for r in staged.rows.collect()) == ["a.csv", "b.csv", "b.csv"]


def test_a_sink_is_given_only_where_the_pass_proves_every_quarantine_rule(tmp_path):
    """A row a pass writes itself cannot be set aside later: the kernel gives a sink (with the
    staged form's constant columns: the run's lineage and each quarantine rule's flag, false)
    only where the suite says the pass proves every quarantine rule and none needs GX."""
    from tracelake.run.parsing import _sink

    rules = {"_tl_q0": {"meta": {"id": "port_matches_file_name"}}, "_tl_q1": {"meta": {"id": "device_matches_folder"}}}
    lineage = {"ingest_run_id": "run-1"}
    sink = _sink(tmp_path / "t.parquet", lineage, rules, False, {"port_matches_file_name": None,
                                                                 "device_matches_folder": None})
    assert sink == Sink(Scratch(str(tmp_path / "t.parquet-written")),
                        {"ingest_run_id": "run-1", "_tl_q0": False, "_tl_q1": False})
    assert _sink(tmp_path / "t.parquet", lineage, rules, False, {"port_matches_file_name": None}) is None
    assert _sink(tmp_path / "t.parquet", lineage, {}, True, {}) is None  # a rule only GX evaluates
    assert _sink(tmp_path / "t.parquet", lineage, {}, False, {}) == Sink(
        Scratch(str(tmp_path / "t.parquet-written")), lineage)
