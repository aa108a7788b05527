"""The columns a run stages beside a table's own carry schema.RESERVED_PREFIX, which no schema may
use: staged files can be a table's data files, read by the table's schema, so a column a schema
gains later can never read a staged value that was not the table's."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import make_config

from tracelake.errors import TracelakeError
from tracelake.quality.gate import load_suite
from tracelake.quality.split import row_flags, staged_form
from tracelake.run.pipeline import run_ingest
from tracelake.run.registry import generate
from tracelake.schema import RESERVED_PREFIX, all_table_names, load_schema, parse_schema
from tracelake.sources.zhejiang.ports import RATES_TABLE, TABLE, filepass

# the columns bronze.zj_port_counters and silver.zj_port_rates both read from the files they share
# (the pass's staged files, linked into both tables): their values are the same in both
SHARED_WITH_RATES = {"hour_cst", "device_name", "port_name", "save_time_utc", "in_pkts", "in_octets", "out_pkts",
                     "out_octets"}


def _hidden(names, *tables: str) -> list[str]:
    """The names that are no column of `tables` and lack the reserved prefix."""
    own = {c.name for t in tables for c in load_schema(t).columns}
    return sorted(n for n in names if n not in own and not n.startswith(RESERVED_PREFIX))


@pytest.mark.portable
def test_a_schema_may_not_name_a_column_with_the_reserved_prefix():
    data = {"table": "x", "layer": "silver", "columns": [{"name": f"{RESERVED_PREFIX}verdict", "type": "string",
                                                           "description": "d"}]}
    with pytest.raises(TracelakeError, match=RESERVED_PREFIX):
        parse_schema(data, "x.yaml")
    assert all(not c.name.startswith(RESERVED_PREFIX) for t in all_table_names() for c in load_schema(t).columns)


@pytest.mark.portable
def test_the_port_pass_stages_only_its_two_tables_columns_and_reserved_ones():
    assert _hidden(filepass.YIELDED.names, TABLE, RATES_TABLE) == ["line_number"]  # dropped by the parser's projection
    bronze, rates = ({c.name for c in load_schema(t).columns} for t in (TABLE, RATES_TABLE))
    assert bronze & rates == SHARED_WITH_RATES, "a column both tables read from one file must hold one value"


@pytest.mark.portable
def test_the_staged_form_adds_only_reserved_columns(spark):
    schema = load_schema("bronze.zj_flow")
    flags, by_gx = row_flags(load_suite(schema.full_name))
    parse = spark.createDataFrame([], ", ".join(
        [*(f"`{c.name}` {c.type}" for c in schema.data_columns), "source_file string", "raw_line string",
         "raw_values_json string", f"{RESERVED_PREFIX}row_id string", f"{RESERVED_PREFIX}parse_errors array<string>"]))
    for row_ids in (False, True):
        assert _hidden(staged_form(parse, schema, flags, row_ids).columns, schema.full_name) == []


@pytest.mark.portable
def test_every_staged_file_a_table_took_holds_its_columns_and_reserved_ones(engine, tmp_path):
    raw = tmp_path / "raw"
    generate("zhejiang", raw, scale=0.01, seed=11, hours=1, tasks=1)
    config = make_config(tmp_path / "lake")
    run_ingest(engine, config, "zhejiang", str(raw))
    seen, staged = 0, 0
    for table in [t for t in all_table_names() if t.startswith(("bronze.zj_", "silver.zj_", "gold.zj_"))]:
        folder = Path(config.table_path(*table.split(".")))
        shares = (TABLE, RATES_TABLE) if table in (TABLE, RATES_TABLE) else (table,)
        for data in folder.rglob("*.parquet"):
            names = pq.read_schema(data).names
            seen += 1
            staged += any(n.startswith(RESERVED_PREFIX) for n in names)
            assert _hidden(names, *shares) == [], data
    assert seen and (staged or config.profile != "local")  # the local profile commits staged files as they lie
