"""spark-submit entry point for `tracelake ingest`.

spark-submit needs a script file rather than a console command; this one forwards its arguments
to the CLI so both paths share one parser, one config loader and one exit-code convention.
Usage: spark-submit jobs/ingest.py itp --raw DIR --profile spark
"""

import sys
from pathlib import Path

try:
    import tracelake  # noqa: F401 - installed package (pip install -e .) wins
except ImportError:  # plain checkout: make <repo>/src importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tracelake.app.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
