"""One package per trace source: `tracelake.sources.<name>` holds everything of that source.

    __init__.py   plan(raw_dir, staging) -> list[TableInput]; DERIVED: list[Derived]
    <parsers>.py  raw files -> the parser contract (tracelake.io.parse.finish)
    transforms    pure DataFrame -> DataFrame functions for its derived tables
    synth         generate(out_dir, scale, seed, **options): files in the source's exact format
    report.py     render(engine, config, out_dir) -> report.Section | None (optional)

tracelake.run.registry finds them; no source imports another (cross-trace tables: tracelake.crosstrace).
"""
