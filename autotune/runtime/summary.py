"""`WorkloadSummary`: the plain-data description of a workload that best.yaml records and codegen reads.

It lives in the runtime layer because a serving process that loads best.yaml needs it,
while the `Workload` itself (a live model and its batches) belongs to the workload layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from autotune.errors import ConfigError, WorkloadError
from autotune.runtime.config import InputKey, checked_mapping, parse_input_key, validate_module_path
from autotune.runtime.knobs import Need
from autotune.runtime.limits import quote

__all__ = ["AUTOCAST_NAMES", "INFER", "TASKS", "TRAIN", "WorkloadSummary", "checked_dims", "checked_pad_values"]

TRAIN: Final = "train"
"""The task of a workload whose step trains: an optimizer steps and gradients flow."""
INFER: Final = "infer"
"""The task of a workload whose step runs the forward alone, under no_grad."""
TASKS = (TRAIN, INFER)
"""The tasks a workload may name."""
AUTOCAST_NAMES = ("bfloat16", "float16")
"""The autocast dtypes a workload may name (torch.bfloat16, torch.float16)."""


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
    accumulation_steps: int = 1
    """Micro-batches per optimizer step (gradient accumulation) the workload was measured with."""
    own_step: bool = False
    """Whether the workload runs the user's own training step (`Workload.step`), which calls loss.backward() itself."""
    dropout: bool = False
    """Whether the model has dropout (a dropout layer with a probability above 0): its training draws random numbers."""

    @property
    def trains(self) -> bool:
        """Whether the workload trains (`task='train'`): an optimizer steps and gradients flow."""
        return self.task == TRAIN

    def meets(self, need: Need, *, allow_precision_changes: bool = False, graph_breaks: int = 0) -> bool:
        """Whether this workload has what a dimension `needs` (see `autotune.runtime.knobs.Need`); precision changes
        are the search's to allow, and `graph_breaks` what plain torch.compile saw of it, not the workload's."""
        return {
            "training": self.trains,
            "autotune's backward": self.trains and not self.own_step,
            "dynamic inputs": bool(self.dynamic_dims),
            "precision changes": allow_precision_changes,
            "one graph": graph_breaks == 0,
            "dropout in training": self.trains and self.dropout,
        }[need]

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"workload.task: {quote(self.task)} is not allowed; use one of {TASKS}.")
        for name in ("spec", "model_class"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"workload.{name}: expected a string, got {quote(getattr(self, name))}.")
        if (
            isinstance(self.samples_per_batch, bool)
            or not isinstance(self.samples_per_batch, int)
            or self.samples_per_batch < 1
        ):
            raise ConfigError(f"workload.samples_per_batch: {quote(self.samples_per_batch)} must be an integer >= 1.")
        steps = self.accumulation_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ConfigError(f"workload.accumulation_steps: {quote(steps)} must be an integer >= 1.")
        for name in ("own_step", "dropout"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"workload.{name}: {quote(getattr(self, name))} must be true or false.")
        for path in (*self.modules, *self.blocks):
            validate_module_path(path, "workload.modules/blocks")
        object.__setattr__(self, "dynamic_dims", checked_dims(self.dynamic_dims, error=ConfigError))
        object.__setattr__(
            self, "pad_values", checked_pad_values(self.pad_values, self.dynamic_dims, error=ConfigError)
        )
        lengths: dict[InputKey, dict[int, int]] = {}
        for key, axes in dict(self.max_lengths).items():
            key = parse_input_key(key, "workload.max_lengths")
            if not isinstance(axes, Mapping):
                raise ConfigError(
                    f"workload.max_lengths.{key}: expected a mapping of axis to length, got {quote(axes)}."
                )
            for axis, length in axes.items():
                axis = int(axis) if isinstance(axis, str) and axis.isdigit() else axis
                if (
                    isinstance(axis, bool)
                    or not isinstance(axis, int)
                    or isinstance(length, bool)
                    or not isinstance(length, int)
                ):
                    raise ConfigError(
                        f"workload.max_lengths.{key}: {quote(axis)}: {quote(length)} must map an axis to a length."
                    )
                lengths.setdefault(key, {})[axis] = length
        object.__setattr__(self, "max_lengths", lengths)
        if self.autocast not in (None, *AUTOCAST_NAMES):
            raise ConfigError(
                f"workload.autocast: {quote(self.autocast)} is not allowed; use null or one of {list(AUTOCAST_NAMES)}."
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
            "accumulation_steps": self.accumulation_steps,
            "own_step": self.own_step,
            # Only where true: a workload written before it was recorded reads, and writes, as it did.
            **({"dropout": True} if self.dropout else {}),
        }

    @classmethod
    def from_dict(cls, data: object) -> WorkloadSummary:
        """Validate and build from `to_dict` output (a best.yaml `workload:` section)."""
        values = checked_mapping(data, sorted(cls.__dataclass_fields__), "workload")
        for name in ("modules", "blocks"):
            if not isinstance(values.get(name, []), list):
                raise ConfigError(f"workload.{name}: expected a list of module paths, got {quote(values[name])}.")
            values[name] = tuple(values.get(name, []))
        if not isinstance(values.get("spec"), str):
            raise ConfigError(f"workload.spec: expected a 'pkg.mod:attr' string, got {quote(values.get('spec'))}.")
        if "task" not in values:
            raise ConfigError(f"workload.task: the required key is missing; use one of {TASKS}.")
        return cls(**values)


def checked_dims(dims: object, error: type[Exception] = WorkloadError) -> dict[InputKey, tuple[int, ...]]:
    if not isinstance(dims, Mapping):
        raise error(f"dynamic_dims: expected a mapping of input to axes, got {quote(dims)}.")
    checked: dict[InputKey, tuple[int, ...]] = {}
    for key, axes in dims.items():
        try:
            key = parse_input_key(key, "dynamic_dims")
        except ConfigError as exc:
            raise error(str(exc)) from None
        if isinstance(axes, int) or not isinstance(axes, (list, tuple)) or not axes:
            raise error(f"dynamic_dims.{key}: expected a non-empty list of axes, got {quote(axes)}.")
        for axis in axes:
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise error(f"dynamic_dims.{key}: axis {quote(axis)} must be an integer >= 0.")
        checked[key] = tuple(sorted(set(axes)))
    return checked


def checked_pad_values(
    values: object, dims: Mapping[InputKey, Any], error: type[Exception] = WorkloadError
) -> dict[InputKey, float | int | bool]:
    if not isinstance(values, Mapping):
        raise error(f"pad_values: expected a mapping of input to padding value, got {quote(values)}.")
    checked: dict[InputKey, float | int | bool] = {}
    for key, value in values.items():
        try:
            key = parse_input_key(key, "pad_values")
        except ConfigError as exc:
            raise error(str(exc)) from None
        if key not in dims:
            raise error(
                f"pad_values: {quote(key)} is not one of the dynamic inputs {list(dims)}; only those are padded."
            )
        if not isinstance(value, (bool, int, float)):
            raise error(f"pad_values.{key}: {quote(value)} must be a number or a bool.")
        checked[key] = value
    return checked
