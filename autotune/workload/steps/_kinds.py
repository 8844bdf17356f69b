"""The kinds of step, registered by the modules that define them, and `step_of`: the one place that picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from autotune.errors import WorkloadError
from autotune.workload.steps._step import Step

if TYPE_CHECKING:
    from autotune.workload.contract import Workload

__all__ = ["register_step", "step_kinds", "step_of"]

_KINDS: dict[str, type[Step]] = {}
"""Every registered kind, by its qualified name: a module imported again replaces its kind, never adds a twin."""

S = TypeVar("S", bound=type[Step])


def register_step(kind: S) -> S:
    """Class decorator: make `kind` one of the kinds `step_of` picks from."""
    if not (isinstance(kind, type) and issubclass(kind, Step)):
        raise TypeError(f"register_step takes a subclass of Step, got {kind!r}")
    for needed in ("trains", "checks"):
        if not hasattr(kind, needed):
            raise TypeError(f"{kind.__qualname__} says nothing of `{needed}`: every kind of step sets it")
    _KINDS[f"{kind.__module__}.{kind.__qualname__}"] = kind
    return kind


def step_kinds() -> tuple[type[Step], ...]:
    """The registered kinds, in the order `step_of` asks them: highest `priority` first, then the latest registered."""
    kinds = list(_KINDS.values())
    order = {kind: index for index, kind in enumerate(kinds)}
    return tuple(sorted(kinds, key=lambda kind: (-kind.priority, -order[kind])))


def step_of(workload: Workload) -> Step:
    """The step the workload runs: the first registered kind, in `step_kinds` order, that serves it."""
    for kind in step_kinds():
        if kind.serves(workload):
            return kind(workload)
    names = ", ".join(kind.__qualname__ for kind in step_kinds())
    raise WorkloadError(f"no kind of step serves this workload (task {workload.task!r}); registered: {names}")
