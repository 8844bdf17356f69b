"""The user's own training step (`Workload.step`): it runs unchanged around the compiled model and optimizer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from autotune.workload.steps._kinds import register_step

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

from autotune.workload.steps._step import Step, StepState


@register_step
class OwnStep(Step):
    trains = True
    checks = "loss"
    priority = 10

    @classmethod
    def serves(cls, workload: Workload) -> bool:
        return workload.step is not None

    def run(self, state: StepState, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        assert optimizer is not None, "a training workload builds its optimizer"
        with state.autocast:
            return self.workload.run_step(model, optimizer, batch, state.extras).clone()
