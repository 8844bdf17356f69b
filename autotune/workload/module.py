"""A plain `nn.Module` as a target: inference on example inputs, its dynamic axes read from their shapes.

`--model pkg:Net --inputs pkg:batches`, or a module with an `example_inputs()` method, is enough
to tune inference: the batches are the inputs given (a list of them, or a function returning one),
each a tensor, a tuple of tensors (the forward's positional arguments) or a dict (its keyword
arguments). An axis other than the first is dynamic when its size differs between two batches,
as for a Trainer's collated batches. Where nothing says what to feed, `refusal` is the error:
it shows the shortest Workload that would do, filled in for that module.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from autotune.errors import WorkloadError
from autotune.runtime.config import InputKey
from autotune.runtime.limits import printable
from autotune.runtime.summary import INFER
from autotune.workload.contract import Batch, Workload, input_keys, input_of

__all__ = ["inferred_dims", "module_workload", "refusal"]

_DRAWN = 64
"""At most this many example batches are read to find the dynamic axes."""


def module_workload(model: nn.Module, inputs: Any, spec: str, report: Callable[[str], None] | None = None) -> Workload:
    """An inference Workload for `model` on `inputs` (batches, or a zero-argument callable returning them)."""
    drawn = _batches(inputs, spec)
    dims = inferred_dims(drawn)
    if report is not None:
        found = ", ".join(f"input {key!r} axes {list(axes)}" for key, axes in dims.items()) or "none"
        report(
            f"{spec}: inference of {type(model).__name__} on {len(drawn)} example batch(es); dynamic axes, "
            f"found by comparing their shapes: {found}."
        )
    source: Any = (lambda: _batches(inputs, spec)) if callable(inputs) else drawn
    return Workload(model=model, batches=source, task=INFER, dynamic_dims=dims, num_batches=min(8, len(drawn)))


def _batches(inputs: Any, spec: str) -> list[Batch]:
    """The example batches `inputs` gives, as a list: a lone tensor or dict is one batch."""
    produced = inputs
    if callable(inputs):
        try:
            produced = inputs()
        except WorkloadError:
            raise
        except Exception as exc:
            raise WorkloadError(
                f"{spec}: calling the example inputs raised {type(exc).__name__}: {printable(str(exc))[:600]}"
            ) from None
    if isinstance(produced, (torch.Tensor, dict)):
        produced = [produced]
    try:
        batches = list(itertools.islice(iter(produced), _DRAWN))
    except TypeError:
        raise WorkloadError(
            f"{spec}: the example inputs are a {type(produced).__name__}; expected a list of batches (each a "
            "tensor, a tuple of tensors or a dict of them), or a function returning one."
        ) from None
    if not batches:
        raise WorkloadError(f"{spec}: the example inputs hold no batch.")
    return batches


def inferred_dims(batches: Sequence[Batch]) -> dict[InputKey, list[int]]:
    """The axes (other than the first) of each tensor input whose size differs between two of `batches`."""
    dims: dict[InputKey, list[int]] = {}
    if not isinstance(batches[0], (dict, tuple, list, torch.Tensor)):
        return dims
    for key in input_keys(batches[0]):
        values = [input_of(b, key) for b in batches]
        if not all(isinstance(v, torch.Tensor) for v in values) or len({v.dim() for v in values}) != 1:
            continue
        axes = [axis for axis in range(1, values[0].dim()) if len({v.shape[axis] for v in values}) > 1]
        if axes:
            dims[key] = axes
    return dims


def refusal(model: nn.Module, spec: str, called: bool) -> str:
    """Why a bare module cannot be tuned as it is, with the shortest complete Workload that would work for it."""
    module_name, attr = spec.split(":", 1)
    built = f"{attr}()" if called else attr
    name = type(model).__name__
    return (
        f"--model {spec!r}: the target is a bare {name}, and autotune cannot tell what batches to feed it. "
        f"Give it example inputs: --inputs PKG.MOD:BATCHES (a list of batches, or a function returning one) "
        f"or an example_inputs() method on {name}, for inference; or, for inference or training, return a "
        f"Workload, e.g. in {module_name.replace('.', '/')}.py:\n\n"
        "import torch\n"
        "from autotune import Workload\n\n\n"
        "def workload() -> Workload:\n"
        "    return Workload(\n"
        f"        model={built},\n"
        f"        batches=lambda: [{_example_input(model)} for _ in range(8)],  # what {name}.forward takes\n"
        '        task="infer",  # or "train", with optimizer=lambda params: torch.optim.AdamW(params)\n'
        "    )\n\n"
        f"and search it with: autotune search --model {module_name}:workload"
    )


def _example_input(model: nn.Module) -> str:
    """A random batch of 8 for the module's first layer, as Python source; a guess for other first layers."""
    first = next((m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d))), None)
    if isinstance(first, nn.Linear):
        return f"torch.randn(8, {first.in_features})"
    if isinstance(first, nn.Embedding):
        return f"torch.randint(0, {first.num_embeddings}, (8, 32))"
    if isinstance(first, nn.Conv1d):
        return f"torch.randn(8, {first.in_channels}, 64)"
    if isinstance(first, nn.Conv2d):
        return f"torch.randn(8, {first.in_channels}, 32, 32)"
    return "torch.randn(8, 16)"
