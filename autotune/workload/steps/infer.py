"""Inference: the forward under `no_grad`, the model in eval mode; the outputs are what is checked and read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from autotune.workload.steps._kinds import register_step

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

from autotune.workload.steps._step import Step, StepState, tensor_leaves


@register_step
class InferStep(Step):
    trains = False
    checks = "output"
    priority = 0

    @classmethod
    def serves(cls, workload: Workload) -> bool:
        return not workload.trains

    def run(self, state: StepState, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        with torch.no_grad():
            output = self.forward(state, model, batch)
        # Every subject reads what its step returned, at the same cost: a replayed CUDA graph
        # must (its next replay overwrites the buffers), so the others do too.
        return [t.clone() for t in tensor_leaves(output)]
