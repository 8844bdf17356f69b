"""A search space: the choices per dimension, adapted to the workload and device, sampled into CompileConfigs.

A space file (read by `autotune.study.search._space_file`) lists the choices for each
dimension. `SearchSpace.adapt` drops what cannot apply (CUDA-graph modes on CPU, padding
for static workloads, the optimizer for inference, scopes without blocks or modules, ...;
each with why: `autotune.study.search._dropped`), so no trial is spent on a configuration
that could only fail by construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from autotune.errors import ConfigError, SpaceError
from autotune.measure.tasks import Recipe
from autotune.runtime.buckets import choose_buckets
from autotune.runtime.config import CompileConfig, InputKey, ModuleSettings, mode_options
from autotune.runtime.device import parse_device
from autotune.runtime.knobs import registered
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._dimensions import DIMENSIONS, NEEDS
from autotune.study.search._dropped import Dropped, adapted_knobs, option_dropped, torch_version, workload_rules
from autotune.study.search._known import option_needs
from autotune.study.search._lengths import group_name, length_groups, mark_groups

__all__ = ["SearchSpace", "Suggester", "adapt"]

_DIMENSIONS = tuple(d.name for d in DIMENSIONS)


class Suggester(Protocol):
    """The part of `optuna.Trial` a space needs (so this module does not import Optuna)."""

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    """The choices per dimension; `suggest` turns a trial's answers into a CompileConfig."""

    name: str
    description: str
    mode: tuple[str, ...] = ("default",)
    dynamic: tuple[bool | None, ...] = (None,)
    scope: tuple[str, ...] = ("whole",)
    module_modes: bool = False
    """Modular scope: choose a mode per module instead of one for all."""
    mark_dynamic: tuple[bool, ...] = (False,)
    """Per group of declared dynamic axes: whether it is marked dynamic."""
    group_mark_dynamic: bool = True
    """Ask once for inputs whose lengths always agree (input_ids/labels/attention_mask) instead of per axis."""
    padding_alignment: tuple[Any, ...] = (None,)
    bucket_count: tuple[int, ...] = (4,)
    """'buckets' padding: how many lengths to learn (asked only when buckets are chosen)."""
    compile_optimizer: tuple[bool, ...] = (False,)
    mark_as: tuple[str, ...] = ("dynamic",)
    """How marked axes are marked (asked only when some are)."""
    options: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    knobs: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """The registered knobs' choices (`autotune.runtime.knobs`), by name; a knob not here offers its neutral value."""
    recipes: tuple[Recipe, ...] = ()
    """The space's own first trials, in order (`Recipe`: answers to its questions, such as `mode`,
    `padding_alignment` or `options.NAME`, or a whole configuration); when given, a new study starts with these
    instead of the generic recipes."""
    mark_groups: tuple[tuple[tuple[InputKey, int], ...], ...] = ()
    """Filled by `adapt`: the (input, axis) groups marked together."""
    module_paths: tuple[str, ...] = ()
    """Filled by `adapt`: the workload's modules, for per-module modes."""
    length_groups: tuple[tuple[tuple[tuple[InputKey, int], ...], tuple[int, ...]], ...] = ()
    """Filled by `adapt`: each group of (input, axis) pairs of equal lengths, with the lengths seen (for buckets)."""
    dropped: tuple[str, ...] = ()
    """Filled by `adapt`: what was removed and why, for the user."""

    def adapt(
        self,
        workload: WorkloadSummary,
        device: str,
        *,
        graph_breaks: int = 0,
        shared_lengths: Sequence[Sequence[tuple[InputKey, int]]] | None = None,
        lengths: Mapping[tuple[InputKey, int], Sequence[int]] | None = None,
        allow_precision_changes: bool = False,
    ) -> SearchSpace:
        """The space without choices that cannot apply to `workload` on `device`.

        `graph_breaks` is what plain torch.compile saw (fullgraph=True would then only
        fail); `shared_lengths` groups (input, axis) pairs whose lengths always agree;
        `lengths` are each pair's lengths in the fixed and fresh batches, which 'buckets'
        padding learns from (without them it is dropped); settings that change numerics
        stay only with `allow_precision_changes`.
        """
        return adapt(
            self,
            workload,
            device,
            graph_breaks=graph_breaks,
            shared_lengths=shared_lengths,
            lengths=lengths,
            allow_precision_changes=allow_precision_changes,
        )

    def suggest(self, trial: Suggester) -> CompileConfig:
        """Ask the trial for every dimension that applies, given the answers so far."""
        mode = _ask(trial, "mode", self.mode)
        dynamic = _ask(trial, "dynamic", self.dynamic)
        scope = _ask(trial, "scope", self.scope)
        padding = _ask(trial, "padding_alignment", self.padding_alignment)
        buckets = self._buckets(_ask(trial, "bucket_count", self.bucket_count)) if padding == "buckets" else {}
        marks: list[tuple[InputKey, int]] = []
        # mark_dynamic means nothing when every shape is dynamic, static, or padded to one length. Nor is it
        # asked under regional compilation: the marks are on the model's inputs, which the compiled blocks
        # do not take; where a block does take a marked tensor and specialises its length, dynamo fails the
        # run (ConstraintViolationError). Each block still compiles its own lengths dynamically on a recompile.
        if dynamic is None and padding != "max" and scope != "regional":
            for index, group in enumerate(self.mark_groups):
                if _ask(trial, f"mark_dynamic.{group_name(group, index)}", self.mark_dynamic):
                    marks.extend(group)
        # Every sampled option stays, even one equal to Inductor's default: under a mode that sets
        # it otherwise (max-autotune's coordinate_descent_tuning), dropping it would flip it.
        # An option that needs another (GEMM backends need max_autotune) is asked only when that one is on.
        options: dict[str, Any] = {}
        for name, values in sorted(self.options.items(), key=lambda item: option_needs(item[0]) is not None):
            need = option_needs(name)
            if need is None or {**mode_options(mode), **options}.get(need):
                options[name] = _ask(trial, f"options.{name}", values)
        settings: dict[str, ModuleSettings] = {}
        if scope == "modular" and self.module_modes:
            for path in self.module_paths:
                module_mode = _ask(trial, f"module_mode.{path}", self.mode)
                settings[path] = _settings(module_mode, options)
        base = _settings(mode, options)
        compile_optimizer = _ask(trial, "compile_optimizer", self.compile_optimizer)
        try:
            config = CompileConfig(
                mode=base.mode,
                options=base.options,
                dynamic=dynamic,
                scope=scope,
                module_settings=settings,
                mark_dynamic=tuple(marks),
                padding_alignment=padding,
                padding_buckets=buckets,
                compile_optimizer=compile_optimizer,
                mark_as=_ask(trial, "mark_as", self.mark_as) if marks else "dynamic",
            )
            # Each knob is asked last, and only where the rest of the configuration lets it apply.
            knobs = {
                name: _ask(trial, name, choices)
                for name, choices in self.knobs.items()
                if registered()[name].why_not(config) is None
            }
            return replace(config, knobs=knobs) if knobs else config
        except ConfigError as exc:
            raise SpaceError(f"{self.name}: the sampled configuration is invalid: {exc}") from exc

    def _buckets(self, count: int) -> dict[InputKey, dict[int, tuple[int, ...]]]:
        """The `count` buckets learned from each group's lengths, for every (input, axis) of the group."""
        buckets: dict[InputKey, dict[int, tuple[int, ...]]] = {}
        for group, lengths in self.length_groups:
            bounds = choose_buckets(lengths, count)
            for key, axis in group:
                buckets.setdefault(key, {})[axis] = bounds
        return buckets

    def dimensions(self) -> dict[str, tuple[Any, ...]]:
        """Each dimension with more than one choice, for display."""
        dims: dict[str, tuple[Any, ...]] = {}
        for name in _DIMENSIONS:
            if name != "mark_dynamic":  # asked per group of inputs, below
                dims[name] = getattr(self, name)
            if name == "padding_alignment" and "buckets" in self.padding_alignment:
                dims["bucket_count"] = self.bucket_count
        dims.update({f"options.{k}": v for k, v in self.options.items()})
        dims.update(self.knobs)
        for index, group in enumerate(self.mark_groups):
            dims[f"mark_dynamic.{group_name(group, index)}"] = self.mark_dynamic
        return {k: v for k, v in dims.items() if len(v) > 1}


def adapt(
    space: SearchSpace,
    workload: WorkloadSummary,
    device: str,
    *,
    graph_breaks: int = 0,
    shared_lengths: Sequence[Sequence[tuple[InputKey, int]]] | None = None,
    lengths: Mapping[tuple[InputKey, int], Sequence[int]] | None = None,
    allow_precision_changes: bool = False,
) -> SearchSpace:
    """`space` without the choices that cannot apply to `workload` on `device` (see `SearchSpace.adapt`)."""
    drop = Dropped(device=parse_device(device), missing=f"not in the installed torch {torch_version()}")
    present = {
        need: workload.meets(need, allow_precision_changes=allow_precision_changes, graph_breaks=graph_breaks)
        for need in NEEDS
    }
    chosen: dict[str, Any] = {}
    for entry in DIMENSIONS:
        name, neutral = entry.name, _neutral(entry.name).__contains__
        values = getattr(space, name)
        if name == "mode":
            values = drop.modes(name, values)
        chosen[name] = drop.needed(name, values, neutral, entry.needs, present)
    chosen.update(workload_rules(drop, chosen, workload, sampled=bool(lengths)))
    knobs = adapted_knobs(space.knobs, drop, present)
    options = dict(space.options)
    for name in list(options):
        why = option_dropped(name, workload.trains, drop.device, allow_precision_changes)
        if why:
            drop.dropped.append(f"option {name}: {why.replace('missing', drop.missing)}")
            del options[name]
    for name in ("mode", "scope"):
        if not chosen[name]:
            raise SpaceError(
                f"{space.name}: no choice of {name} is left for this workload on {device}; dropped: {drop.dropped}."
            )
    choices: dict[str, Any] = {name: values or _neutral(name) for name, values in chosen.items()}
    return replace(
        space,
        options=options,
        knobs=knobs,
        **choices,
        mark_groups=mark_groups(workload, shared_lengths if space.group_mark_dynamic else None),
        length_groups=length_groups(workload, shared_lengths, lengths or {}),
        module_paths=tuple(workload.modules),
        dropped=tuple(drop.dropped),
    )


def _neutral(dimension: str) -> tuple[Any, ...]:
    """A dimension's choice that changes nothing (the field's default in `SearchSpace`)."""
    default: tuple[Any, ...] = SearchSpace.__dataclass_fields__[dimension].default  # type: ignore[assignment]
    return default


def _ask(trial: Suggester, name: str, choices: tuple[Any, ...]) -> Any:
    # A single choice is not a question: leaving it out keeps the sampler's space small.
    return choices[0] if len(choices) == 1 else trial.suggest_categorical(name, list(choices))


def _settings(mode: str, options: Mapping[str, Any]) -> ModuleSettings:
    # torch.compile takes a mode or options, not both: options carry the mode's own settings too.
    if options:
        return ModuleSettings(mode=None, options={**mode_options(mode), **options})
    return ModuleSettings(mode=mode)
