"""`python -m autotune` runs the command-line interface."""

import sys

from autotune.cli import main

sys.exit(main())
