"""What a long-running search or retune tells a display: the phase, counts and ETA."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Plan", "Progress", "ProgressCallback", "quiet"]


@dataclass
class Progress:
    """One update for a live display; `message` set means a line to print rather than a status."""

    done: int
    total: int
    trial: int | None
    phase: str
    eta_seconds: float | None
    message: str = ""


ProgressCallback = Callable[[Progress], None]


@dataclass
class Plan:
    """The worker runs a search still has ahead, stage by stage, for an ETA that covers all of them.

    Every run (a baseline, a trial, a confirmation run, a compile-cache run) starts a fresh
    worker that compiles and measures, so they take about the same time: the ETA is the runs
    left times the typical run, less what the current run has already taken.
    """

    baselines: int = 2
    trials: int = 0
    confirmation: int = 0
    """Runs of the confirmation before it starts (a first guess: every subject once per replicate)."""
    confirmation_seconds: float | None = None
    """Once the confirmation runs: seconds of it still ahead, at the pace of its replicates so far."""
    cache: int = 0
    typical_run: float | None = None
    """Seconds of a typical run: the median trial, or the compile baseline before any trial."""
    run_started: float | None = None
    """time.monotonic() when the current run started; None between runs."""
    workers: int = 1
    """Trials that run at once."""

    def eta(self, now: float) -> float | None:
        """Seconds until the search ends, or None before anything was timed."""
        if self.typical_run is None:
            return None
        elapsed = now - self.run_started if self.run_started is not None else 0.0
        if self.confirmation_seconds is not None:
            # Measuring: the replicates left at the pace of those done, less the current one's time so far.
            ahead = max(self.confirmation_seconds - elapsed, 0.0)
            return self.cache * self.typical_run + ahead
        runs = self.baselines + self.trials / self.workers + self.confirmation + self.cache
        return max(runs * self.typical_run - min(elapsed, self.typical_run), 0.0)


def quiet(progress: Progress) -> None:
    """A display that shows nothing."""
