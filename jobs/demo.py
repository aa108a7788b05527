"""spark-submit entry point for `tracelake demo` (same forwarding as jobs/ingest.py).

Usage: spark-submit jobs/demo.py --profile spark
"""

import sys
from pathlib import Path

try:
    import tracelake  # noqa: F401 - installed package (pip install -e .) wins
except ImportError:  # plain checkout: make <repo>/src importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tracelake.app.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
