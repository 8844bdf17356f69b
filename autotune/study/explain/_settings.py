"""A configuration as the settings it adds to plain compile, and the configuration any subset of them makes.

A setting is what a person would name as one choice: the mode, one Inductor option, dynamic
shapes, the scope (with its per-module settings), the marked axes (with how they are marked),
the padding (with its buckets), the compiled optimizer step, one knob. Every subset builds a
valid `CompileConfig`: a setting that applies only with another (a knob whose `why_not` refuses
the rest, an option that needs another option) is left out with it, so the subset's effective
settings may be fewer than asked.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from autotune.runtime.config import CompileConfig, mode_options, spelled_mode
from autotune.runtime.knobs import knob, registered

__all__ = ["Setting", "config_with", "effective", "settings_of"]

_FIELDS = ("dynamic", "backend", "scope", "mark_dynamic", "padding_alignment", "compile_optimizer")
"""The plan's fields that are one setting each, in the order they are listed (mode and options come first)."""
_WITH = {
    "scope": ("module_settings",),
    "mark_dynamic": ("mark_as",),
    "padding_alignment": ("padding_buckets",),
}
"""Fields that travel with a setting: they mean nothing without it."""


@dataclass(frozen=True)
class Setting:
    """One setting of a configuration that plain compile does not make."""

    name: str
    """Its key: a field of `CompileConfig` ('compile_optimizer'), 'mode', 'options.NAME', or a knob's name."""
    text: str
    """How people read it, e.g. 'compile_optimizer=True' or 'options.shape_padding=True'."""


def _mode_and_options(config: CompileConfig) -> tuple[str, dict[str, Any]]:
    """The mode a configuration compiles with ('default' when none) and the Inductor options beyond it."""
    if config.mode is not None:
        return config.mode, dict(config.options)
    mode, rest = spelled_mode(config.options)
    return mode or "default", rest


def settings_of(config: CompileConfig) -> tuple[Setting, ...]:
    """The settings `config` makes beyond plain compile (`CompileConfig()`), in a fixed order."""
    plain = CompileConfig()
    mode, options = _mode_and_options(config)
    found: list[Setting] = []
    if mode != "default":
        found.append(Setting("mode", f"mode={mode}"))
    found.extend(Setting(f"options.{name}", f"options.{name}={value!r}") for name, value in options.items())
    for name in _FIELDS:
        value = getattr(config, name)
        if value != getattr(plain, name):
            found.append(Setting(name, f"{name}={_shown(value)}"))
    found.extend(Setting(name, f"{name}={_shown(value)}") for name, value in config.knobs.items())
    return tuple(found)


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(f"{key}:{axis}" for key, axis in value)
    return repr(value) if isinstance(value, str) else str(value)


def config_with(
    config: CompileConfig, names: Collection[str], option_needs: Mapping[str, str] | None = None
) -> CompileConfig:
    """Plain compile with the settings of `config` named in `names` (see `Setting.name`) and no others.

    A setting whose prerequisite is not among them is left out: an option that needs an option
    left out (`option_needs`, option -> the option it needs), a knob that does not apply to the rest.
    """
    chosen = set(names)
    needs = option_needs or {}
    mode, options = _mode_and_options(config)
    kept = {
        name: value
        for name, value in options.items()
        if f"options.{name}" in chosen and (needs.get(name) is None or f"options.{needs[name]}" in chosen)
    }
    mode = mode if "mode" in chosen else "default"
    values: dict[str, Any] = {"mode": None, "options": {**mode_options(mode), **kept}} if kept else {"mode": mode}
    for name in _FIELDS:
        if name in chosen:
            values[name] = getattr(config, name)
            values.update({extra: getattr(config, extra) for extra in _WITH.get(name, ())})
    built = CompileConfig(**values)
    knobs: dict[str, Any] = {}
    for name in registered():
        if name in chosen and name in config.knobs:
            with_knob = {**knobs, name: config.knobs[name]}
            if knob(name).why_not(CompileConfig(**values, knobs=knobs)) is None:
                knobs = with_knob
    return CompileConfig(**values, knobs=knobs) if knobs else built


def effective(
    config: CompileConfig, names: Collection[str], option_needs: Mapping[str, str] | None = None
) -> frozenset[str]:
    """The settings of `config` that `config_with(config, names)` actually makes."""
    made = {setting.name for setting in settings_of(config_with(config, names, option_needs))}
    return frozenset(name for name in made if name in set(names))
