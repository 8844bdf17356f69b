"""Where a campaign's runs happen (`Lab`): worker processes (`Processes`), or stand-ins that draw figures from a
known distribution (`examples.decision_error`), which run the very same engine."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Protocol

from autotune.measure.engine._replicate import Replicate, ReplicatePlan, run_replicate
from autotune.trial.request import TrialRequest, TrialRun
from autotune.trial.runner import run_trial

__all__ = ["Lab", "Processes"]


class Lab(Protocol):
    """Where a campaign's runs happen: a subject's first run, a replicate, and the clock the budget reads."""

    def first(self, request: TrialRequest) -> TrialRun:
        """A subject's first run: alone, cold, in its empty cache folder."""
        ...

    def replicate(
        self, requests: Mapping[str, TrialRequest], plan: ReplicatePlan, rng: random.Random
    ) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
        """One replicate as `plan` says (see `autotune.measure.engine._replicate.run_replicate`)."""
        ...

    def clock(self) -> float:
        """Seconds, monotonic: what the seconds budget is spent in."""
        ...


class Processes:
    """The lab of worker processes: each run in fresh processes, on the wall clock."""

    def first(self, request: TrialRequest) -> TrialRun:
        return run_trial(request)

    def replicate(
        self, requests: Mapping[str, TrialRequest], plan: ReplicatePlan, rng: random.Random
    ) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
        return run_replicate(
            requests,
            plan.groups,
            design=plan.design,
            windows=plan.windows,
            batches_per_window=plan.batches_per_window,
            window_seconds=plan.window_seconds,
            rng=rng,
        )

    def clock(self) -> float:
        return time.monotonic()
