"""A kind of step defined outside autotune, beside the workload that runs it: training with an optimizer that
evaluates the loss itself, as L-BFGS does (`optimizer.step(closure)`). autotune's own training step calls
`optimizer.step()` with no closure, which L-BFGS refuses; registering this kind is all it takes to search it.

Workers compile on dynamo's eager backend (`dynamo_only`), so a search of it is seconds.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autotune import Workload
from autotune.workload.steps import Step, StepState, register_step
from tests.trial_targets import dynamo_only  # noqa: F401  (workers compile on the eager backend)
from tests.trial_targets.workloads import TinyMLP, _batches


class ClosureMLP(TinyMLP):
    """The tiny model, as the kind of step below recognises it."""


@register_step
class ClosureStep(Step):
    trains = True
    checks = "loss"

    @classmethod
    def serves(cls, workload: Workload) -> bool:
        return isinstance(workload.model, ClosureMLP)

    def run(self, state: StepState, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        assert optimizer is not None

        def closure() -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = self.workload.compute_loss(self.forward(state, model, batch), batch)
            state.backward(loss)
            return loss

        return optimizer.step(closure).detach().clone()


def workload() -> Workload:
    """A regression the L-BFGS optimizer trains, two evaluations a step."""
    return Workload(
        model=ClosureMLP(bias=False),
        batches=_batches,
        task="train",
        optimizer=lambda params: torch.optim.LBFGS(params, lr=0.1, max_iter=2, history_size=2),
        loss=lambda output, batch: output.pow(2).mean(),
        num_batches=4,
    )
