"""Which answers make a space suggest a given configuration: how a known configuration is enqueued as a trial."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.errors import AutotuneError
from autotune.runtime.config import CompileConfig
from autotune.runtime.knobs import registered, same_value
from autotune.study.search._dimensions import DIMENSIONS
from autotune.study.search._lengths import group_name
from autotune.study.search._space import SearchSpace

__all__ = ["params_for"]

_MAX_PROBES = 20_000
_PINNED = tuple(d.name for d in DIMENSIONS if d.pinned)


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
            f"mark_dynamic.{group_name(group, index)}": group[0] in config.mark_dynamic
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
