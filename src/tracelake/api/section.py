"""A page section of the HTML report, as a source's or the cross-trace `report` module returns it
from render(engine, config, out_dir)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Section:
    title: str
    figures: list[Path] = field(default_factory=list)  # PNG files inside out_dir
    tables_html: list[str] = field(default_factory=list)  # ready-made <table> fragments
    notes: list[str] = field(default_factory=list)
