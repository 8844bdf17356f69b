"""What a person watching a search or retune sees: a live status on a terminal, plain lines elsewhere.

On a terminal a rich `Live` line shows the trials done, the current phase and how long it
has run, and the ETA, redrawn twice a second so both clocks move during a long compile.
Everything else (CI logs, cron mail, a pipe) gets one plain line per phase and every note,
with no cursor movement.

`verbosity` is the command line's `-q`/`-v`: quiet (-1) leaves out the status and the phase
lines, keeping one line per note (a trial's result, a baseline, a warning); verbose (1) prints
every phase as its own line on a terminal too, and stamps each line with the time of day.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from autotune.study.report._progress import Progress

__all__ = ["QUIET", "VERBOSE", "SearchDisplay", "duration"]

QUIET, VERBOSE = -1, 1
"""The `verbosity` of `-q` and `-v`; 0 is the default."""


def duration(seconds: float) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class SearchDisplay:
    """A `ProgressCallback` for `autotune search` and `autotune retune`; call `close()` at the end."""

    def __init__(self, stream: TextIO, *, live: bool | None = None, retune: bool = False, verbosity: int = 0) -> None:
        self.verbosity = verbosity
        self.live = (stream.isatty() if live is None else live) and verbosity > QUIET
        self.console = Console(file=stream, force_terminal=self.live, highlight=False, soft_wrap=True)
        self.retune = retune
        self.current: Progress | None = None
        self.phase_started = time.monotonic()
        self.received = time.monotonic()
        self._live: Live | None = None
        if self.live:
            self._live = Live(get_renderable=self.status, console=self.console, refresh_per_second=2, transient=True)
            self._live.start()

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        if progress.message:
            self.console.print(Text(f"{self._stamp()}  {progress.message}"))
            return
        changed = self.current is None or progress.phase != self.current.phase
        if changed:
            self.phase_started = now
        self.current, self.received = progress, now
        if changed and (self.verbosity >= VERBOSE or (not self.live and self.verbosity > QUIET)):
            self.console.print(Text(self._stamp()) + self.status(elapsed=False))

    def _stamp(self) -> str:
        """The time of day before a line, when verbose ('' otherwise)."""
        return datetime.now().strftime("%H:%M:%S ") if self.verbosity >= VERBOSE else ""

    def status(self, *, elapsed: bool = True) -> Text:
        """The status line as it reads now: counts, phase with its elapsed time, ETA counting down.

        A log line is printed as a phase starts, when its elapsed time is always 0: `elapsed=False` leaves it out.
        """
        progress = self.current
        if progress is None:
            return Text("starting")
        now = time.monotonic()
        parts: list[Any] = []
        if progress.total:
            # A resumed study may already hold more trials than --trials asks for: never "8/1".
            parts.append(f"[{progress.done}/{max(progress.total, progress.done)} trials]")
        elif self.retune:
            parts.append("retune:")
        clock = f" ({duration(now - self.phase_started)})" if elapsed else ""
        parts.append(f"{progress.phase}{clock}" if progress.phase else "")
        if progress.eta_seconds is not None:
            parts.append(f"ETA {duration(progress.eta_seconds - (now - self.received))}")
        elif progress.total:
            parts.append("ETA after the first compile")
        return Text("  ".join(p for p in parts if p))

    def close(self) -> None:
        """Stop redrawing; the terminal keeps the notes and loses the status line."""
        if self._live is not None:
            self._live.stop()
            self._live = None
