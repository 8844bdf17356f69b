"""Watching a running trial: the compile budget, the pruner's windows, and the busy-machine rule."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import optuna

from autotune.measure import Objective, Objectives, Paired
from autotune.study.search._ledger import StudyLedger
from autotune.trial.records import Compiled, Event, Paused, PhaseChange

__all__ = ["MIN_COMPILE_BUDGET", "SLOW_CONFIDENCE", "LoopOptions", "Monitor", "Watched", "compile_limit"]

MIN_COMPILE_BUDGET = 60.0
"""Seconds the compile budget never goes below: a model that compiles in seconds is not stopped by a busy moment."""

SLOW_CONFIDENCE = 0.975
"""How sure the slow-ratio rule must be that a trial runs below --slow-ratio of eager before it stops the trial.

Two paired windows beside a process that takes the machine can disagree by a factor of 1.6; their
mean alone once stopped a trial running 1.4x plain compile as 0.63x eager.
"""


class LoopOptions(Protocol):
    """What a trial loop reads of the search's options (`SearchOptions` has them all)."""

    trials: int
    reuse_since: int
    max_compile_seconds: float | None
    compile_budget: float
    slow_ratio: float

    @property
    def pruner_name(self) -> str: ...


class Watched(Protocol):
    """What a monitor reads of the trial loop whose trial it watches (`TrialLoop` has it all)."""

    options: LoopOptions
    baselines: dict[str, dict[str, Any]]
    workers_per_device: int
    ledger: StudyLedger
    objective: Objective
    objectives: Objectives
    stopping: threading.Event
    report: Callable[..., None]


def compile_limit(loop: Watched) -> tuple[float | None, str]:
    """How long a trial may compile before it is stopped, and why; (None, "") when there is no limit.

    `--max-compile-seconds` when given; otherwise the smaller of the compile budget (a multiple
    of plain torch.compile's compile time, as this session measured it, and at least
    MIN_COMPILE_BUDGET) and, for time-to:N,
    the best complete trial's whole time: a trial still compiling past that cannot win.
    """
    options = loop.options
    if options.max_compile_seconds:
        return options.max_compile_seconds, f"--max-compile-seconds {options.max_compile_seconds:g}"
    limits: list[tuple[float, str]] = []
    plain = loop.baselines.get("compile", {}).get("compile_seconds")
    if options.compile_budget and plain:
        # Workers that share a device compile side by side, each up to that many times slower than alone.
        sharing = loop.workers_per_device
        budget = options.compile_budget * plain * sharing
        why = f"{options.compile_budget:g}x plain torch.compile's {plain:.1f} s (--compile-budget)"
        if sharing > 1:
            why += f", times the {sharing} workers that compile side by side on the device"
        if budget < MIN_COMPILE_BUDGET:
            budget, why = MIN_COMPILE_BUDGET, f"{why}, but never less than {MIN_COMPILE_BUDGET:.0f} s"
        limits.append((budget, why))
    best = loop.ledger.best_total_seconds()
    if best is not None:
        limits.append((best, f"the best complete trial's whole {loop.objective} took {best:.1f} s, so it cannot win"))
    return min(limits) if limits else (None, "")


class Monitor:
    """Watches one worker's events: phase changes for the display, windows for the pruner, the compile budget."""

    def __init__(self, loop: Watched, trial: optuna.Trial, label: str) -> None:
        self.loop = loop
        self.trial = trial
        self.label = label
        self.phase = "start"
        self.phase_started = time.monotonic()
        self.compile_seconds = 0.0
        self.limit, self.why = compile_limit(loop)

    def __call__(self, event: Event | None) -> str | None:
        if self.loop.stopping.is_set():
            raise KeyboardInterrupt  # the pool stops: the runner kills the worker, the trial ends as interrupted
        limit = self.limit
        if event is None:
            if self.phase == "compile" and limit and time.monotonic() - self.phase_started > limit:
                return f"compile ran past {limit:.0f} s: {self.why}"
            return None
        record = event.record
        if isinstance(record, Paused):
            # Stopped while another worker measured: not this trial's compile time.
            self.phase_started += record.seconds
        elif isinstance(record, PhaseChange):
            self.phase, self.phase_started = record.phase, time.monotonic()
            self.loop.report(self.trial.number, f"{self.label}: {self.phase}")
        elif isinstance(record, Compiled):
            self.compile_seconds = record.compile_seconds
            if limit and self.compile_seconds > limit:
                return f"compile took {self.compile_seconds:.0f} s, more than {limit:.0f} s: {self.why}"
        return None

    def restart(self) -> Callable[[Event | None], str | None]:
        """What watches the trial's warm restart: the search's stop, and its phases for the display.

        The compile budget judged the first run, where the trial compiled cold; the restart's
        figures are judged after each paired window (`window`).
        """

        def watch(event: Event | None) -> str | None:
            if self.loop.stopping.is_set():
                raise KeyboardInterrupt
            if event is not None and isinstance(event.record, PhaseChange):
                self.loop.report(self.trial.number, f"{self.label}: warm restart, {event.record.phase}")
            return None

        return watch

    def window(self, paired: Paired) -> str | None:
        """Judge the trial after each paired window: the pruner, then the slow-ratio rule; a reason stops it.

        Both see the trial against the reference measured at the same moments, so a machine
        that got busy meanwhile slows both sides alike and judges nothing. The slow-ratio rule
        stops a trial only when its paired windows bound its ratio to eager below the bar
        (`SLOW_CONFIDENCE`), not when their mean alone falls under it.
        """
        if paired.samples_per_second is None:
            return None
        objective = self.loop.objective
        value = objective.speed_value(paired.samples_per_second, paired.batches_per_second or 0.0, self.compile_seconds)
        step = paired.pairs - 1
        # Optuna's pruners judge one objective; a multi-objective study is pruned for slowness only.
        # Only the paired windows every trial measures are reported: past them run only contenders, and a
        # pruner comparing a contender with the median of contenders would stop half of them.
        if not self.loop.objectives.multi and paired.pairs <= (paired.common_pairs or paired.pairs):
            self.trial.report(value, step)
            if self.trial.should_prune():
                return (
                    f"the {self.loop.options.pruner_name} pruner stopped it at window {step} ({value:.4g} {objective.unit}, "
                    f"{paired.ratio:.2f}x the reference beside it)"
                )
        ratio, slow = paired.over_eager, self.loop.options.slow_ratio
        at_most = paired.over_eager_at_most(SLOW_CONFIDENCE)
        if ratio is not None and at_most is not None and at_most < slow:
            return (
                f"it ran {ratio:.2f}x eager beside the reference, at most {at_most:.2f}x at "
                f"{SLOW_CONFIDENCE:.1%} confidence: below --slow-ratio {slow:g}"
            )
        return None
