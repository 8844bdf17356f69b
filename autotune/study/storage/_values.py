"""A finished Optuna trial's values, read alike in single- and multi-objective studies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.measure import Objective

__all__ = ["trial_rank", "trial_value"]


def trial_value(trial: Any) -> float | None:
    """A finished trial's speed objective (the first of its values), single- or multi-objective alike."""
    values: Sequence[float] | None = trial.values
    return values[0] if values else None


def trial_rank(trial: Any, objective: Objective) -> float:
    """A sort key that is larger for the better trial; a trial without a value ranks last."""
    value = trial_value(trial)
    if value is None:
        return float("-inf")
    return value if objective.direction == "maximize" else -value
