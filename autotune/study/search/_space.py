"""Search spaces: declarative YAML files, adapted to the workload and device, sampled into CompileConfigs.

A space file lists the choices for each dimension. `SearchSpace.adapt` drops what cannot
apply (CUDA-graph modes on CPU, padding for static workloads, the optimizer for
inference, scopes without blocks or modules, ...), so no trial is spent on a
configuration that could only fail by construction.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from autotune.errors import AutotuneError, ConfigError, SpaceError
from autotune.measure.tasks import Recipe, read_recipe, recipe_from
from autotune.runtime.buckets import MAX_BUCKETS, choose_buckets
from autotune.runtime.config import (
    PRECISION_OPTIONS,
    CompileConfig,
    InputKey,
    ModuleSettings,
    available_modes,
    checked_mapping,
    inductor_option_defaults,
    mode_options,
)
from autotune.runtime.device import Device, parse_device
from autotune.runtime.features import FEATURES, has_feature
from autotune.runtime.knobs import Need, registered, same_value
from autotune.runtime.limits import printable, quote, read_yaml_file
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._dimensions import DIMENSIONS, NEEDS
from autotune.workload import input_of

__all__ = [
    "BUNDLED_DIR",
    "FEATURES",
    "INFERENCE_ONLY_OPTIONS",
    "KNOWN_MODES",
    "KNOWN_OPTIONS",
    "KnownOption",
    "MAX_CHOICES",
    "SearchSpace",
    "adapt",
    "bundled_spaces",
    "has_feature",
    "load_space",
    "observed_lengths",
    "params_for",
    "resolve_space_path",
    "shared_length_groups",
]

_MAX_PROBES = 20_000
_MAX_SPACE_BYTES = 256 * 1024
_MAX_SPACE_VALUES = 10_000
MAX_CHOICES = 64
"""Choices one dimension may list; a longer list is a mistake or an attack, never a search."""

BUNDLED_DIR = Path(__file__).resolve().parents[2] / "search_spaces"
INFERENCE_ONLY_OPTIONS = ("freezing",)
"""Inductor options that only make sense without autograd (freezing folds weights into constants)."""
KNOWN_MODES = ("default", "lite", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""Modes a space may list; one the installed torch lacks (lite in older releases) is dropped with a note."""


@dataclass(frozen=True)
class KnownOption:
    """An Inductor option autotune knows how to search: what it needs. On which devices it exists is the device's
    to say (`autotune.runtime.device.OPTION_NEEDS`)."""

    needs: str | None = None
    """An option that must be on for this one to change anything (e.g. max_autotune), or None."""
    inference_only: bool = False
    """Options that only make sense without autograd."""


KNOWN_OPTIONS: Mapping[str, KnownOption] = {
    "shape_padding": KnownOption(),
    "coordinate_descent_tuning": KnownOption(),
    "epilogue_fusion": KnownOption(),
    "aggressive_fusion": KnownOption(),
    "cpp_wrapper": KnownOption(),
    "combo_kernels": KnownOption(),
    "max_autotune_gemm_backends": KnownOption(needs="max_autotune"),
    "triton.cudagraph_trees": KnownOption(needs="triton.cudagraphs"),
    "triton.cudagraph_skip_dynamic_graphs": KnownOption(needs="triton.cudagraphs"),
    "freezing": KnownOption(inference_only=True),
    "cpp.weight_prepack": KnownOption(needs="freezing", inference_only=True),
    "cpp.dynamic_threads": KnownOption(),
    "cpp.min_chunk_size": KnownOption(),
    "cpp.enable_unsafe_math_opt_flag": KnownOption(),
}
"""Options a space may list even when the installed torch lacks them: those are dropped with a note."""

_DIMENSIONS = tuple(d.name for d in DIMENSIONS)
_PINNED = tuple(d.name for d in DIMENSIONS if d.pinned)
_KEYS = ("description", "options", "module_modes", "group_mark_dynamic", "bucket_count", "recipes", *_DIMENSIONS)
_MAX_RECIPES = 16
"""Recipes one space may name: they are the study's first trials, so a few are what a search can afford."""


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
                if _ask(trial, f"mark_dynamic.{_group_name(group, index)}", self.mark_dynamic):
                    marks.extend(group)
        # Every sampled option stays, even one equal to Inductor's default: under a mode that sets
        # it otherwise (max-autotune's coordinate_descent_tuning), dropping it would flip it.
        # An option that needs another (GEMM backends need max_autotune) is asked only when that one is on.
        options: dict[str, Any] = {}
        for name, values in sorted(self.options.items(), key=lambda item: _needs(item[0]) is not None):
            need = _needs(name)
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
            dims[f"mark_dynamic.{_group_name(group, index)}"] = self.mark_dynamic
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
    drop = _Dropped(device=parse_device(device), missing=f"not in the installed torch {_torch_version()}")
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
    chosen.update(_workload_rules(drop, chosen, workload, sampled=bool(lengths)))
    knobs = _adapted_knobs(space, drop, present)
    options = dict(space.options)
    for name in list(options):
        why = _option_dropped(name, workload.trains, drop.device, allow_precision_changes)
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
        mark_groups=_mark_groups(workload, shared_lengths if space.group_mark_dynamic else None),
        length_groups=_length_groups(workload, shared_lengths, lengths or {}),
        module_paths=tuple(workload.modules),
        dropped=tuple(drop.dropped),
    )


def _adapted_knobs(space: SearchSpace, drop: _Dropped, present: Mapping[Need, bool]) -> dict[str, tuple[Any, ...]]:
    """The space's knobs with the choices that cannot apply dropped, like the dimensions' (see `adapt`); a knob
    left with its neutral value alone is no question, but one a space pins to another value is asked it."""
    knobs: dict[str, tuple[Any, ...]] = {}
    for name, values in space.knobs.items():
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


@dataclass
class _Dropped:
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


def _length_groups(
    workload: WorkloadSummary,
    shared: Sequence[Sequence[tuple[InputKey, int]]] | None,
    lengths: Mapping[tuple[InputKey, int], Sequence[int]],
) -> tuple[tuple[tuple[tuple[InputKey, int], ...], tuple[int, ...]], ...]:
    """Each group of equal-length pairs (each pair alone without groups) with its first pair's lengths."""
    pairs = [(k, a) for k, axes in workload.dynamic_dims.items() for a in axes]
    groups = [tuple(g) for g in shared] if shared else [(pair,) for pair in pairs]
    return tuple((group, tuple(lengths[group[0]])) for group in groups if group and lengths.get(group[0]))


def _workload_rules(
    drop: _Dropped, chosen: Mapping[str, tuple[Any, ...]], workload: WorkloadSummary, sampled: bool
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


def _option_dropped(name: str, trains: bool, device: Device, allow_precision_changes: bool) -> str | None:
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


def _neutral(dimension: str) -> tuple[Any, ...]:
    """A dimension's choice that changes nothing (the field's default in `SearchSpace`)."""
    default: tuple[Any, ...] = SearchSpace.__dataclass_fields__[dimension].default  # type: ignore[assignment]
    return default


def _torch_version() -> str:
    import torch  # loaded already by anything that adapts a space; not on `import autotune`

    return str(torch.__version__)


def _needs(option: str) -> str | None:
    known = KNOWN_OPTIONS.get(option)
    return known.needs if known else None


def _ask(trial: Suggester, name: str, choices: tuple[Any, ...]) -> Any:
    # A single choice is not a question: leaving it out keeps the sampler's space small.
    return choices[0] if len(choices) == 1 else trial.suggest_categorical(name, list(choices))


def _settings(mode: str, options: Mapping[str, Any]) -> ModuleSettings:
    # torch.compile takes a mode or options, not both: options carry the mode's own settings too.
    if options:
        return ModuleSettings(mode=None, options={**mode_options(mode), **options})
    return ModuleSettings(mode=mode)


def _group_name(group: Sequence[tuple[InputKey, int]], index: int) -> str:
    key, axis = group[0]
    return f"{key}:{axis}" if len(group) == 1 else f"{key}:{axis}+{len(group) - 1}"


def _mark_groups(
    workload: WorkloadSummary, shared: Sequence[Sequence[tuple[InputKey, int]]] | None
) -> tuple[tuple[tuple[InputKey, int], ...], ...]:
    pairs = [(key, axis) for key, axes in workload.dynamic_dims.items() for axis in axes]
    if shared is None:
        return tuple((pair,) for pair in pairs)
    groups: list[tuple[tuple[InputKey, int], ...]] = []
    placed: set[tuple[InputKey, int]] = set()
    for group in shared:
        members = tuple(p for p in group if p in pairs and p not in placed)
        if members:
            groups.append(members)
            placed.update(members)
    groups.extend((p,) for p in pairs if p not in placed)
    return tuple(groups)


def bundled_spaces() -> dict[str, Path]:
    """The search spaces that ship with autotune, by name."""
    return {path.stem: path for path in sorted(BUNDLED_DIR.glob("*.yaml"))}


def resolve_space_path(name_or_path: str) -> Path:
    """A bundled space's name (e.g. 'quick') or a path to a YAML file."""
    bundled = bundled_spaces()
    if name_or_path in bundled:
        return bundled[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise SpaceError(
            f"--space {quote(name_or_path)}: no such file, and not a bundled space; bundled: {sorted(bundled)}."
        )
    return path


@functools.lru_cache(maxsize=32)
def load_space(name_or_path: str) -> SearchSpace:
    """Read and validate a search-space file (YAML through safe_load)."""
    path = resolve_space_path(name_or_path)
    origin = str(path)
    try:
        data = read_yaml_file(path, "a search space", max_bytes=_MAX_SPACE_BYTES, max_nodes=_MAX_SPACE_VALUES)
    except ConfigError as exc:
        raise SpaceError(str(exc)) from None
    data = checked_mapping(data, (*_KEYS, *registered()), origin, SpaceError)
    if not isinstance(data.get("description"), str) or not data["description"].strip():
        raise SpaceError(f"{origin}: 'description' must say what the space is for.")
    values: dict[str, Any] = {"name": path.stem, "description": data["description"].strip()}
    modes = (*KNOWN_MODES, *(m for m in available_modes() if m not in KNOWN_MODES))
    for entry in DIMENSIONS:
        if entry.name in data:
            check = functools.partial(entry.check, modes=modes)
            values[entry.name] = _choices(origin, entry.name, data[entry.name], check, entry.allowed_text(modes))
    if "bucket_count" in data:
        values["bucket_count"] = _choices(
            origin,
            "bucket_count",
            data["bucket_count"],
            lambda v: type(v) is int and 1 <= v <= MAX_BUCKETS,
            f"an integer from 1 to {MAX_BUCKETS}",
        )
    for flag in ("module_modes", "group_mark_dynamic"):
        if flag in data:
            if not isinstance(data[flag], bool):
                raise SpaceError(f"{origin}: {flag}: {quote(data[flag])} must be true or false.")
            values[flag] = data[flag]
    values["options"] = _option_choices(origin, data.get("options") or {})
    values["knobs"] = _knob_choices(origin, data, bundled=path.parent == BUNDLED_DIR)
    values["recipes"] = _recipes(origin, data.get("recipes") or {}, path.parent)
    return SearchSpace(**values)


def _recipes(origin: str, raw: object, folder: Path) -> tuple[Recipe, ...]:
    """The `recipes:` section: name -> a recipe (`autotune.measure.tasks.Recipe`), in the file's order.

    A recipe is written as answers to questions the space file may ask (`scope: regional`, with an optional
    `description`), as a whole configuration in a recipe file's form (`description` and `config`), or as the path
    of a recipe file, relative to the space file's folder. Whether a recipe is among the space's choices is decided
    when the study is seeded, on the space adapted to the workload and device: one it cannot express is skipped with
    the reason.
    """
    if not isinstance(raw, dict):
        raise SpaceError(f"{origin}: recipes: {quote(raw)} must map recipe names to recipes.")
    if len(raw) > _MAX_RECIPES:
        raise SpaceError(f"{origin}: recipes: {len(raw)} recipes; a space may name at most {_MAX_RECIPES}.")
    recipes: list[Recipe] = []
    for name, given in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise SpaceError(f"{origin}: recipes: {quote(name)} is not a recipe name (a non-empty string).")
        where = f"{origin}: recipes.{printable(name)}"
        try:
            if isinstance(given, str):
                recipes.append(replace(read_recipe(_recipe_path(where, folder, given)), name=name))
            elif isinstance(given, dict) and "config" in given:
                recipes.append(recipe_from(given, where, name))
            elif isinstance(given, dict):
                recipes.append(_answered(where, name, given))
            else:
                raise SpaceError(
                    f"{where}: {quote(given)} must map questions to answers (e.g. {{mode: reduce-overhead}}; {{}} is "
                    "plain torch.compile), give a `description` and a `config` as a recipe file does, or name a "
                    "recipe file."
                )
        except ConfigError as exc:
            raise SpaceError(str(exc) if str(exc).startswith(origin) else f"{where}: {exc}") from None
    return tuple(recipes)


def _recipe_path(where: str, folder: Path, given: str) -> Path:
    """A recipe file a space names: a .yaml or .yml file, relative to the space file's folder."""
    path = folder / given
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise SpaceError(
            f"{where}: {quote(given)} is not a recipe file (.yaml or .yml) relative to the space file's folder."
        )
    return path


def _answered(where: str, name: str, given: Mapping[Any, Any]) -> Recipe:
    """A recipe written as answers to the space's questions, with an optional description."""
    questions = (*_DIMENSIONS, "bucket_count", *registered())
    answers = {k: v for k, v in given.items() if k != "description"}
    for key in answers:
        if not isinstance(key, str) or not (key in questions or key.startswith("options.")):
            raise SpaceError(
                f"{where}: {quote(key)} is not a question a space asks; allowed: {', '.join(questions)}, "
                "options.NAME, or description."
            )
    description = given.get("description")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise SpaceError(f"{where}: description: {quote(description)} must be a non-empty string.")
    shown = ", ".join(f"{k}={v!r}" for k, v in answers.items()) or "plain torch.compile(model)"
    return Recipe(
        name=name, description=description.strip() if description else f"the space's recipe: {shown}", answers=answers
    )


def _knob_choices(origin: str, data: Mapping[str, Any], bundled: bool) -> dict[str, tuple[Any, ...]]:
    """The registered knobs the file lists, each checked; a bundled space also gets what each knob offers it."""
    choices: dict[str, tuple[Any, ...]] = {}
    stem = Path(origin).stem
    for name, entry in registered().items():
        if name in data:
            choices[name] = _choices(origin, name, data[name], entry.allows, entry.allowed_text())
        elif bundled and stem in entry.offered:
            choices[name] = tuple(entry.offered[stem])
    return choices


def _choices(origin: str, name: str, raw: object, check: Any, allowed: str) -> tuple[Any, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpaceError(f"{origin}: {name}: expected a non-empty list of choices, got {quote(raw)}.")
    _few_enough(origin, name, raw)
    for value in raw:
        if not check(value):
            raise SpaceError(f"{origin}: {name}: {quote(value)} is not allowed; use {allowed}.")
    if len(set(map(repr, raw))) != len(raw):
        raise SpaceError(f"{origin}: {name}: {quote(raw)} lists a choice twice.")
    return tuple(raw)


def _few_enough(origin: str, name: str, choices: list[Any]) -> None:
    if len(choices) > MAX_CHOICES:
        raise SpaceError(f"{origin}: {name}: {len(choices)} choices; a dimension may list at most {MAX_CHOICES}.")


def _option_choices(origin: str, raw: object) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, Mapping):
        raise SpaceError(f"{origin}: options: expected a mapping of Inductor option to choices, got {quote(raw)}.")
    result: dict[str, tuple[Any, ...]] = {}
    if len(raw) > MAX_CHOICES:
        raise SpaceError(f"{origin}: options: {len(raw)} Inductor options; a space may search at most {MAX_CHOICES}.")
    for name, choices in raw.items():
        name = printable(str(name))[:80]
        if not isinstance(choices, list) or not choices:
            raise SpaceError(f"{origin}: options.{name}: expected a non-empty list of choices, got {quote(choices)}.")
        _few_enough(origin, f"options.{name}", choices)
        if name in KNOWN_OPTIONS and name not in inductor_option_defaults():
            # Known to autotune but not to this torch: `adapt` drops it with a note.
            result[str(name)] = tuple(choices)
            continue
        for value in choices:
            try:
                CompileConfig(mode=None, options={name: value})
            except ConfigError as exc:
                raise SpaceError(f"{origin}: options.{name}: {quote(value)}: {exc}") from None
        result[str(name)] = tuple(choices)
    return result


def params_for(space: SearchSpace, config: CompileConfig) -> dict[str, Any] | None:
    """The answers that make `space.suggest` return `config`, or None when the space cannot express it.

    Trials are enqueued by their answers (Optuna parameters), and a space that grew since the
    configuration was found asks more or other questions than its trial answered; so the
    answers are found again by trying them, pinning what maps straight onto a setting.
    """
    wanted = config.to_dict()
    pinned = {
        **{name: getattr(config, name) for name in _PINNED},
        # A knob's parameter is its value: absent from the configuration, it was asked and left neutral.
        **{name: config.knobs.get(name, registered()[name].neutral) for name in space.knobs},
        # A sampled option is kept as sampled (see `suggest`), and a group is marked whole or not at all.
        **{f"options.{name}": value for name, value in config.options.items() if name in space.options},
        **{
            f"mark_dynamic.{_group_name(group, index)}": group[0] in config.mark_dynamic
            for index, group in enumerate(space.mark_groups)
        },
    }
    stack: list[dict[str, Any]] = [{}]
    probes = 0
    while stack and probes < _MAX_PROBES:
        probes += 1
        probe = _Probe(stack.pop(), pinned)
        try:
            found = space.suggest(probe)
        except (AutotuneError, _Impossible):
            found = None
        if found is not None and found.to_dict() == wanted:
            return probe.params
        # Try the other answers of every open question, keeping the answers before it.
        for index in reversed(range(len(probe.open))):
            name, choices = probe.open[index]
            before = {n: probe.params[n] for n, _ in probe.open[:index]}
            stack.extend({**probe.fixed, **before, name: choice} for choice in reversed(choices[1:]))
    return None


class _Impossible(Exception):
    """No choice of a question can give the wanted configuration."""


class _Probe:
    """A stand-in for an Optuna trial: fixed answers where given, else the first possible choice."""

    def __init__(self, fixed: dict[str, Any], pinned: Mapping[str, Any]) -> None:
        self.fixed = fixed
        self.pinned = pinned
        self.params: dict[str, Any] = {}
        self.open: list[tuple[str, list[Any]]] = []

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        if name in self.fixed:
            value = self.fixed[name]
        else:
            possible = [c for c in choices if name not in self.pinned or same_value(c, self.pinned[name])]
            if not possible:
                raise _Impossible(name)
            value = possible[0]
            if len(possible) > 1:
                self.open.append((name, possible))
        self.params[name] = value
        return value


def observed_lengths(summary: WorkloadSummary, batches: Sequence[Any]) -> dict[tuple[InputKey, int], list[int]]:
    """Each declared (input, axis) pair's length in every batch: what 'buckets' padding learns from."""
    return {
        (key, axis): [int(input_of(b, key).shape[axis]) for b in batches]
        for key, axes in summary.dynamic_dims.items()
        for axis in axes
    }


def shared_length_groups(summary: WorkloadSummary, batches: Sequence[Any]) -> list[list[tuple[InputKey, int]]]:
    """Declared (input, axis) pairs grouped by equal lengths in every batch (e.g. input_ids/labels/attention_mask)."""
    signature: dict[tuple[int, ...], list[tuple[InputKey, int]]] = {}
    for key, axes in summary.dynamic_dims.items():
        for axis in axes:
            lengths = tuple(int(input_of(b, key).shape[axis]) for b in batches)
            signature.setdefault(lengths, []).append((key, axis))
    return list(signature.values())
