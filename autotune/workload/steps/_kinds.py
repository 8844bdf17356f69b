"""`step_of`: the one place that picks a workload's kind of step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.workload.steps._step import Step
from autotune.workload.steps.infer import InferStep
from autotune.workload.steps.own import OwnStep
from autotune.workload.steps.train import TrainStep

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

__all__ = ["step_of"]


def step_of(workload: Workload) -> Step:
    """The workload's kind of step: the user's own step where it gives one, else training or inference."""
    if workload.step is not None:
        return OwnStep(workload)
    return TrainStep(workload) if workload.trains else InferStep(workload)
