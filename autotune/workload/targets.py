"""The kinds of `--model` target that say their own batches and step, beyond a `Workload` and a bare module.

Each is registered by the module that adapts it (`trainer.py`: a Hugging Face `Trainer`; `lightning.py`:
Lightning's objects), as the kinds of step are: resolving a target asks each registered kind, in the
order they were registered, whether it recognises the object, and the first that does builds the
workload. Adding a kind of target is a module that calls `register_target`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from autotune.workload.contract import Workload

__all__ = ["TargetKind", "register_target", "target_kinds", "target_of"]


class BuildsWorkload(Protocol):
    def __call__(self, target: Any, /, *, report: Callable[[str], None] | None = None) -> Workload: ...


@dataclass(frozen=True, kw_only=True)
class TargetKind:
    """One kind of target: how it is recognised and how its workload is built."""

    name: str
    """What a user gives, in words, as the error for an unknown target lists it ("a transformers.Trainer")."""
    recognises: Callable[[Any], bool]
    """Whether an object is of this kind; it must not import a library the object's own module did not load."""
    build: BuildsWorkload
    """The workload of such an object; `report` says what was derived from it, where somebody reads it."""


_KINDS: dict[str, TargetKind] = {}


def register_target(kind: TargetKind) -> TargetKind:
    """Make `kind` one that resolving a target asks; registered again under its name, it replaces the earlier one."""
    if not isinstance(kind, TargetKind):
        raise TypeError(f"register_target takes a TargetKind, got {kind!r}")
    _KINDS[kind.name] = kind
    return kind


def target_kinds() -> tuple[TargetKind, ...]:
    """The registered kinds, in the order they are asked."""
    return tuple(_KINDS.values())


def target_of(obj: Any) -> TargetKind | None:
    """The first registered kind that recognises `obj`, if any."""
    return next((kind for kind in _KINDS.values() if kind.recognises(obj)), None)
