"""The silver and gold tables follow docs/naming.md, and its table of renames is the schema
files' `formerly`."""

from __future__ import annotations

import re
from pathlib import Path

from tracelake.schema import table_schema

REPO = Path(__file__).resolve().parents[1]
DERIVED = [table_schema(p.stem) for p in sorted((REPO / "schemas").glob("*.yaml"))
           if p.stem.split(".")[0] in ("silver", "gold")]
# the release's spellings of the switch, the port, the host and the hour, which bronze alone keeps
RELEASE_SPELLINGS = {"switchname", "switch", "accessport", "access_port", "sysname", "switch_ip",
                     "start_hour_cst", "ip", "time", "dst_device", "dst_port"}
# silver.zj_port_rates shares bronze.zj_port_counters' data files, and with them their names
SHARED_WITH_BRONZE = {("silver.zj_port_rates", "save_time_utc"), ("silver.zj_port_rates", "interval_start_utc")}


def test_every_instant_of_silver_and_gold_is_named_event_ts():
    odd = [(s.full_name, c.name) for s in DERIVED for c in s.columns
           if c.type == "timestamp" and not c.name.endswith("_ts")]
    assert sorted(odd) == sorted(SHARED_WITH_BRONZE)


def test_no_silver_or_gold_column_uses_a_release_spelling():
    assert [(s.full_name, c.name) for s in DERIVED for c in s.columns
            if c.name in RELEASE_SPELLINGS or c.name.startswith("suspect_") and c.name.endswith(("_switch", "_port"))] == []


def test_an_hour_partition_is_hour_cst():
    assert sorted({p for s in DERIVED for p in s.partition_by}) == ["hour_cst", "task_id"]


def test_a_device_name_is_a_switch_and_a_host_is_host_name():
    """device_name holds a switch in every derived table; the NIC counters' DeviceName (a host) is host_name."""
    hosts = [(s.full_name, c.name) for s in DERIVED for c in s.columns
             if c.name.endswith("device_name") and re.search(r"\b(server|host)", c.description, re.I)]
    assert hosts == []
    assert table_schema("silver.zj_nic_rates").column("host_name").formerly == ("device_name",)


def test_the_docs_table_of_renames_is_the_schema_files():
    text = (REPO / "docs" / "naming.md").read_text(encoding="utf-8")
    documented = {}
    for tables, renames in re.findall(r"^\| (`[a-z]+\.[a-z_]+`(?:, `[a-z]+\.[a-z_]+`)*) \| ([^|]+?) \|$", text, re.M):
        pairs = sorted(tuple(p.split(" -> ")) for p in re.findall(r"\w+ -> \w+", renames))
        for table in re.findall(r"`([a-z]+\.[a-z_]+)`", tables):
            documented[table] = pairs
    declared = {s.full_name: sorted((old, c.name) for c in s.columns for old in c.formerly)
                for s in DERIVED if any(c.formerly for c in s.columns)}
    assert documented == declared


def test_the_tables_page_lists_every_table_with_its_key_and_partitioning():
    text = (REPO / "docs" / "tables.md").read_text(encoding="utf-8")
    listed = {name: (keys, parts) for name, keys, parts in
              re.findall(r"^\| `([a-z]+\.[a-z_]+)` \| ([^|]*) \| ([^|]*) \|", text, re.M)}
    declared = {}
    for path in sorted((REPO / "schemas").glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        schema = table_schema(path.stem)
        declared[schema.full_name] = (", ".join(schema.keys), ", ".join(schema.partition_by) or "–")
    assert listed == declared
