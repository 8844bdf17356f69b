"""What cannot apply: the choices adapting a space to a workload and a device drops, each with why (the device, the
installed torch, what the workload is, numerics)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.runtime.config import PRECISION_OPTIONS, available_modes, inductor_option_defaults
from autotune.runtime.device import Device
from autotune.runtime.features import has_feature
from autotune.runtime.knobs import Need, registered, same_value
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._dimensions import NEEDS
from autotune.study.search._known import INFERENCE_ONLY_OPTIONS, KNOWN_OPTIONS, KnownOption

__all__ = ["Dropped", "adapted_knobs", "option_dropped", "torch_version", "workload_rules"]


@dataclass
class Dropped:
    """The choices `adapt` removes, each with why: what the search prints and records."""

    device: Device
    """The device the space is adapted to: which modes and options exist there."""
    missing: str
    """Why a choice the installed torch lacks is dropped."""
    dropped: list[str] = field(default_factory=list)

    def keep(self, name: str, values: tuple[Any, ...], allowed: Any, why: str) -> tuple[Any, ...]:
        """The values `allowed` accepts; the others are recorded as dropped for `why`."""
        kept = tuple(v for v in values if allowed(v))
        if len(kept) < len(values):
            self.dropped.append(f"{name} {[v for v in values if v not in kept]}: {why}")
        return kept

    def needed(
        self,
        name: str,
        values: tuple[Any, ...],
        neutral: Callable[[Any], bool],
        need: Need | None,
        present: Mapping[Need, bool],
    ) -> tuple[Any, ...]:
        """The values a dimension keeps: its neutral one, and the others where the workload has what the dimension
        `need`s and the installed torch what each value needs (`has_feature`)."""
        if need is not None:
            values = self.keep(name, values, lambda v: neutral(v) or present[need], NEEDS[need])
        return self.keep(name, values, lambda v: neutral(v) or has_feature(name, v), self.missing)

    def modes(self, name: str, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """Compile modes the installed torch has and the device offers (no CUDA-graph modes off a GPU), each
        dropped with the device's reason."""
        kept = self.keep(name, values, lambda m: m in available_modes(), self.missing)
        for why in dict.fromkeys(filter(None, map(self.device.why_not, kept))):
            kept = self.keep(name, kept, lambda m, why=why: self.device.why_not(m) != why, why)
        return kept


def adapted_knobs(
    choices: Mapping[str, tuple[Any, ...]], drop: Dropped, present: Mapping[Need, bool]
) -> dict[str, tuple[Any, ...]]:
    """A space's knobs' `choices` with those that cannot apply dropped, like the dimensions' (see `adapt`); a knob
    left with its neutral value alone is no question, but one a space pins to another value is asked it."""
    knobs: dict[str, tuple[Any, ...]] = {}
    for name, values in choices.items():
        knob = registered()[name]
        neutral = functools.partial(same_value, knob.neutral)
        values = drop.needed(name, values, neutral, knob.needs, present)
        for value in values:
            setting = None if neutral(value) else knob.device_setting_for(value)
            why = drop.device.why_not(setting) if setting else None
            if why is not None:  # e.g. a CUDA-graph mode of the optimizer step, on a CPU
                values = drop.keep(name, values, lambda v, value=value: not same_value(v, value), why)
        if len(values) > 1 or (values and not neutral(values[0])):
            knobs[name] = values
    return knobs


def workload_rules(
    drop: Dropped, chosen: Mapping[str, tuple[Any, ...]], workload: WorkloadSummary, sampled: bool
) -> dict[str, tuple[Any, ...]]:
    """The choices that cannot apply for what this workload is, beyond what each dimension `needs`."""
    scopes = drop.keep(
        "scope", chosen["scope"], lambda s: s != "regional" or bool(workload.blocks), "no repeated blocks"
    )
    scopes = drop.keep(
        "scope", scopes, lambda s: s != "modular" or len(workload.modules) >= 2, "fewer than two modules"
    )
    declared = all(
        axis in workload.max_lengths.get(k, {}) for k, axes in workload.dynamic_dims.items() for axis in axes
    )
    padding = drop.keep(
        "padding_alignment",
        chosen["padding_alignment"],
        lambda p: p != "max" or declared,
        "the workload declares no max_lengths to pad to",
    )
    padding = drop.keep(
        "padding_alignment",
        padding,
        lambda p: p != "buckets" or sampled,
        "no lengths were sampled to learn buckets from",
    )
    mark_as = drop.keep(
        "mark_as",
        chosen["mark_as"],
        lambda v: v != "sources" or not any(isinstance(k, int) for k in workload.dynamic_dims),
        "positional inputs have no name to mark them by",
    )
    return {"scope": scopes, "padding_alignment": padding, "mark_as": mark_as}


def option_dropped(name: str, trains: bool, device: Device, allow_precision_changes: bool) -> str | None:
    """Why a space's Inductor option cannot apply here ('missing' for one the installed torch lacks), or None."""
    known = KNOWN_OPTIONS.get(name, KnownOption())
    if name not in inductor_option_defaults():
        return "missing"
    why = device.why_not(name)
    if why:
        return why
    if (name in INFERENCE_ONLY_OPTIONS or known.inference_only) and trains:
        return "inference only"
    if name in PRECISION_OPTIONS and not allow_precision_changes:
        return "changes numerics; search it with --allow-precision-changes"
    return None


def torch_version() -> str:
    import torch  # loaded already by anything that adapts a space; not on `import autotune`

    return str(torch.__version__)
