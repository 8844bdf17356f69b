"""What a campaign tells its caller as it goes: each run's record, and the campaign before each replicate."""

from __future__ import annotations

from collections.abc import Callable

from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._rules import CampaignRules
from autotune.trial.run_record import RunRecord

__all__ = ["COLD_COMPILE", "ReplicateCallback", "RunCallback", "run_label", "run_text"]

RunCallback = Callable[[str, int, RunRecord], None]
"""Called after each run with the subject's name, the replicate (from 0; -1 for a first, cold run; `COLD_COMPILE - k`
for a cold compile before replicate k, from 0) and its record."""
COLD_COMPILE = -2
"""The replicate number a `RunCallback` hears for the cold compile before the first replicate (-3 the second's...)."""


def run_label(index: int) -> str:
    """What a `RunCallback`'s replicate number names: 'first run (cold)', 'cold compile before replicate 2',
    'replicate 3'."""
    if index <= COLD_COMPILE:
        return f"cold compile before replicate {COLD_COMPILE - index + 1}"
    return "first run (cold)" if index < 0 else f"replicate {index + 1}"


def run_text(name: str, index: int, record: RunRecord) -> str:
    """A `RunCallback`'s run in words: 'replicate 3: compile: 402 samples/s', 'cold compile before replicate 1:
    config: compiled in 64.8 s', or the state and reason of a run that did not complete."""
    if not record.complete:
        outcome = f"{record.state} ({record.reason})"
    elif index <= COLD_COMPILE:
        outcome = f"compiled in {record.compile_seconds or 0.0:.1f} s"
    else:
        outcome = f"{record.samples_per_second or 0.0:.4g} samples/s"
    return f"{run_label(index)}: {name}: {outcome}"


ReplicateCallback = Callable[[Campaign, CampaignRules], None]
"""Called before each replicate starts, with the campaign so far and its rules."""
