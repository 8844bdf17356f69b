"""`Workload`: what a user tunes (model, batches, task), and resolving it from a `"pkg.mod:attr"` target."""

from __future__ import annotations

import importlib
import inspect
import itertools
import os
import random
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from autotune.config import InputKey, checked_mapping, parse_input_key, validate_module_path
from autotune.errors import ConfigError, WorkloadError

__all__ = [
    "TASKS",
    "Workload",
    "WorkloadSummary",
    "find_repeated_blocks",
    "resolve",
    "seed_everything",
]

TASKS = ("train", "infer")
AUTOCAST_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
Batch = Any


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
    """How many batches a trial draws; every step of a trial cycles over these same batches."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, nn.Module):
            raise WorkloadError(f"Workload.model: expected a torch.nn.Module, got {type(self.model).__name__}.")
        if self.task not in TASKS:
            raise WorkloadError(f"Workload.task: {self.task!r} is not allowed; use one of {TASKS}.")
        if self.task == "train" and self.optimizer is None:
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
        self.dynamic_dims = _checked_dims(self.dynamic_dims)
        self.pad_values = _checked_pad_values(self.pad_values, self.dynamic_dims)
        for name in ("modules", "blocks"):
            paths = getattr(self, name)
            if paths is not None:
                setattr(self, name, tuple(self._checked_submodule(p, f"Workload.{name}") for p in paths))
        for path in self.blocks or ():
            container = self.model.get_submodule(path)
            if not isinstance(container, (nn.ModuleList, nn.Sequential)) or len(container) < 2:
                raise WorkloadError(f"Workload.blocks: {path!r} must be a ModuleList/Sequential of two or more blocks.")

    def _checked_submodule(self, path: object, what: str) -> str:
        try:
            validate_module_path(path, what)
            self.model.get_submodule(str(path))
        except (ConfigError, AttributeError) as exc:
            children = [name for name, _ in self.model.named_children()]
            raise WorkloadError(
                f"{what}: {path!r} is not a submodule of the model ({exc}); its children: {children}."
            ) from None
        return str(path)

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
        source = self.batches() if callable(self.batches) else self.batches
        try:
            batches = list(itertools.islice(iter(source), self.num_batches))
        except TypeError as exc:
            raise WorkloadError(f"Workload.batches: {type(source).__name__} is not iterable ({exc}).") from None
        if not batches:
            raise WorkloadError("Workload.batches: no batch was produced; the iterable is empty.")
        # Mappings such as transformers' BatchEncoding are passed on as plain dicts.
        batches = [dict(b) if isinstance(b, Mapping) and not isinstance(b, dict) else b for b in batches]
        for index, batch in enumerate(batches):
            self._check_batch(batch, index)
        return batches

    def _check_batch(self, batch: Batch, index: int) -> None:
        if not isinstance(batch, (dict, tuple, list, torch.Tensor)):
            raise WorkloadError(
                f"batch {index}: {type(batch).__name__} is not a batch; expected a dict of tensors, "
                "a tuple of tensors or one tensor."
            )
        for key, axes in self.dynamic_dims.items():
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
            return self.loss(output, batch)
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
        longest: dict[InputKey, dict[int, int]] = {}
        for batch in batches:
            for key, axes in self.dynamic_dims.items():
                value = input_of(batch, key)
                for axis in axes:
                    seen = longest.setdefault(key, {}).get(axis, 0)
                    longest[key][axis] = max(seen, int(value.shape[axis]))
        return WorkloadSummary(
            spec=spec,
            task=self.task,
            model_class=type(self.model).__name__,
            modules=self.module_paths(),
            blocks=self.block_paths(),
            dynamic_dims={k: tuple(v) for k, v in self.dynamic_dims.items()},
            pad_values=dict(self.pad_values),
            max_lengths=longest,
            samples_per_batch=samples_in(batches[0]),
            autocast=next((n for n, d in AUTOCAST_DTYPES.items() if d == self.autocast), None),
        )


@dataclass(frozen=True, kw_only=True)
class WorkloadSummary:
    """The plain-data description of a workload that best.yaml records and codegen reads."""

    spec: str
    task: str
    model_class: str = ""
    modules: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    dynamic_dims: Mapping[InputKey, tuple[int, ...]] = field(default_factory=dict)
    pad_values: Mapping[InputKey, float | int | bool] = field(default_factory=dict)
    max_lengths: Mapping[InputKey, Mapping[int, int]] = field(default_factory=dict)
    samples_per_batch: int = 1
    autocast: str | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"workload.task: {self.task!r} is not allowed; use one of {TASKS}.")
        for name in ("spec", "model_class"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"workload.{name}: expected a string, got {getattr(self, name)!r}.")
        if (
            isinstance(self.samples_per_batch, bool)
            or not isinstance(self.samples_per_batch, int)
            or self.samples_per_batch < 1
        ):
            raise ConfigError(f"workload.samples_per_batch: {self.samples_per_batch!r} must be an integer >= 1.")
        for path in (*self.modules, *self.blocks):
            validate_module_path(path, "workload.modules/blocks")
        object.__setattr__(self, "dynamic_dims", _checked_dims(self.dynamic_dims, error=ConfigError))
        object.__setattr__(
            self, "pad_values", _checked_pad_values(self.pad_values, self.dynamic_dims, error=ConfigError)
        )
        lengths: dict[InputKey, dict[int, int]] = {}
        for key, axes in dict(self.max_lengths).items():
            key = parse_input_key(key, "workload.max_lengths")
            if not isinstance(axes, Mapping):
                raise ConfigError(f"workload.max_lengths.{key}: expected a mapping of axis to length, got {axes!r}.")
            for axis, length in axes.items():
                axis = int(axis) if isinstance(axis, str) and axis.isdigit() else axis
                if (
                    isinstance(axis, bool)
                    or not isinstance(axis, int)
                    or isinstance(length, bool)
                    or not isinstance(length, int)
                ):
                    raise ConfigError(f"workload.max_lengths.{key}: {axis!r}: {length!r} must map an axis to a length.")
                lengths.setdefault(key, {})[axis] = length
        object.__setattr__(self, "max_lengths", lengths)
        if self.autocast not in (None, *AUTOCAST_DTYPES):
            raise ConfigError(
                f"workload.autocast: {self.autocast!r} is not allowed; use null or one of {list(AUTOCAST_DTYPES)}."
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for YAML and JSON."""
        return {
            "spec": self.spec,
            "task": self.task,
            "model_class": self.model_class,
            "modules": list(self.modules),
            "blocks": list(self.blocks),
            "dynamic_dims": {k: list(v) for k, v in self.dynamic_dims.items()},
            "pad_values": dict(self.pad_values),
            "max_lengths": {k: dict(v) for k, v in self.max_lengths.items()},
            "samples_per_batch": self.samples_per_batch,
            "autocast": self.autocast,
        }

    @classmethod
    def from_dict(cls, data: object) -> WorkloadSummary:
        """Validate and build from `to_dict` output (a best.yaml `workload:` section)."""
        values = checked_mapping(data, sorted(cls.__dataclass_fields__), "workload")
        for name in ("modules", "blocks"):
            if not isinstance(values.get(name, []), list):
                raise ConfigError(f"workload.{name}: expected a list of module paths, got {values[name]!r}.")
            values[name] = tuple(values.get(name, []))
        if not isinstance(values.get("spec"), str):
            raise ConfigError(f"workload.spec: expected a 'pkg.mod:attr' string, got {values.get('spec')!r}.")
        if "task" not in values:
            raise ConfigError(f"workload.task: the required key is missing; use one of {TASKS}.")
        return cls(**values)


def _checked_dims(dims: object, error: type[Exception] = WorkloadError) -> dict[InputKey, tuple[int, ...]]:
    if not isinstance(dims, Mapping):
        raise error(f"dynamic_dims: expected a mapping of input to axes, got {dims!r}.")
    checked: dict[InputKey, tuple[int, ...]] = {}
    for key, axes in dims.items():
        try:
            key = parse_input_key(key, "dynamic_dims")
        except ConfigError as exc:
            raise error(str(exc)) from None
        if isinstance(axes, int) or not isinstance(axes, (list, tuple)) or not axes:
            raise error(f"dynamic_dims.{key}: expected a non-empty list of axes, got {axes!r}.")
        for axis in axes:
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise error(f"dynamic_dims.{key}: axis {axis!r} must be an integer >= 0.")
        checked[key] = tuple(sorted(set(axes)))
    return checked


def _checked_pad_values(
    values: object, dims: Mapping[InputKey, Any], error: type[Exception] = WorkloadError
) -> dict[InputKey, float | int | bool]:
    if not isinstance(values, Mapping):
        raise error(f"pad_values: expected a mapping of input to padding value, got {values!r}.")
    checked: dict[InputKey, float | int | bool] = {}
    for key, value in values.items():
        try:
            key = parse_input_key(key, "pad_values")
        except ConfigError as exc:
            raise error(str(exc)) from None
        if key not in dims:
            raise error(f"pad_values: {key!r} is not one of the dynamic inputs {list(dims)}; only those are padded.")
        if not isinstance(value, (bool, int, float)):
            raise error(f"pad_values.{key}: {value!r} must be a number or a bool.")
        checked[key] = value
    return checked


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
        import numpy
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


def resolve(spec: str) -> Workload:
    """Turn a `"pkg.mod:attr"` target into a Workload; the target may be a Workload, a module or a factory."""
    module_name, attr = _split_spec(spec)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise WorkloadError(f"--model {spec!r}: cannot import {module_name!r}: {detail}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise WorkloadError(
                f"--model {spec!r}: {module_name!r} has no attribute {attr!r}; "
                f"its public callables: {_public_callables(module)}."
            )
        target = getattr(target, part)
    return _as_workload(target, spec, called=False)


def _split_spec(spec: object) -> tuple[str, str]:
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise WorkloadError(f"--model {spec!r}: expected 'package.module:attribute', e.g. 'examples.toy:model'.")
    module_name, attr = spec.split(":")
    if not module_name or not attr:
        raise WorkloadError(f"--model {spec!r}: expected 'package.module:attribute', e.g. 'examples.toy:model'.")
    return module_name, attr


def _public_callables(module: Any) -> list[str]:
    return sorted(
        n for n, v in vars(module).items() if not n.startswith("_") and callable(v) and not inspect.ismodule(v)
    )


def _as_workload(target: Any, spec: str, called: bool) -> Workload:
    if isinstance(target, Workload):
        return target
    if isinstance(target, nn.Module):
        from autotune import hf

        if hf.is_pretrained_model(target):
            return hf.workload_for(target)
        raise WorkloadError(
            f"--model {spec!r}: the target is a bare {type(target).__name__}, and autotune cannot tell what "
            "batches to feed it; return autotune.Workload(model=..., batches=..., task=...) instead "
            "(only transformers PreTrainedModels get synthesised batches)."
        )
    if callable(target) and not called and not isinstance(target, type):
        try:
            parameters = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):  # some builtins have no signature; calling them tells
            parameters = []
        required = [
            p.name
            for p in parameters
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if required:
            raise WorkloadError(f"--model {spec!r}: the factory must take no arguments, but it requires {required}.")
        try:
            result = target()
        except WorkloadError:
            raise
        except Exception as exc:
            raise WorkloadError(f"--model {spec!r}: calling the factory raised {type(exc).__name__}: {exc}") from exc
        return _as_workload(result, spec, called=True)
    what = "the factory returned" if called else "the target is"
    kind = f"the class {target.__name__}" if isinstance(target, type) else f"an object of type {type(target).__name__}"
    raise WorkloadError(
        f"--model {spec!r}: {what} {kind}; accepted: an autotune.Workload, a torch.nn.Module, "
        "or a zero-argument callable returning either."
    )
