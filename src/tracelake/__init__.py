"""tracelake: public GPU-cluster and LLM-training traces as validated Delta tables.

The entry points a notebook or an orchestrator needs are importable from here, loaded on first
use so that `import tracelake` (and `tracelake --help`) starts no engine library:
`tracelake.open` (the lake, read-only, for notebooks: app/lake.py), `tracelake.load_config`,
`tracelake.start_engine`, `tracelake.run_ingest`."""

from importlib import import_module

__version__ = "0.1.0"

_ENTRY_POINTS = {
    "open": ("tracelake.app.lake", "open_lake"),
    "load_config": "tracelake.config",
    "start_engine": "tracelake.engine",
    "run_ingest": "tracelake.run.pipeline",
}


def __getattr__(name: str):
    if name in _ENTRY_POINTS:
        module, attribute = _ENTRY_POINTS[name] if isinstance(_ENTRY_POINTS[name], tuple) else (_ENTRY_POINTS[name], name)
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'tracelake' has no attribute {name!r}")
