"""One package per trace source: `tracelake.sources.<name>` holds everything of that source.

    __init__.py   declare() -> api.source.Source(name, plan, derived, batch_by, report, …),
                  called on first use: importing the package loads no engine library
    <parsers>.py  raw files -> the parser contract (tracelake.io.parse.finish)
    transforms    pure DataFrame -> DataFrame functions for its derived tables
    synth         generate(out_dir, scale, seed, **options): files in the source's exact format
                  (found by this name; it imports no engine library)
    report.py     render(engine, config, out_dir) -> api.section.Section | None (optional)

A source imports tracelake.api and tracelake.io (and errors, config, schema), never the run, the
Delta layer or another source; tracelake.run.registry finds it by its declare() (cross-trace tables: SOURCE in
tracelake.crosstrace).
"""
