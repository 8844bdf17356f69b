"""`CompileConfig`: one point of the search space, i.e. everything that decides how a model is compiled.

A config is frozen and validated on construction, so any instance that exists is one that
`codegen` can turn into source without further checks. Errors name the field, the value
and what is allowed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from autotune.errors import AutotuneError, ConfigError
from autotune.runtime.buckets import MAX_BUCKETS
from autotune.runtime.knobs import BackwardWrapper, ProcessSetting, knob, registered, same_value
from autotune.runtime.limits import quote

__all__ = [
    "PRECISION_OPTIONS",
    "SCOPES",
    "SEARCHED_SCOPES",
    "CompileConfig",
    "MARK_AS",
    "InputKey",
    "ModuleSettings",
    "Padding",
    "available_modes",
    "checked_mapping",
    "inductor_option_defaults",
    "is_plain_compile",
    "mode_options",
    "parse_input_key",
    "spelled_mode",
    "validate_input_key",
    "validate_module_path",
]

InputKey = str | int
"""A batch input: a dict key, or a position in a tuple batch."""

Padding = int | Literal["pow2", "max", "buckets"] | None
"""How dynamic axes are padded: as given (None), to a multiple, to powers of two, or to the longest length seen."""

SCOPES = ("whole", "modular", "regional", "none")
"""What is compiled: the whole model, each module, each repeated block, or nothing (eager measured fastest)."""
SEARCHED_SCOPES = SCOPES[:3]
"""The scopes a search space may offer; 'none' is what the export falls back to, not a search choice."""
PADDING_WORDS = ("pow2", "max", "buckets")
CUDA_GRAPH_OPTIONS = ("triton.cudagraphs",)
STRING_OPTIONS = frozenset(
    {
        "max_autotune_gemm_backends",
        "max_autotune_conv_backends",
        "max_autotune_gemm_search_space",
        "max_autotune_flex_search_space",
    }
)
"""Inductor options with string values that are tuning choices (backend lists, search-space sizes)."""

PRECISION_OPTIONS = frozenset({"cpp.enable_unsafe_math_opt_flag"})
"""Inductor options that change numerics (results may differ from eager beyond rounding)."""
MARK_AS = ("dynamic", "unbacked", "sources")
"""How chosen axes are marked: `torch._dynamo.mark_dynamic` or `mark_unbacked` (no 0/1 specialization) on
each batch's tensors, or by input name through `torch.compiler.config.dynamic_sources` (`sources`)."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Segments may start with a digit: the children of nn.Sequential and nn.ModuleList are named "0", "1", ...
_MODULE_PATH = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*\Z")
_SCALARS = (bool, int, float, str, type(None))


@functools.cache
def available_modes() -> tuple[str, ...]:
    """The `torch.compile` modes the installed torch knows, e.g. default, reduce-overhead, max-autotune."""
    import torch._inductor  # Inductor loads in seconds: only when a mode is checked, not on `import autotune`

    return tuple(torch._inductor.list_mode_options())


def mode_options(mode: str | None) -> dict[str, Any]:
    """The Inductor options that `mode` stands for, so that a mode can be combined with other options."""
    if mode is None:
        return {}
    _check_mode(mode, "mode")
    import torch._inductor  # as in available_modes: not on `import autotune`

    return dict(torch._inductor.list_mode_options(mode))


@functools.cache
def inductor_option_defaults() -> Mapping[str, Any]:
    """Every Inductor option name (dotted for nested ones, e.g. `triton.cudagraphs`) with its default."""
    import torch._inductor.config  # as in available_modes: not on `import autotune`

    return MappingProxyType(torch._inductor.config.get_config_copy())


@functools.cache
def _backends() -> tuple[str, ...]:
    import torch._dynamo  # dynamo loads in seconds too: only when a backend is checked

    return tuple(torch._dynamo.list_backends(exclude_tags=()))


def validate_module_path(path: object, what: str) -> str:
    """Return `path` if it is a dotted submodule path such as `encoder.layer.0`; raise otherwise."""
    if not isinstance(path, str) or not _MODULE_PATH.match(path):
        raise ConfigError(
            f"{what}: {quote(path)} is not a submodule path; "
            "expected dotted names of letters, digits and underscores, e.g. 'encoder.layer' or 'layers.0'."
        )
    return path


def validate_input_key(key: object, what: str) -> InputKey:
    """Return `key` if it names a batch input (an identifier, or a tuple position >= 0); raise otherwise."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ConfigError(f"{what}: {quote(key)} is not an input name or a tuple position.")
    if isinstance(key, int) and key < 0:
        raise ConfigError(f"{what}: tuple position {key} must be >= 0.")
    if isinstance(key, str) and not _IDENTIFIER.match(key):
        raise ConfigError(f"{what}: {quote(key)} is not a valid input name; expected letters, digits and underscores.")
    return key


def checked_mapping(
    data: object, allowed: Iterable[str], where: str, error: type[AutotuneError] = ConfigError, noun: str = "key"
) -> dict[Any, Any]:
    """`data` as a dict if it is a mapping whose keys are all in `allowed`; otherwise an error naming them."""
    allowed = list(allowed)
    if not isinstance(data, Mapping):
        raise error(f"{where}: expected a mapping with keys {allowed}, got {type(data).__name__}.")
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise error(f"{where}: unknown {noun}(s) {unknown}; allowed: {allowed}.")
    return dict(data)


def parse_input_key(key: object, what: str) -> InputKey:
    """Like `validate_input_key`, but reads a digit string (a JSON or YAML key) back as a tuple position."""
    if isinstance(key, str) and key.isdigit():
        key = int(key)
    return validate_input_key(key, what)


def _check_mode(mode: object, what: str) -> None:
    if mode is not None and mode not in available_modes():
        raise ConfigError(f"{what}: {quote(mode)} is not a torch.compile mode; allowed: {available_modes()} or None.")


def _check_options(options: object, what: str) -> Mapping[str, Any]:
    if not isinstance(options, Mapping):
        raise ConfigError(f"{what}: expected a mapping of Inductor option names to values, got {quote(options)}.")
    defaults = inductor_option_defaults()
    checked: dict[str, Any] = {}
    for name, value in options.items():
        if name not in defaults:
            close = [k for k in defaults if isinstance(name, str) and name.split(".")[-1] in k][:5]
            hint = f" Did you mean one of {close}?" if close else ""
            raise ConfigError(f"{what}: {quote(name)} is not an option of torch._inductor.config.{hint}")
        if not isinstance(value, _SCALARS):
            raise ConfigError(f"{what}.{name}: {quote(value)} must be a bool, number, string or None.")
        default = defaults[name]
        if isinstance(default, (list, tuple, dict, set)) or callable(default):
            # A scalar cannot stand in for these (e.g. `cpp.cxx` is a tuple naming the compiler to run).
            raise ConfigError(f"{what}.{name}: takes a {type(default).__name__}, which a config cannot set.")
        if (default is None or isinstance(default, str)) and name not in STRING_OPTIONS:
            # Free-form strings name paths, programs and log files: a config file must not be able to
            # point the compiler at them, so only known tuning choices are accepted.
            raise ConfigError(
                f"{what}.{name}: free-form string options cannot be set from a config; "
                f"allowed string options: {sorted(STRING_OPTIONS)}."
            )
        if name in STRING_OPTIONS and not isinstance(value, str):
            raise ConfigError(f"{what}.{name}: {quote(value)} must be a string.")
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{what}.{name}: {quote(value)} must be true or false.")
        numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
        if numeric and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{what}.{name}: {quote(value)} must be a number (default {quote(default)}).")
        checked[name] = value
    return MappingProxyType(dict(sorted(checked.items())))


def _check_mode_and_options(mode: str | None, options: Mapping[str, Any], what: str) -> None:
    if options and mode is not None:
        raise ConfigError(
            f"{what}: mode={quote(mode)} and options={quote(dict(options))} are both set, but torch.compile "
            "accepts only one of them. Use mode=None and put the mode's options in `options` "
            f"(autotune.runtime.config.mode_options({quote(mode)}) gives them)."
        )


@dataclass(frozen=True, kw_only=True)
class ModuleSettings:
    """Per-module compile settings for the modular scope; unset modules use the config's own."""

    mode: str | None = "default"
    """The module's `torch.compile` mode, or None when `options` are given."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """The module's Inductor options."""

    def __post_init__(self) -> None:
        _check_mode(self.mode, "module_settings.mode")
        object.__setattr__(self, "options", _check_options(self.options, "module_settings.options"))
        _check_mode_and_options(self.mode, self.options, "module_settings")

    def to_dict(self) -> dict[str, Any]:
        """Plain data for YAML."""
        return {"mode": self.mode, "options": dict(self.options)}


@dataclass(frozen=True, kw_only=True)
class CompileConfig:
    """Everything that decides how a workload is compiled; one point of the search space."""

    mode: str | None = "default"
    """`torch.compile` mode (see `available_modes()`), or None when `options` are given."""
    dynamic: bool | None = None
    """`torch.compile(dynamic=...)`: None lets dynamo decide, False forces static, True dynamic shapes."""
    backend: str = "inductor"
    """The dynamo backend."""
    mark_dynamic: tuple[tuple[InputKey, int], ...] = ()
    """(input, axis) pairs given to `torch._dynamo.mark_dynamic` before each step."""
    padding_alignment: Padding = None
    """Pad declared dynamic axes: None (as given), a multiple such as 8, 'pow2', 'max' (longest seen), or
    'buckets': to the smallest of `padding_buckets` that fits."""
    padding_buckets: Mapping[InputKey, Mapping[int, tuple[int, ...]]] = field(default_factory=dict)
    """'buckets' padding only: per input and axis, the increasing lengths a batch is padded up to
    (learned from the workload's lengths by the search)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Inductor options, e.g. {'shape_padding': True}; validated against torch._inductor.config."""
    scope: Literal["whole", "modular", "regional", "none"] = "whole"
    """Compile the whole model, each of the workload's modules, each repeated block, or nothing."""
    module_settings: Mapping[str, ModuleSettings] = field(default_factory=dict)
    """Modular scope only: per-module mode/options overriding the config's own."""
    compile_optimizer: bool = False
    """Compile `optimizer.step` (training only); its own mode is the `optimizer_mode` knob."""
    mark_as: Literal["dynamic", "unbacked", "sources"] = "dynamic"
    """How `mark_dynamic` pairs are marked: `mark_dynamic`, `mark_unbacked` (no 0/1 specialization), or
    `sources`: by input name in every compiled frame (`torch.compiler.config.dynamic_sources`)."""
    knobs: Mapping[str, Any] = field(default_factory=dict)
    """The registered knobs' values (`autotune.runtime.knobs`) that differ from their neutral one, by name;
    best.yaml and `to_dict` write each under its own name beside the settings above."""

    def __post_init__(self) -> None:
        _check_mode(self.mode, "mode")
        # Not `in (None, True, False)`: that lets 1 and 0.0 in.
        if self.dynamic is not None and not isinstance(self.dynamic, bool):
            raise ConfigError(f"dynamic: {quote(self.dynamic)} is not allowed; use None, True or False.")
        if not isinstance(self.compile_optimizer, bool):
            raise ConfigError(f"compile_optimizer: {quote(self.compile_optimizer)} must be true or false.")
        if self.backend not in _backends():
            raise ConfigError(f"backend: {quote(self.backend)} is not a dynamo backend; allowed: {_backends()}.")
        object.__setattr__(self, "mark_dynamic", _check_mark_dynamic(self.mark_dynamic))
        _check_padding(self.padding_alignment)
        object.__setattr__(self, "padding_buckets", _check_buckets(self.padding_buckets, self.padding_alignment))
        object.__setattr__(self, "options", _check_options(self.options, "options"))
        _check_mode_and_options(self.mode, self.options, "config")
        if self.options and self.backend != "inductor":
            raise ConfigError(f"options: Inductor options need backend 'inductor', not {quote(self.backend)}.")
        if self.scope not in SCOPES:
            raise ConfigError(f"scope: {quote(self.scope)} is not allowed; use one of {SCOPES}.")
        object.__setattr__(self, "module_settings", _check_module_settings(self.module_settings, self.scope))
        _check_choice(self.mark_as, MARK_AS, "mark_as")
        if self.mark_as != "dynamic" and not self.mark_dynamic:
            raise ConfigError(f"mark_as: {quote(self.mark_as)} says how marked axes are marked, but none are marked.")
        positions = sorted({key for key, _ in self.mark_dynamic if isinstance(key, int)})
        if self.mark_as == "sources" and positions:
            raise ConfigError(
                f"mark_as: 'sources' marks inputs by their name, but tuple position(s) {positions} have none; "
                "use 'dynamic' or 'unbacked' for positional inputs."
            )
        if self.dynamic is False and self.mark_dynamic:
            raise ConfigError(
                f"mark_dynamic: {quote(list(self.mark_dynamic))} conflicts with dynamic=False, which keeps "
                "every shape static; use dynamic=None to mark chosen axes dynamic."
            )
        object.__setattr__(self, "knobs", _check_knobs(self.knobs, self))

    @property
    def changes_precision(self) -> bool:
        """Whether results may differ from eager beyond rounding (needs --allow-precision-changes to be searched)."""
        options = [self.options, *(s.options for s in self.module_settings.values())]
        knobs_change = any(knob(name).changes_numerics for name in self.knobs)
        return knobs_change or any(bool(o.get(name)) for o in options for name in PRECISION_OPTIONS)

    @property
    def falls_back_to_eager(self) -> bool:
        """Whether some shapes are meant to run eagerly after warm-up (a recompile limit or the eager stance)."""
        return any(knob(name).falls_back_to_eager for name in self.knobs)

    @property
    def random_as_eager(self) -> bool:
        """Whether the compiled code draws random numbers as eager does: a training step with dropout is then checked
        in train mode (`autotune.runtime.knobs.random_as_eager`)."""
        return any(knob(name).random_as_eager for name in self.knobs)

    def optimizer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `torch.compile(optimizer.step, ...)`."""
        kwargs: dict[str, Any] = {"fullgraph": False}
        for name, value in self.knobs.items():
            # Also asked while the knobs are checked (a knob's why_not may ask whether CUDA graphs are used), when
            # they may still hold a neutral value or a name that is no knob.
            if name in registered() and not same_value(value, knob(name).neutral):
                kwargs = knob(name).optimizer_compile_kwargs(value, kwargs, self)
        return kwargs

    @property
    def uses_cuda_graphs(self) -> bool:
        """Whether any compiled region replays CUDA graphs (needs a GPU and step marking): the model, a module of
        it, or the compiled optimizer step, whose mode may ask for them too."""
        settings = [ModuleSettings(mode=self.mode, options=self.options), *self.module_settings.values()]
        regions = [{**mode_options(s.mode), **s.options} for s in settings]
        if self.compile_optimizer:
            regions.append(mode_options(self.optimizer_kwargs().get("mode")))
        return any(bool(region.get(opt)) for region in regions for opt in CUDA_GRAPH_OPTIONS)

    def compile_kwargs(self, module_path: str | None = None) -> dict[str, Any]:
        """Keyword arguments for `torch.compile` / `nn.Module.compile`, for the whole model or one module."""
        settings = self.module_settings.get(module_path) if module_path else None
        mode, options = (settings.mode, settings.options) if settings else (self.mode, self.options)
        kwargs: dict[str, Any] = {"backend": self.backend, "fullgraph": False, "dynamic": self.dynamic}
        if options:
            kwargs["options"] = dict(options)
        elif mode not in (None, "default"):
            kwargs["mode"] = mode
        for name, value in self.knobs.items():
            kwargs = knob(name).compile_kwargs(value, kwargs, self)
        return kwargs

    def process_settings(self) -> list[ProcessSetting]:
        """The process-wide settings `apply_compilation` makes for the registered knobs, in the registry's order."""
        settings = (knob(name).process_setting(value) for name, value in self.knobs.items())
        return [setting for setting in settings if setting is not None]

    def backward_wrappers(self) -> list[BackwardWrapper]:
        """The contexts the generated `backward(loss)` runs the backward pass in, outermost first; a training loop
        that finds none may call loss.backward() itself."""
        wrappers = (knob(name).backward_wrapper(value, self) for name, value in self.knobs.items())
        return [wrapper for wrapper in wrappers if wrapper is not None]

    def after_warmup_settings(self) -> list[ProcessSetting]:
        """The settings `finish_warmup()` makes once the usual input shapes have run, in the registry's order; a
        training loop that finds none need not call it."""
        settings = (knob(name).after_warmup(value) for name, value in self.knobs.items())
        return [setting for setting in settings if setting is not None]

    def dynamic_sources(self) -> str:
        """`torch.compiler.config.dynamic_sources` for `mark_as='sources'` (else ''): one entry per marked axis.

        Each entry is a regex on dynamo's name for a value (`L['input_ids']`, or
        `L['kwargs']['input_ids']` in a forward that takes **kwargs) with a `:axis` suffix, so the
        input is marked wherever a compiled frame receives it under that name: the model's forward,
        the frame that resumes after a graph break, a submodule that takes the same argument.
        """
        if self.mark_as != "sources":
            return ""
        return ",".join(f".*{re.escape(f'[{key!r}]')}$:{axis}" for key, axis in self.mark_dynamic)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (str, int, bool, None, lists, dicts) for YAML and JSON."""
        marks: dict[InputKey, list[int]] = {}
        for key, axis in self.mark_dynamic:
            marks.setdefault(key, []).append(axis)
        return {
            "mode": self.mode,
            "dynamic": self.dynamic,
            "backend": self.backend,
            "mark_dynamic": marks,
            "padding_alignment": self.padding_alignment,
            # Only 'buckets' padding has them; other configurations' files stay as they were.
            **({"padding_buckets": _buckets_to_dict(self.padding_buckets)} if self.padding_buckets else {}),
            "options": dict(self.options),
            "scope": self.scope,
            "module_settings": {path: s.to_dict() for path, s in self.module_settings.items()},
            "compile_optimizer": self.compile_optimizer,
            "mark_as": self.mark_as,
            **self.knobs,
        }

    @classmethod
    def from_dict(cls, data: object) -> CompileConfig:
        """Build and validate a config from `to_dict` output (e.g. a YAML `config:` section)."""
        fields = [name for name in cls.__dataclass_fields__ if name != "knobs"]
        values = checked_mapping(data, sorted([*fields, *registered()]), "config", noun="setting")
        values["knobs"] = {name: values.pop(name) for name in list(values) if name in registered()}
        marks = values.get("mark_dynamic") or {}
        if not isinstance(marks, Mapping):
            raise ConfigError(f"mark_dynamic: expected a mapping of input to axes, got {quote(marks)}.")
        pairs: list[tuple[Any, Any]] = []
        for key, axes in marks.items():
            if not isinstance(axes, list):
                raise ConfigError(f"mark_dynamic.{key}: expected a list of axes, got {quote(axes)}.")
            pairs.extend((parse_input_key(key, "mark_dynamic"), axis) for axis in axes)
        values["mark_dynamic"] = tuple(pairs)
        settings = values.get("module_settings") or {}
        if not isinstance(settings, Mapping):
            raise ConfigError(f"module_settings: expected a mapping of module path to settings, got {quote(settings)}.")
        values["module_settings"] = {path: _module_settings_from(path, s) for path, s in settings.items()}
        values["options"] = values.get("options") or {}
        values["padding_buckets"] = _buckets_from(values.get("padding_buckets") or {})
        return cls(**values)

    def describe(self) -> str:
        """One line for tables and logs."""
        if self.scope == "none":
            return "no compilation (eager)"
        # mode None means "options instead of a mode": a mode whose every option they hold is named
        # ("mode=lite+options"), and only the options beyond it follow.
        spelled, options = spelled_mode(self.options) if self.mode is None else (None, dict(self.options))
        mode = self.mode if spelled is None else f"{spelled}+options"
        parts = [f"scope={self.scope}", *([f"mode={mode}"] if mode is not None else [])]
        parts.append(f"dynamic={self.dynamic}")
        if self.mark_dynamic:
            parts.append("mark_dynamic=" + ",".join(f"{k}:{a}" for k, a in self.mark_dynamic))
        if self.padding_alignment == "buckets":
            shown = sorted({bounds for axes in self.padding_buckets.values() for bounds in axes.values()})
            parts.append("pad=buckets" + "|".join("(" + ",".join(map(str, b)) + ")" for b in shown))
        elif self.padding_alignment is not None:
            parts.append(f"pad={self.padding_alignment}")
        parts.extend(f"{k}={v}" for k, v in options.items())
        for path, s in self.module_settings.items():
            named, rest = spelled_mode(s.options) if s.mode is None else (s.mode, dict(s.options))
            if named is not None and s.mode is None:
                named += "+options"
            own = ([f"mode={named}"] if named is not None or not rest else []) + [f"{k}={v}" for k, v in rest.items()]
            parts.append(f"{path}:" + ",".join(own))
        if self.mark_as != "dynamic":
            parts.append(f"mark_as={self.mark_as}")
        if self.compile_optimizer:
            parts.append("compiled optimizer")
        parts.extend(knob(name).describe(value) for name, value in self.knobs.items())
        return " ".join(parts)


def _module_settings_from(path: object, data: object) -> ModuleSettings:
    if isinstance(data, ModuleSettings):
        return data
    if not isinstance(data, Mapping) or set(data) - {"mode", "options"}:
        raise ConfigError(
            f"module_settings.{path}: expected a mapping with 'mode' and/or 'options', got {quote(data)}."
        )
    options = data.get("options") or {}
    # torch.compile takes a mode or options, not both: a module given only options has no mode.
    return ModuleSettings(mode=data.get("mode", None if options else "default"), options=options)


def _check_knobs(values: object, config: CompileConfig) -> Mapping[str, Any]:
    """The registered knobs' non-neutral values, in the registry's order; an error names a bad name or value."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"knobs: expected a mapping of knob name to value, got {quote(values)}.")
    unknown = sorted(str(name) for name in values if name not in registered())
    if unknown:
        raise ConfigError(f"knobs: {unknown} are not knobs; the knobs are {list(registered())}.")
    checked: dict[str, Any] = {}
    for name, entry in registered().items():
        if name not in values or same_value(values[name], entry.neutral):
            continue
        value = values[name]
        if not entry.allows(value):
            raise ConfigError(f"{name}: {quote(value)} is not allowed; use {entry.allowed_text()}.")
        why = entry.why_not(config)
        if why is not None:
            raise ConfigError(f"{name}: {quote(value)} does not apply here: {why}.")
        checked[name] = value
    return MappingProxyType(checked)


def _check_mark_dynamic(marks: object) -> tuple[tuple[InputKey, int], ...]:
    if not isinstance(marks, (tuple, list)):
        raise ConfigError(f"mark_dynamic: expected (input, axis) pairs, got {quote(marks)}.")
    pairs = set()
    for pair in marks:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(f"mark_dynamic: {quote(pair)} is not an (input, axis) pair.")
        key, axis = pair
        validate_input_key(key, "mark_dynamic")
        if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
            raise ConfigError(f"mark_dynamic.{key}: axis {quote(axis)} must be an integer >= 0.")
        pairs.add((key, axis))
    return tuple(sorted(pairs, key=lambda p: (str(type(p[0])), str(p[0]), p[1])))


def _check_choice(value: object, allowed: tuple[str, ...], what: str) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{what}: {quote(value)} is not allowed; use one of {allowed}.")


def _check_padding(padding: object) -> None:
    if padding is None or padding in PADDING_WORDS:
        return
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 2:
        raise ConfigError(
            f"padding_alignment: {quote(padding)} is not allowed; use None (as given), a multiple >= 2 "
            f"such as 8 or 32, or one of {PADDING_WORDS}."
        )


def _check_buckets(buckets: object, padding: object) -> dict[InputKey, dict[int, tuple[int, ...]]]:
    """Increasing lengths >= 1 per (input, axis); required by 'buckets' padding and refused without it."""
    if not isinstance(buckets, Mapping):
        raise ConfigError(f"padding_buckets: expected a mapping of input to axis to lengths, got {quote(buckets)}.")
    if padding == "buckets" and not buckets:
        raise ConfigError("padding_alignment: 'buckets' needs padding_buckets, the lengths to pad up to.")
    if buckets and padding != "buckets":
        raise ConfigError(
            f"padding_buckets: they are the lengths 'buckets' padding pads to, but padding_alignment is {quote(padding)}."
        )
    checked: dict[InputKey, dict[int, tuple[int, ...]]] = {}
    for key, axes in buckets.items():
        validate_input_key(key, "padding_buckets")
        if not isinstance(axes, Mapping) or not axes:
            raise ConfigError(f"padding_buckets.{key}: expected a mapping of axis to lengths, got {quote(axes)}.")
        for axis, bounds in axes.items():
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise ConfigError(f"padding_buckets.{key}: axis {quote(axis)} must be an integer >= 0.")
            lengths = tuple(bounds) if isinstance(bounds, (list, tuple)) else ()
            if not (
                1 <= len(lengths) <= MAX_BUCKETS
                and all(type(n) is int and n >= 1 for n in lengths)
                and all(a < b for a, b in zip(lengths, lengths[1:], strict=False))
            ):
                raise ConfigError(
                    f"padding_buckets.{key}.{axis}: {quote(bounds)} must be 1 to {MAX_BUCKETS} increasing lengths >= 1."
                )
            checked.setdefault(key, {})[axis] = lengths
    return checked


def _buckets_to_dict(buckets: Mapping[InputKey, Mapping[int, tuple[int, ...]]]) -> dict[InputKey, dict[int, list[int]]]:
    return {key: {axis: list(bounds) for axis, bounds in axes.items()} for key, axes in buckets.items()}


def _buckets_from(data: object) -> object:
    """best.yaml's padding_buckets (input names as strings, positions as ints) for `_check_buckets`."""
    if not isinstance(data, Mapping):
        return data
    # JSON (an Optuna trial's attributes) writes the axes as strings too.
    return {
        parse_input_key(key, "padding_buckets"): (
            {int(a) if isinstance(a, str) and a.isdigit() else a: b for a, b in axes.items()}
            if isinstance(axes, Mapping)
            else axes
        )
        for key, axes in data.items()
    }


def _check_module_settings(settings: object, scope: str) -> Mapping[str, ModuleSettings]:
    if not isinstance(settings, Mapping):
        raise ConfigError(f"module_settings: expected a mapping of module path to settings, got {quote(settings)}.")
    if settings and scope != "modular":
        raise ConfigError(
            f"module_settings: only the modular scope takes per-module settings, not scope={quote(scope)}."
        )
    checked = {}
    for path, value in settings.items():
        validate_module_path(path, "module_settings")
        if not isinstance(value, ModuleSettings):
            raise ConfigError(f"module_settings.{path}: expected ModuleSettings, got {quote(value)}.")
        checked[path] = value
    return MappingProxyType(checked)


def spelled_mode(options: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The mode whose every Inductor option `options` holds, at its value, and the options beyond it.

    A sampled configuration with Inductor options carries its mode as those options (torch.compile
    takes one or the other); this names the mode again for people. The mode with the most options
    wins (max-autotune over max-autotune-no-cudagraphs); (None, options) when none fits.
    """
    best: tuple[str | None, dict[str, Any]] = (None, dict(options))
    for mode in available_modes():
        implied = mode_options(mode)
        held = all(name in options and same_value(options[name], value) for name, value in implied.items())
        if implied and held and len(options) - len(implied) < len(best[1]):
            best = (mode, {k: v for k, v in options.items() if k not in implied})
    return best


def is_plain_compile(config: CompileConfig) -> bool:
    """Whether `config` compiles the same code as plain `torch.compile(model)`.

    A sampled Inductor option stays in a configuration even when it equals the installed
    default, so plain compile is also the default mode spelled as its options at their
    defaults (what the plain recipe of a space with Inductor options gives).
    """
    if config == CompileConfig():
        return True
    if config.mode is not None or not config.options:
        return False
    defaults = inductor_option_defaults()
    for name, value in config.options.items():
        if name not in defaults or type(defaults[name]) is not type(value) or defaults[name] != value:
            return False
    return replace(config, mode="default", options={}) == CompileConfig()
