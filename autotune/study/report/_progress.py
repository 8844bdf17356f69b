"""What a long-running search or retune tells a display: the phase, counts and ETA."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autotune.measure.engine import expected_replicate_seconds, first_windows
from autotune.trial.request import RunProtocol
from autotune.trial.run_record import RunRecord

__all__ = ["Plan", "Progress", "ProgressCallback", "confirmation_guess", "quiet"]


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

    Trials and compile-cache runs start a fresh worker that compiles cold and measures, so
    they take about a typical trial each (the median of those run so far, pruned and failed ones
    included, so the pruning rate counts). The confirmation is warm restarts, far cheaper than a
    trial: before it starts it counts as `confirmation_seconds_guess` (`confirmation_guess`, from
    the baselines' first runs), then at the pace of its own replicates. The live reference's
    anchors (a warm restart of plain compile and its paired windows, one before the first trial
    and one after every few more) count as `anchor_seconds` each. The ETA is their sum, less
    what the current run has already taken.
    """

    baselines: int = 2
    trials: int = 0
    confirmation: int = 0
    """Runs of the confirmation before it starts, where `confirmation_seconds_guess` is not known yet."""
    confirmation_seconds_guess: float | None = None
    """Seconds the whole confirmation will take, guessed before it starts (`confirmation_guess`)."""
    confirmation_seconds: float | None = None
    """Once the confirmation runs: seconds of it still ahead, at the pace of its replicates so far."""
    cache: int = 0
    typical_run: float | None = None
    """Seconds of a typical run: the median trial, or the compile baseline before any trial."""
    run_started: float | None = None
    """time.monotonic() when the current run started; None between runs."""
    workers: int = 1
    """Trials that run at once."""
    anchors: int = 0
    """Anchors of the live reference the trials ahead will start."""
    anchor_seconds: float | None = None
    """Seconds of one anchor: the mean of those run, or a guess from plain compile's warm restart before any."""

    def eta(self, now: float) -> float | None:
        """Seconds until the search ends, or None before anything was timed."""
        if self.typical_run is None:
            return None
        elapsed = now - self.run_started if self.run_started is not None else 0.0
        if self.confirmation_seconds is not None:
            # Measuring: the replicates left at the pace of those done, less the current one's time so far.
            ahead = max(self.confirmation_seconds - elapsed, 0.0)
            return self.cache * self.typical_run + ahead
        runs = self.baselines + self.trials / self.workers + self.cache
        if self.confirmation_seconds_guess is not None:
            confirming = self.confirmation_seconds_guess
        else:
            confirming = self.confirmation * self.typical_run
        anchoring = self.anchors * (self.anchor_seconds or 0.0)
        return max(runs * self.typical_run + confirming + anchoring - min(elapsed, self.typical_run), 0.0)


def confirmation_guess(
    eager: RunRecord | None,
    compile: RunRecord | None,
    *,
    confirm: int,
    replicates: int,
    protocol: RunProtocol,
    cold_compiles: bool = False,
) -> float:
    """Seconds a search's confirmation will take, from the baselines' first runs, before any trial.

    Its least replicates (`replicates`, where most confirmations decide), each of eager, plain compile
    and `confirm` trials warm from their caches (`expected_replicate_seconds`, processes starting
    side by side); plain compile's first run stands for each trial's, which is not known yet. With
    `cold_compiles` (compile time decides), each replicate first compiles plain compile and every
    trial cold again, one after another.
    """
    if confirm <= 0:
        return 0.0
    subjects = {"eager": eager, "compile": compile, **{f"trial {i}": compile for i in range(confirm)}}
    per = expected_replicate_seconds(subjects, first_windows(protocol), protocol.window_seconds, starts_together=True)
    if cold_compiles and compile is not None:
        per += (confirm + 1) * (compile.compile_seconds or 0.0)
    return replicates * per


def quiet(progress: Progress) -> None:
    """A display that shows nothing."""
