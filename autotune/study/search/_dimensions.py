"""Every question a search space asks about a `CompileConfig` field, declared once, in the order a trial is asked.

A dimension's name is the space file's key, `SearchSpace`'s field (its choices, the first of
which is the neutral one) and `CompileConfig`'s field. Its entry here says which values a
space file may list (`check`, and `allowed` for the error), what it needs of the workload
(`needs`: a training task, a backward pass autotune runs, declared dynamic inputs, or
--allow-precision-changes; without
it only the neutral choice stays), and whether the configuration takes the answer as it is
(`pinned`). What the installed torch must have for a value is `autotune.runtime.features`'s
to say, by the same name; how a value becomes code is `autotune.runtime.codegen`'s.
docs/developing.md has the checklist for adding one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.runtime.config import MARK_AS, PADDING_WORDS, SEARCHED_SCOPES
from autotune.runtime.knobs import Need

__all__ = ["DIMENSIONS", "NEEDS", "Dimension", "dimension"]

NEEDS: dict[Need, str] = {
    "training": "inference has no optimizer or backward pass",
    "autotune's backward": (
        "compiled autograd runs where autotune calls backward(loss): inference has no backward pass, and a "
        "workload's own step calls loss.backward() itself"
    ),
    "dynamic inputs": "the workload declares no dynamic inputs",
    "precision changes": "changes numerics; search it with --allow-precision-changes",
    "one graph": "plain torch.compile saw graph breaks, which it turns into failures",
    "dropout in training": "the model has no dropout, or the workload does not train: nothing random is drawn",
}
"""Why a dimension's non-neutral choices are dropped where what it `needs` is missing."""


@dataclass(frozen=True)
class Dimension:
    """One question of a search space (see the module's docstring)."""

    name: str
    check: Callable[..., bool]
    """`check(value, modes=...)`: whether a space file may list this value, given the compile modes a space may name."""
    allowed: str
    """What `check` accepts, in words for the error; '{modes}' stands for those modes."""
    needs: Need | None = None
    pinned: bool = True
    """The configuration's field takes the answer as it is, so `params_for` can pin it; False for `mode` (spread
    over module settings and options) and `mark_dynamic` (one answer per group of inputs)."""

    def allowed_text(self, modes: tuple[str, ...]) -> str:
        return self.allowed.replace("{modes}", str(modes))


def _boolean(value: Any, modes: tuple[str, ...] = ()) -> bool:
    return isinstance(value, bool)


def _mode(value: Any, modes: tuple[str, ...] = ()) -> bool:
    return value in modes


_BOOLEAN = "false or true"

DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("mode", _mode, "one of {modes}", pinned=False),
    Dimension("dynamic", lambda v, modes=(): v is None or isinstance(v, bool), "null, false or true"),
    Dimension("scope", lambda v, modes=(): v in SEARCHED_SCOPES, f"one of {SEARCHED_SCOPES}"),
    Dimension("mark_dynamic", _boolean, _BOOLEAN, needs="dynamic inputs", pinned=False),
    Dimension(
        "padding_alignment",
        lambda v, modes=(): v is None or v in PADDING_WORDS or (type(v) is int and v >= 2),
        f"null, an integer >= 2 or one of {PADDING_WORDS}",
        needs="dynamic inputs",
    ),
    Dimension("compile_optimizer", _boolean, _BOOLEAN, needs="training"),
    Dimension("mark_as", lambda v, modes=(): v in MARK_AS, f"one of {MARK_AS}", needs="dynamic inputs"),
)


def dimension(name: str) -> Dimension:
    """The dimension called `name`; KeyError for a name that is not one."""
    for entry in DIMENSIONS:
        if entry.name == name:
            return entry
    raise KeyError(name)
