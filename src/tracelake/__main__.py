"""`python -m tracelake`: the command line."""

import sys

from tracelake.app.cli import main

sys.exit(main())
