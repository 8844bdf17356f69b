"""The guard of a search's workers: kills their process groups once the search is gone.

`python -m autotune.trial.guard PARENT_PID` reads lines from its standard input, which the
parent (`autotune.trial.gate`) holds open: "+PGID" registers a worker's process group,
"-PGID" forgets it. When the input ends (the parent closed it, exited, or was killed) every
group still registered gets SIGKILL, which also ends a worker the parent had stopped: a
stopped process never runs the watch that ends a worker whose parent is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Track groups from stdin until it ends, then kill those left; returns the exit code."""
    del argv  # the parent's pid is on the command line only so that `ps` shows whose guard this is
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        text = line.decode(errors="replace").strip()
        if len(text) > 1 and text[0] in "+-" and text[1:].isdigit():
            (groups.add if text[0] == "+" else groups.discard)(int(text[1:]))
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
