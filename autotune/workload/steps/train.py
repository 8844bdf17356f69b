"""Training as autotune runs it: forward, the workload's loss, backward, and the optimizer's step after every
`accumulation_steps` micro-batches, as the trainers accumulate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from autotune.workload.steps._kinds import register_step

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

from autotune.workload.steps._step import Step, StepState


@register_step
class TrainStep(Step):
    trains = True
    checks = "loss"
    priority = 0

    @classmethod
    def serves(cls, workload: Workload) -> bool:
        return workload.trains

    def run(self, state: StepState, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        loss = self.workload.compute_loss(self.forward(state, model, batch), batch)
        accumulation = self.workload.accumulation_steps
        # Each micro-batch adds loss / k to the gradients, and the optimizer steps (and the gradients are
        # cleared) once every k micro-batches.
        state.backward(loss / accumulation if accumulation > 1 else loss)
        state.micro_batches += 1
        if state.micro_batches % accumulation == 0:
            assert optimizer is not None
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss.detach().clone()
