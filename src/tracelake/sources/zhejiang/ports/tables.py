"""The table plan of the port counters: bronze.zj_port_counters from the port files of each hour
(files.py, parsed by parser.py), and silver.zj_port_rates derived from it (window.port_rates,
rebuilt an hour at a time by rebuild.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tracelake.api.contract import TableInput, derived
from tracelake.sources.zhejiang.ports import RATES_TABLE, TABLE
from tracelake.sources.zhejiang.ports.files import find_port_files
from tracelake.sources.zhejiang.ports.parser import PortParser
from tracelake.sources.zhejiang.ports.rebuild import rebuild_rates
from tracelake.sources.zhejiang.ports.window import port_rates


def plan(raw_dir: Path, staging: Path, hours: tuple[str, ...] | None = None) -> list[TableInput]:
    files = find_port_files(raw_dir, hours)
    return [TableInput(TABLE, files, PortParser())] if files else []


DERIVED = [replace(derived(RATES_TABLE, port_rates, (TABLE,)), rebuild=rebuild_rates)]
