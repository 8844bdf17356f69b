"""`Step`: one step of a workload, whatever its kind, and what it carries between calls."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

__all__ = ["Step", "StepState", "tensor_leaves"]


@dataclass
class StepState:
    """What a step carries from one call to the next in one process."""

    autocast: contextlib.AbstractContextManager[Any]
    """The workload's autocast around the forward (or the user's step), or nothing."""
    backward: Callable[[torch.Tensor], None] = torch.Tensor.backward
    """How a loss is backpropagated: `loss.backward()`, or the generated file's `backward` (compiled autograd)."""
    extras: Any = None
    """What the workload's `setup` built besides the optimizer, for the user's own step."""
    micro_batches: int = 0
    """Training micro-batches run so far; the optimizer steps after every `accumulation_steps` of them."""
    cuda_graphs: bool = False
    """Replayed CUDA graphs: each step is marked, and what it returns is read before the next."""


class Step(ABC):
    """One kind of step. Subclass it in a module of its own and decorate it with `register_step`: `step_of` then
    asks it, in the order of `priority`, whether it `serves` a workload."""

    trains: ClassVar[bool]
    """Whether the step trains: the model is in training mode, an optimizer steps, gradients are checked."""
    checks: ClassVar[str]
    """What the accuracy check compares with eager's, in words: 'loss' or 'output'."""
    priority: ClassVar[int] = 100
    """Kinds are asked highest first: a kind that serves some of the workloads another serves ranks above it."""

    @classmethod
    @abstractmethod
    def serves(cls, workload: Workload) -> bool:
        """Whether this kind runs the workload's steps."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    def forward(self, state: StepState, model: nn.Module, batch: Any) -> Any:
        """The model's forward on one batch, under the workload's autocast."""
        with state.autocast:
            return self.workload.run_forward(model, batch)

    @abstractmethod
    def run(self, state: StepState, model: nn.Module, optimizer: torch.optim.Optimizer | None, batch: Any) -> Any:
        """One step on one batch; what it returns is read (cloned), as a user's loop would read it.

        A training kind returns the micro-batch's loss, and steps the optimizer once every
        `workload.accumulation_steps` calls (every call where the workload has no accumulation): the
        whole-step check reads the losses it returns and the weights after each optimizer step.
        """


def tensor_leaves(value: Any) -> Iterator[torch.Tensor]:
    """Every floating-point tensor inside an output (tensors, tuples, lists, dicts, ModelOutputs)."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield value
    elif isinstance(value, Mapping) or hasattr(value, "to_tuple"):
        items = value.values() if isinstance(value, Mapping) else value.to_tuple()
        for item in items:
            yield from tensor_leaves(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensor_leaves(item)
