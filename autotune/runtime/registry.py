"""Registries filled by modules: each public module of a package declares one thing under a fixed name.

Adding a knob (`autotune.runtime.knobs`) or an objective (`autotune.measure.stats.objectives`) is
adding a module to its package; nothing lists them by hand. Modules are found by `pkgutil`
and imported when first asked for, in the order of their names.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

__all__ = ["declared_in"]

T = TypeVar("T")


def declared_in(package: str, attribute: str, kind: type[T]) -> list[tuple[str, T]]:
    """(module name, its `attribute`) for every module of `package` whose name does not start with '_'; a module
    whose `attribute` is missing or not a `kind` is a TypeError that names it."""
    found: list[tuple[str, T]] = []
    path = importlib.import_module(package).__path__
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        entry = getattr(module, attribute, None)
        if not isinstance(entry, kind):
            raise TypeError(f"{package}.{info.name}: defines no {attribute}, an instance of {kind.__name__}.")
        found.append((info.name, entry))
    return found
