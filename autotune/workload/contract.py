"""`Workload`: what a user tunes (model, batches, task), and the helpers that read its batches."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from autotune.errors import ConfigError, WorkloadError
from autotune.runtime.config import InputKey, validate_module_path
from autotune.runtime.limits import quote
from autotune.runtime.summary import AUTOCAST_NAMES, TASKS, TRAIN, WorkloadSummary, checked_dims, checked_pad_values

# The workload package's __init__ lists what is public here.

AUTOCAST_DTYPES = {name: getattr(torch, name) for name in AUTOCAST_NAMES}
Batch = Any
_NO_EXTRAS = object()
"""What `build_optimizer` gives as extras when `setup` returned the optimizer alone: `step` then gets three arguments."""


@dataclass(kw_only=True)
class Workload:
    """A model and the batches it runs on, with what a search needs to know about them."""

    model: nn.Module
    """The model, built on the CPU; autotune moves it to the trial device."""
    batches: Iterable[Batch] | Callable[[], Iterable[Batch]]
    """An iterable of batches (a DataLoader works) or a zero-argument callable returning one."""
    task: Literal["train", "infer"] = "train"
    """'train' (forward, loss, backward, optimizer step) or 'infer' (forward under no_grad)."""
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] | None = None
    """Training only: builds the optimizer from the model's parameters."""
    loss: Callable[[Any, Batch], torch.Tensor] | None = None
    """Training only: (output, batch) -> scalar loss; by default `output.loss`."""
    dynamic_dims: Mapping[InputKey, Sequence[int]] = field(default_factory=dict)
    """Inputs (dict keys or tuple positions) and the axes whose length varies between batches."""
    pad_values: Mapping[InputKey, float | int | bool] = field(default_factory=dict)
    """Padding value per input when padding is configured (default 0, False for bool tensors)."""
    autocast: torch.dtype | None = None
    """Run forward under `torch.autocast` with this dtype (bfloat16 or float16), or None."""
    modules: Sequence[str] | None = None
    """Submodule paths compiled separately by the modular scope (default: children holding parameters)."""
    blocks: Sequence[str] | None = None
    """Paths of repeated-block lists for the regional scope (default: detected)."""
    forward: Callable[[nn.Module, Batch], Any] | None = None
    """(model, batch) -> output, when calling the model with the batch does not fit."""
    num_batches: int = 8
    """How many fixed batches a trial draws: warm-up and the steady-state windows cycle over these.
    With gradient accumulation, a multiple of `accumulation_steps`."""
    accumulation_steps: int = 1
    """Training only: gradient accumulation. Each batch is a micro-batch whose loss is divided by this
    number and back-propagated; the optimizer steps once every `accumulation_steps` batches, as a
    Trainer with `gradient_accumulation_steps` (or Lightning's `accumulate_grad_batches`) runs it.
    Every timed span covers whole optimizer steps, and throughput counts samples."""
    max_lengths: Mapping[InputKey, int | Mapping[int, int]] = field(default_factory=dict)
    """The longest length each dynamic input can have (an int for all its declared axes, or axis -> length).
    Padding to 'max' pads to these; without them the search does not offer 'max'."""
    step: Callable[..., Any] | None = None
    """Training only: your own training step, `step(model, optimizer, batch) -> loss`, run once per batch as
    your loop runs it: forward, loss, backward, clipping, `optimizer.step()`, a scheduler's step, zeroing the
    gradients, anything else. It gets `setup`'s extras as a fourth argument when `setup` returns any. It
    replaces `loss` and `forward`; autotune measures it and checks its losses and updates against eager."""
    setup: Callable[[nn.Module], Any] | None = None
    """With `step`: builds what your script builds from the model before its loop, `setup(model) -> optimizer`
    or `(optimizer, extras)`, extras being anything `step` needs (a scheduler, a GradScaler, a dict of them).
    Called afresh for every run, on the model already on the trial's device. Instead of `optimizer`."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, nn.Module):
            raise WorkloadError(f"Workload.model: expected a torch.nn.Module, got {type(self.model).__name__}.")
        if self.task not in TASKS:
            raise WorkloadError(f"Workload.task: {self.task!r} is not allowed; use one of {TASKS}.")
        self._check_own_step()
        if self.task == TRAIN and self.optimizer is None and self.setup is None:
            raise WorkloadError(
                "Workload.optimizer: a train workload needs an optimizer factory, "
                "e.g. optimizer=lambda params: torch.optim.AdamW(params, lr=1e-4)."
            )
        if self.autocast not in (None, *AUTOCAST_DTYPES.values()):
            raise WorkloadError(
                f"Workload.autocast: {self.autocast!r} is not allowed; use None, torch.bfloat16 or torch.float16."
            )
        if isinstance(self.num_batches, bool) or not isinstance(self.num_batches, int) or self.num_batches < 1:
            raise WorkloadError(f"Workload.num_batches: {self.num_batches!r} must be an integer >= 1.")
        steps = self.accumulation_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise WorkloadError(f"Workload.accumulation_steps: {steps!r} must be an integer >= 1.")
        if steps > 1 and self.task != TRAIN:
            raise WorkloadError(
                f"Workload.accumulation_steps: {steps} applies to training only; an 'infer' workload takes no "
                "optimizer step. Use accumulation_steps=1."
            )
        if self.num_batches % steps:
            raise WorkloadError(
                f"Workload.num_batches: {self.num_batches} is not a multiple of accumulation_steps={steps}: a pass "
                f"over the fixed batches must end with an optimizer step; use num_batches="
                f"{-(-self.num_batches // steps) * steps}."
            )
        self.dynamic_dims = checked_dims(self.dynamic_dims)
        self.pad_values = checked_pad_values(self.pad_values, self.dynamic_dims)
        self.max_lengths = _checked_max_lengths(self.max_lengths, self.dynamic_dims)
        for name in ("modules", "blocks"):
            paths = getattr(self, name)
            if paths is not None:
                setattr(self, name, tuple(_checked_submodule(self.model, p, f"Workload.{name}") for p in paths))
        for path in self.blocks or ():
            container = self.model.get_submodule(path)
            if not isinstance(container, (nn.ModuleList, nn.Sequential)) or len(container) < 2:
                raise WorkloadError(f"Workload.blocks: {path!r} must be a ModuleList/Sequential of two or more blocks.")

    def _check_own_step(self) -> None:
        if self.setup is not None and not callable(self.setup):
            raise WorkloadError(f"Workload.setup: expected a callable setup(model), got {quote(self.setup)}.")
        if self.step is None:
            if self.setup is not None:
                raise WorkloadError(
                    "Workload.setup: it builds what your own step uses, and no step is given; pass "
                    "step=train_step too, or optimizer=... alone."
                )
            return
        if not callable(self.step):
            raise WorkloadError(
                f"Workload.step: expected a callable step(model, optimizer, batch), got {quote(self.step)}."
            )
        if self.task != TRAIN:
            raise WorkloadError(
                f"Workload.step: your own training step needs task='train', not {self.task!r}; an 'infer' "
                "workload runs the model's forward (or `forward`) under no_grad."
            )
        if self.optimizer is not None and self.setup is not None:
            raise WorkloadError("Workload.optimizer and Workload.setup both build the optimizer: keep one of them.")
        for name in ("loss", "forward"):
            if getattr(self, name) is not None:
                raise WorkloadError(
                    f"Workload.{name}: your own step computes the loss itself, so {name} would never run; leave it "
                    "out and do it inside step."
                )
        if self.accumulation_steps != 1:
            raise WorkloadError(
                f"Workload.accumulation_steps: {self.accumulation_steps} applies to the step autotune runs; your "
                "own step accumulates as it likes (one call = one batch). Use accumulation_steps=1."
            )

    @property
    def trains(self) -> bool:
        """Whether the workload trains (`task='train'`): an optimizer steps and gradients flow."""
        return self.task == TRAIN

    def build_optimizer(self, model: nn.Module) -> tuple[torch.optim.Optimizer | None, Any]:
        """(optimizer, extras) for one run on `model`: `setup(model)`'s, else `optimizer(model.parameters())`'s
        (the optimizer is None for inference); extras is a marker that `run_step` passes on to no one when
        `setup` returned the optimizer alone."""
        if not self.trains:
            return None, _NO_EXTRAS
        if self.setup is None:
            assert self.optimizer is not None
            return self.optimizer(model.parameters()), _NO_EXTRAS
        built = self.setup(model)
        optimizer, extras = built if isinstance(built, tuple) and len(built) == 2 else (built, _NO_EXTRAS)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise WorkloadError(
                f"Workload.setup returned {quote(built)}; it must return the optimizer, or (optimizer, extras), "
                "e.g. setup=lambda model: torch.optim.AdamW(model.parameters(), lr=torch.tensor(3e-4))."
            )
        return optimizer, extras

    def run_step(self, model: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, extras: Any) -> torch.Tensor:
        """Run your own step on one batch; its loss, detached, as a tensor of one element."""
        assert self.step is not None
        given = (
            self.step(model, optimizer, batch) if extras is _NO_EXTRAS else self.step(model, optimizer, batch, extras)
        )
        if isinstance(given, (int, float)) and not isinstance(given, bool):
            return torch.tensor(float(given))
        if not isinstance(given, torch.Tensor) or given.numel() != 1:
            what = f"a tensor of shape {tuple(given.shape)}" if isinstance(given, torch.Tensor) else quote(given)
            raise WorkloadError(
                f"Workload.step returned {what}; it must return the step's loss, a tensor of one element "
                "(return loss.detach()) or a float."
            )
        return given.detach()

    def module_paths(self) -> tuple[str, ...]:
        """Submodules the modular scope compiles: `modules`, or the direct children that hold parameters."""
        if self.modules is not None:
            return tuple(self.modules)
        return tuple(
            name
            for name, child in self.model.named_children()
            # Containers have no forward of their own, so there is nothing to compile at their level.
            if not isinstance(child, (nn.ModuleList, nn.ModuleDict)) and any(True for _ in child.parameters())
        )

    def block_paths(self) -> tuple[str, ...]:
        """Repeated-block lists the regional scope compiles: `blocks`, or those detected in the model."""
        return tuple(self.blocks) if self.blocks is not None else find_repeated_blocks(self.model)

    def draw_batches(self, seed: int = 0) -> list[Batch]:
        """Seed every generator, then draw the first `num_batches` batches; every trial gets the same ones."""
        seed_everything(seed)
        batches = list(itertools.islice(self._source(), self.num_batches))
        if not batches:
            raise WorkloadError("Workload.batches: no batch was produced; the iterable is empty.")
        return self._checked(batches, 0)

    def fresh_batches(self, seed: int = 0, count: int = 0) -> list[Batch]:
        """`count` batches that follow the fixed ones: what a trial has not seen, the same for every trial.

        They come from the same iterator after the first `num_batches`; when it runs out and
        `batches` is a callable, it is called again with other seeds (a factory of random
        batches gives new ones). A finite iterable may give fewer than `count`.
        """
        if count <= 0:
            return []
        seed_everything(seed)
        source = self._source()
        list(itertools.islice(source, self.num_batches))
        fresh = list(itertools.islice(source, count))
        draw = 0
        while len(fresh) < count and callable(self.batches) and draw < count:
            draw += 1
            seed_everything(seed + 7919 * draw)
            more = list(itertools.islice(self._source(), count - len(fresh)))
            if not more:
                break
            fresh += more
        return self._checked(fresh, self.num_batches)

    def _source(self) -> Iterator[Batch]:
        source = self.batches() if callable(self.batches) else self.batches
        try:
            return iter(source)
        except TypeError as exc:
            raise WorkloadError(f"Workload.batches: {type(source).__name__} is not iterable ({exc}).") from None

    def _checked(self, batches: list[Batch], first: int) -> list[Batch]:
        # Mappings such as transformers' BatchEncoding are passed on as plain dicts.
        batches = [dict(b) if isinstance(b, Mapping) and not isinstance(b, dict) else b for b in batches]
        for index, batch in enumerate(batches):
            _check_batch(batch, first + index, self.dynamic_dims)
        return batches

    def run_forward(self, model: nn.Module, batch: Batch) -> Any:
        """Call the model on one batch: `forward` if given, else keywords, positions or one tensor."""
        if self.forward is not None:
            return self.forward(model, batch)
        if isinstance(batch, dict):
            return model(**batch)
        if isinstance(batch, (tuple, list)):
            return model(*batch)
        return model(batch)

    def compute_loss(self, output: Any, batch: Batch) -> torch.Tensor:
        """The training loss: `loss(output, batch)`, else `output.loss` or `output['loss']`."""
        if self.loss is not None:
            given: Any = self.loss(output, batch)
            if not isinstance(given, torch.Tensor) or given.numel() != 1:
                what = f"a tensor of shape {tuple(given.shape)}" if isinstance(given, torch.Tensor) else quote(given)
                raise WorkloadError(
                    f"Workload.loss returned {what}; it must return the loss as a tensor of one element, "
                    "e.g. loss=lambda output, batch: torch.nn.functional.cross_entropy(output, batch['labels'])."
                )
            return given
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, Mapping):
            loss = output.get("loss")
        if not isinstance(loss, torch.Tensor):
            raise WorkloadError(
                f"Workload.loss: the model's output ({type(output).__name__}) has no `.loss`; "
                "pass loss=lambda output, batch: ... to say how to compute it."
            )
        return loss

    def summary(self, spec: str, batches: Sequence[Batch]) -> WorkloadSummary:
        """What the generated code and best.yaml need to know about this workload."""
        return WorkloadSummary(
            spec=spec,
            task=self.task,
            model_class=type(self.model).__name__,
            modules=self.module_paths(),
            blocks=self.block_paths(),
            dynamic_dims={k: tuple(v) for k, v in self.dynamic_dims.items()},
            pad_values=dict(self.pad_values),
            max_lengths=_checked_max_lengths(self.max_lengths, self.dynamic_dims),
            samples_per_batch=samples_in(batches[0]),
            autocast=next((n for n, d in AUTOCAST_DTYPES.items() if d == self.autocast), None),
            accumulation_steps=self.accumulation_steps,
            own_step=self.step is not None,
            dropout=has_dropout(self.model),
        )


def has_dropout(model: nn.Module) -> bool:
    """Whether the model has a dropout layer with a probability above 0 (nn.Dropout, nn.Dropout1d/2d/3d...)."""
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules())


def _checked_max_lengths(lengths: object, dims: Mapping[InputKey, Sequence[int]]) -> dict[InputKey, dict[int, int]]:
    if not isinstance(lengths, Mapping):
        raise WorkloadError(f"Workload.max_lengths: expected a mapping of input to length, got {lengths!r}.")
    checked: dict[InputKey, dict[int, int]] = {}
    for key, value in lengths.items():
        if key not in dims:
            raise WorkloadError(f"Workload.max_lengths: {key!r} is not one of the dynamic inputs {list(dims)}.")
        axes = value if isinstance(value, Mapping) else {axis: value for axis in dims[key]}
        for axis, length in axes.items():
            if axis not in dims[key]:
                raise WorkloadError(
                    f"Workload.max_lengths.{key}: axis {axis!r} is not declared dynamic; declared: {list(dims[key])}."
                )
            if isinstance(length, bool) or not isinstance(length, int) or length < 1:
                raise WorkloadError(f"Workload.max_lengths.{key}: {length!r} must be a length >= 1.")
            checked.setdefault(key, {})[axis] = length
    return checked


def _checked_submodule(model: nn.Module, path: object, what: str) -> str:
    try:
        validate_module_path(path, what)
        model.get_submodule(str(path))
    except (ConfigError, AttributeError) as exc:
        children = [name for name, _ in model.named_children()]
        raise WorkloadError(
            f"{what}: {path!r} is not a submodule of the model ({exc}); its children: {children}."
        ) from None
    return str(path)


def _check_batch(batch: Batch, index: int, dims: Mapping[InputKey, Sequence[int]]) -> None:
    if not isinstance(batch, (dict, tuple, list, torch.Tensor)):
        raise WorkloadError(
            f"batch {index}: {type(batch).__name__} is not a batch; expected a dict of tensors, "
            "a tuple of tensors or one tensor."
        )
    for key, axes in dims.items():
        value = input_of(batch, key)
        if value is None:
            raise WorkloadError(
                f"Workload.dynamic_dims: batch {index} has no input {key!r}; its inputs: {input_keys(batch)}."
            )
        if not isinstance(value, torch.Tensor):
            raise WorkloadError(
                f"Workload.dynamic_dims: input {key!r} of batch {index} is a {type(value).__name__}, not a tensor."
            )
        for axis in axes:
            if axis >= value.dim():
                raise WorkloadError(
                    f"Workload.dynamic_dims: axis {axis} of input {key!r} is out of range; "
                    f"its shape is {tuple(value.shape)} (axes 0..{value.dim() - 1})."
                )


def input_of(batch: Batch, key: InputKey) -> Any:
    """The input `key` of a batch (dict key, tuple position, or 0 for a lone tensor), or None."""
    if isinstance(batch, dict):
        return batch.get(key)
    if isinstance(batch, (tuple, list)):
        return batch[key] if isinstance(key, int) and key < len(batch) else None
    return batch if key == 0 else None


def input_keys(batch: Batch) -> list[InputKey]:
    """The names or positions of a batch's inputs."""
    if isinstance(batch, dict):
        return list(batch)
    if isinstance(batch, (tuple, list)):
        return list(range(len(batch)))
    return [0]


def samples_in(batch: Batch) -> int:
    """Samples in a batch: the leading size of its first tensor (1 if it has none)."""
    values = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (tuple, list)) else [batch]
    for value in values:
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    return 1


def seed_everything(seed: int) -> None:
    """Seed `random`, `numpy` (when installed) and `torch`, so batches drawn afterwards are reproducible."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy  # optional: seeded only when the workload has it installed
    except ImportError:
        return
    numpy.random.seed(seed)


def find_repeated_blocks(model: nn.Module) -> tuple[str, ...]:
    """Paths of ModuleList/Sequential containers holding two or more parameterised children of one class."""
    found: list[str] = []
    for path, module in model.named_modules():
        if not path or any(path.startswith(f"{done}.") for done in found):
            continue
        if not isinstance(module, (nn.ModuleList, nn.Sequential)) or len(module) < 2:
            continue
        children = list(module)
        if len({type(c) for c in children}) == 1 and all(any(True for _ in c.parameters()) for c in children):
            found.append(path)
    return tuple(found)
