"""The guard of a search's workers: kills their process groups once the search is gone.

`python -m autotune.trial.guard PARENT_PID` reads lines from its standard input, which the
parent holds open: "+PGID" registers a worker's process group, "-PGID" forgets it. When the
input ends (the parent closed it, exited, or was killed) every group still registered gets
SIGKILL, which also ends a worker the parent had stopped: a stopped process never runs the
watch that ends a worker whose parent is gone.

In the parent, `Guard` starts that process and tells it about groups; `process_guard()` is
the one guard every live worker of a process registers with (`autotune.trial.live`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

__all__ = ["Guard", "main", "process_guard"]


class Guard:
    """The parent's side of a guard process: register and forget process groups; `close` ends it."""

    def __init__(self) -> None:
        # Its own session: a Ctrl-C meant for the search does not end it before the search has cleaned up.
        self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "autotune.trial.guard", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._lock = threading.Lock()

    def register(self, pgid: int) -> None:
        self._tell(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        self._tell(f"-{pgid}")

    def _tell(self, line: str) -> None:
        with self._lock:
            if self._process is None or self._process.stdin is None:
                return
            with contextlib.suppress(OSError, ValueError):
                self._process.stdin.write(f"{line}\n".encode())
                self._process.stdin.flush()

    def close(self) -> None:
        """End the guard: every group still registered is killed."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)


_GUARD: Guard | None = None
_GUARD_LOCK = threading.Lock()


def process_guard() -> Guard:
    """This process's guard, started on first use; it lives as long as the process."""
    global _GUARD
    with _GUARD_LOCK:
        if _GUARD is None or _GUARD._process is None or _GUARD._process.poll() is not None:
            _GUARD = Guard()
        return _GUARD


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
