"""What the installed torch offers of the settings that some releases lack, found by probing it.

A setting is probed for the function, keyword or documented value it needs, never inferred
from a version number: torch 2.11, for example, has no `recompile_limit` keyword on
`torch.compile` and no parser of per-axis `dynamic_sources` entries, which 2.13 has. The search
drops the choices a probe fails (`autotune.study.search` adapts its spaces with `has_feature`);
generating code for a configuration that needs a missing one is an error that names it
(`torch_lacks`), instead of a TypeError inside torch.compile or an input silently left unmarked.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import TYPE_CHECKING, Any

from autotune.runtime.knobs import registered

if TYPE_CHECKING:
    from autotune.runtime.config import CompileConfig

__all__ = ["FEATURES", "has_feature", "torch_lacks"]

FEATURES: dict[str, tuple[str, str]] = {
    "mark_as=unbacked": ("torch._dynamo.decorators", "mark_unbacked"),
    # dynamic_sources entries with a per-axis ':N' suffix: without the parser of that suffix, an
    # older torch (2.11) would read 'L['x']:1' as a regex that never matches and mark nothing.
    "mark_as=sources": ("torch._dynamo.variables.builder", "_parse_source_entry"),
}
"""What the installed torch must have for a setting's non-neutral values ('setting'), or for one value
('setting=value'): (module, name) of a function, a function's keyword (`compile:recompile_limit`) or a
stance `set_stance` documents (`set_stance:eager_on_recompile`)."""


def has_feature(setting: str, value: Any = None) -> bool:
    """Whether the installed torch has what `setting`'s `value` (or its non-neutral values) need (see FEATURES,
    and a registered knob's `feature`)."""
    probe = _needed(setting, value)
    return probe is None or _probe(*probe)


def _needed(setting: str, value: Any) -> tuple[str, str] | None:
    entry = registered().get(setting)
    return FEATURES.get(f"{setting}={value}") or FEATURES.get(setting) or (entry.feature if entry else None)


def torch_lacks(config: CompileConfig) -> list[str]:
    """The settings of `config` the installed torch cannot apply, each as 'setting=value (needs module.name)'."""
    asked: list[tuple[str, Any]] = []
    if config.mark_dynamic and config.mark_as != "dynamic":
        asked.append(("mark_as", config.mark_as))
    asked.extend(config.knobs.items())
    missing = []
    for setting, value in asked:
        probe = _needed(setting, value)
        if probe is not None and not _probe(*probe):
            module, name = probe
            missing.append(f"{setting}={value!r} (needs {module}.{name.replace(':', ' with ')})")
    return missing


@functools.cache
def _probe(module_name: str, name: str) -> bool:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    name, _, detail = name.partition(":")
    function: Any = module
    for part in name.split("."):  # an attribute of an attribute, e.g. Inductor's `triton.cudagraph_capture_sizes`
        function = getattr(function, part, None)
    if function is None and not detail:
        return hasattr(_parent(module, name), name.rpartition(".")[2])
    if function is None:
        return False
    if not detail:
        return True
    if name == "set_stance":
        # set_stance accepts any name and fails only on the next compiled call; the stances it
        # supports are the ones its documentation lists, each quoted.
        return f'"{detail}"' in (inspect.getdoc(function) or "")
    try:
        return detail in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _parent(module: Any, name: str) -> Any:
    """What holds the last part of a dotted `name` inside `module` (an attribute may exist and be None)."""
    for part in name.split(".")[:-1]:
        module = getattr(module, part, None)
    return module
