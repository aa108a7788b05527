"""Workbooks: read any sheet with python-calamine; write a minimal OOXML workbook ourselves.

openpyxl is not a dependency, and the generator needs only plain sheets: a zip with the
workbook, one worksheet per sheet, and a shared-strings part (the real topology workbook stores
every cell as a shared string too). Numbers may be written as numeric cells to mimic an export.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

from tracelake.errors import TracelakeError

Cell = str | int | float | None
_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
_CT = "http://schemas.openxmlformats.org/package/2006/content-types"
_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'


def read_sheets(path: Path) -> dict[str, list[list[object]]]:
    """Every sheet as rows of python values (str, float, int, datetime, ...), by sheet name."""
    from python_calamine import CalamineWorkbook

    try:
        book = CalamineWorkbook.from_path(str(path))
        return {name: book.get_sheet_by_name(name).to_python() for name in book.sheet_names}
    except Exception as exc:  # noqa: BLE001 - calamine raises several types for broken files
        raise TracelakeError(f"{path.name}: not a readable workbook ({exc})") from exc


def _column_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


def _sheet_xml(rows: list[list[Cell]], strings: dict[str, int]) -> str:
    out = [_XML, f'<worksheet xmlns="{_NS}"><sheetData>']
    for r, row in enumerate(rows, start=1):
        cells = []
        for c, value in enumerate(row):
            ref = f"{_column_letter(c)}{r}"
            if value is None or value == "":
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                cells.append(f'<c r="{ref}"><v>{value!r}</v></c>')
            else:
                idx = strings.setdefault(str(value), len(strings))
                cells.append(f'<c r="{ref}" t="s"><v>{idx}</v></c>')
        out.append(f'<row r="{r}">{"".join(cells)}</row>')
    out.append("</sheetData></worksheet>")
    return "".join(out)


def write_workbook(path: Path, sheets: dict[str, list[list[Cell]]]) -> Path:
    """Write sheets (name -> rows, first row the header) as an .xlsx file."""
    strings: dict[str, int] = {}
    bodies = [_sheet_xml(rows, strings) for rows in sheets.values()]
    names = list(sheets)
    shared = "".join(f"<si><t xml:space=\"preserve\">{escape(s)}</t></si>" for s in strings)
    workbook = (
        f'{_XML}<workbook xmlns="{_NS}" xmlns:r="{_REL}"><sheets>'
        + "".join(
            f'<sheet name="{escape(n, {chr(34): "&quot;"})}" sheetId="{i}" r:id="rId{i}"/>'
            for i, n in enumerate(names, start=1)
        )
        + "</sheets></workbook>"
    )
    n = len(names)
    rels = (
        f'{_XML}<Relationships xmlns="{_PKG}">'
        + "".join(
            f'<Relationship Id="rId{i}" Type="{_REL}/worksheet" Target="worksheets/sheet{i}.xml"/>'
            for i in range(1, n + 1)
        )
        + f'<Relationship Id="rId{n + 1}" Type="{_REL}/sharedStrings" Target="sharedStrings.xml"/>'
        + "</Relationships>"
    )
    sheet_type = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
    types = (
        f'{_XML}<Types xmlns="{_CT}">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        + "".join(
            f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="{sheet_type}"/>'
            for i in range(1, n + 1)
        )
        + '<Override PartName="/xl/sharedStrings.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
        "</Types>"
    )
    root_rels = (
        f'{_XML}<Relationships xmlns="{_PKG}"><Relationship Id="rId1" '
        f'Type="{_REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in [
            ("[Content_Types].xml", types), ("_rels/.rels", root_rels),
            ("xl/workbook.xml", workbook), ("xl/_rels/workbook.xml.rels", rels),
            ("xl/sharedStrings.xml",
             f'{_XML}<sst xmlns="{_NS}" count="{len(strings)}" uniqueCount="{len(strings)}">{shared}</sst>'),
        ]:
            zf.writestr(name, text)
        for i, body in enumerate(bodies, start=1):
            zf.writestr(f"xl/worksheets/sheet{i}.xml", body)
    return path
