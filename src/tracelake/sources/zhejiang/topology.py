"""Zhejiang cluster_2000_A100.xlsx: sheets `cluster topology` and `GPU NIC info` → bronze, and
the per-NIC join of both → silver.zj_nic_map.

The workbook (80 KB) is read at the edge with python-calamine and its rows are handed to the
common parse_lines contract as comma-joined lines, so typing, null handling, row ids and
quarantine work exactly as for delimited files. A cell holding a comma would show up as a wrong
field count (quarantined with its raw line), never as a silently shifted row.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tracelake.api.contract import TableInput, derived
from tracelake.errors import TracelakeError
from tracelake.io.parse import parse_lines
from tracelake.io.text import RawFile, regular_file
from tracelake.schema import TableSchema
from tracelake.sources.zhejiang.transforms.topology import nic_map

WORKBOOK = "cluster_2000_A100.xlsx"
SHEETS = {"cluster topology": "bronze.zj_topology", "GPU NIC info": "bronze.zj_gpu_nic"}


def _cell_text(value: object) -> str:
    """Every real cell is text; a number written by another tool reads back as its digits."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def read_sheet(path: str, sheet: str) -> list[list[str]]:
    """All rows of one sheet as text cells, header first."""
    from python_calamine import CalamineWorkbook

    try:
        workbook = CalamineWorkbook.from_path(path)
    except Exception as exc:  # noqa: BLE001 - calamine raises its own error types
        raise TracelakeError(f"{Path(path).name}: not a readable xlsx workbook ({exc})") from exc
    if sheet not in workbook.sheet_names:
        raise TracelakeError(f"{Path(path).name}: no sheet '{sheet}' (sheets: {workbook.sheet_names})")
    return [[_cell_text(c) for c in row] for row in workbook.get_sheet_by_name(sheet).to_python()]


def parse_sheet(spark: SparkSession, files: list[RawFile], schema: TableSchema) -> DataFrame:
    """Parser for one workbook sheet: header check, then parse_lines on the comma-joined rows."""
    rows = []
    for raw in files:
        cells = read_sheet(raw.path, raw.constants["sheet"])
        header = tuple(cells[0]) if cells else ()
        if header != schema.raw_header:
            raise TracelakeError(
                f"{raw.name}: header {list(header)} does not match {schema.full_name}'s "
                f"documented header {list(schema.raw_header)}"
            )
        for number, row in enumerate(cells[1:], start=2):
            rows.append((raw.name, schema.delimiter.join(row), number))
    lines = spark.createDataFrame(rows, "source_file string, raw_line string, sheet_row int")
    return parse_lines(lines, schema)


def plan(raw_dir: Path, staging: Path) -> list[TableInput]:
    """Both sheets when the workbook is in raw_dir; [] otherwise."""
    path = raw_dir / WORKBOOK
    if not os.path.lexists(path):
        return []
    regular_file(path, WORKBOOK)
    return [
        TableInput(table, [RawFile(str(path), f"{WORKBOOK}!{sheet}", {"sheet": sheet})], parse_sheet,
                   driver_reads=True)
        for sheet, table in SHEETS.items()
    ]


DERIVED = [derived("silver.zj_nic_map", nic_map, ("bronze.zj_topology", "bronze.zj_gpu_nic"))]
