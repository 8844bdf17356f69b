"""`StepRunner`: one step of a workload the way a user's loop runs it under a configuration."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from autotune.workload.steps._kinds import step_of
from autotune.workload.steps._step import StepState

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

__all__ = ["StepRunner"]


class StepRunner:
    """One step the way a user's loop runs it under this configuration: the workload's kind of step
    (`autotune.workload.steps`), with what it carries from call to call."""

    def __init__(self, workload: Workload, device: torch.device, cuda_graphs: bool) -> None:
        self.workload = workload
        self.kind = step_of(workload)
        autocast = torch.autocast(device.type, dtype=workload.autocast) if workload.autocast else None
        self.state = StepState(autocast=autocast or contextlib.nullcontext(), cuda_graphs=cuda_graphs)

    @property
    def cuda_graphs(self) -> bool:
        return self.state.cuda_graphs

    @property
    def backward(self) -> Callable[[torch.Tensor], None]:
        return self.state.backward

    @backward.setter
    def backward(self, backward: Callable[[torch.Tensor], None]) -> None:
        self.state.backward = backward

    @property
    def extras(self) -> Any:
        return self.state.extras

    @extras.setter
    def extras(self, extras: Any) -> None:
        self.state.extras = extras

    def eager(self) -> StepRunner:
        """The same step as eager runs it, for the accuracy references: the workload's kind and extras, the plain
        `loss.backward()` (not the configuration's compiled autograd), and a micro-batch count of its own."""
        twin = StepRunner.__new__(StepRunner)
        twin.workload, twin.kind = self.workload, self.kind
        twin.state = StepState(
            autocast=self.state.autocast, extras=self.state.extras, cuda_graphs=self.state.cuda_graphs
        )
        return twin

    def forward(self, model: nn.Module, batch: Any) -> Any:
        return self.kind.forward(self.state, model, batch)

    def __call__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        if self.state.cuda_graphs:
            # Replayed graphs reuse their output buffers: mark each step and read what it returns before the next.
            torch.compiler.cudagraph_mark_step_begin()
        return self.kind.run(self.state, model, optimizer, batch)
