"""docs/architecture.md stays true to the code: every module and dotted name it gives exists, and
the floor plan lists every module of the kernel."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tracelake"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGES = ("io", "delta", "quality", "api", "run", "app", "sources", "crosstrace")


def _floor_plan() -> set[str]:
    """Module paths the floor plan names, relative to src/tracelake (`io/text.py`, `engine.py`)."""
    plan = DOC.split("```", 2)[1]
    found, package = set(), None
    for line in plan.splitlines():
        if m := re.match(r"  ([a-z_]+)/\s", line):
            package = m.group(1)
        for name in re.findall(r"\b([a-z_][a-z0-9_]*\.py)\b", line):
            found.add(f"{package}/{name}" if line.startswith("    ") and package else name)
    return found


def test_every_module_the_floor_plan_names_exists_and_every_kernel_module_is_named():
    named = _floor_plan()
    assert sorted(n for n in named if not (SRC / n).is_file()) == []
    kernel = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
              if p.name != "__init__.py" and p.parts[len(SRC.parts)] not in ("sources", "crosstrace")}
    assert sorted(kernel - named) == []


def test_every_dotted_name_the_doc_gives_resolves():
    missing = []
    for dotted in sorted(set(re.findall(r"`((?:{})\.[a-z_.]+[a-z_])`".format("|".join(PACKAGES)), DOC))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module("tracelake." + ".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(dotted)
            break
        else:
            missing.append(dotted)
    assert missing == []


def test_no_module_sits_directly_in_the_package_beyond_the_ground_floor():
    direct = sorted(p.name for p in SRC.glob("*.py"))
    assert direct == ["__init__.py", "__main__.py", "config.py", "deltajars.py", "engine.py", "errors.py",
                      "private_engine.py", "resources.py", "schema.py"]


# floors, lowest first: a module may import its own floor's and lower floors' modules only
FLOORS = [("errors", "resources", "private_engine", "deltajars"), ("config", "schema"), ("engine", "io"), ("delta", "quality"), ("api",),
          ("sources", "crosstrace"), ("run",), ("app", "__main__")]


def _floor(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else ""
    return next(i for i, names in enumerate(FLOORS) if top in names)


def _imports() -> dict[str, set[str]]:
    import ast

    found = {}
    for path in SRC.rglob("*.py"):
        module = ".".join(("tracelake", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracelake."):
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("tracelake.")}
        found[module] = names
    return found


def test_each_floor_imports_only_floors_below_it_and_the_kernel_no_source():
    upward = sorted(f"{m} -> {i}" for m, imported in _imports().items() if m != "tracelake"
                    for i in imported if _floor(i) > _floor(m))
    assert upward == []
    kernel_to_source = sorted(f"{m} -> {i}" for m, imported in _imports().items()
                              if m != "tracelake" and _floor(m) != _floor("tracelake.sources") for i in imported
                              if i.startswith(("tracelake.sources", "tracelake.crosstrace")))
    assert kernel_to_source == []
