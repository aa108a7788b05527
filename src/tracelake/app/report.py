"""`tracelake report --out DIR`: figures and tables as PNG + one HTML page.

Each source's `report` module and the cross-trace one (named in their declarations, found by
tracelake.run.registry) has render(engine, config, out_dir: Path) -> api.section.Section | None
(None when the lake lacks its tables). build_report runs them all and writes index.html.
"""

from __future__ import annotations

import html
from pathlib import Path

from tracelake.api.section import Section
from tracelake.run.registry import report_modules


def _page(sections: list[Section], out: Path) -> str:
    parts = ["<!doctype html><meta charset='utf-8'><title>tracelake report</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:2px 6px;"
             "text-align:right}img{max-width:100%}</style>", "<h1>tracelake report</h1>"]
    if not sections:
        parts.append("<p>No report sections have data yet: ingest a source first.</p>")
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [f"<p>{html.escape(n)}</p>" for n in section.notes]
        parts += [f"<img src='{html.escape(str(p.relative_to(out)))}' alt='{html.escape(p.stem)}'>"
                  for p in section.figures]
        parts += section.tables_html
    return "\n".join(parts) + "\n"


def build_report(engine, config, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for module in report_modules():
        section = module.render(engine, config, out)
        if section is not None:
            sections.append(section)
    index = out / "index.html"
    index.write_text(_page(sections, out), encoding="utf-8")
    return [index] + [p for s in sections for p in s.figures]
