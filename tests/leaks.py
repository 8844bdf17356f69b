"""What a test module may not leave behind: PyTorch's functions replaced, or its compiler settings changed.

A test that patches PyTorch undoes it when it ends (pytest's `monkeypatch`, `config.patch`); a module
that patches at import, or a patch never undone, changes every test that runs after it in the same
process, in an order that depends on how the tests were handed out. `PyTorchAsFound` notes what
PyTorch's modules hold once, then after each test module names what differs and puts it back, so the
module that leaked fails, whichever order the tests ran in.
"""

from __future__ import annotations

import importlib
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

LIBRARIES = tuple(
    {str(Path(torch.__file__).parents[1]), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
"""Where installed libraries live: PyTorch's folder's parent, and the environment's site-packages."""

WATCHED = (
    "torch._dynamo.config",
    "torch._inductor.config",
    "torch._inductor.cpu_vec_isa",
    "torch._inductor.codecache",
    "torch._functorch.config",
)
"""Imported before the first note, so that a test importing (and patching) them first is still caught."""

CONFIGS = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")


def _replaceable(value: Any) -> bool:
    """A function, class or other callable (a cached function): what a patch replaces. Values (counters, caches)
    change by design and are not watched."""
    # callable() asks the value's type, never the value: an attribute access of some deprecated objects warns.
    return callable(value)


def _functions(module: ModuleType) -> dict[str, Any]:
    try:
        items = list(vars(module).items())
    except TypeError:
        return {}
    return {name: value for name, value in items if _replaceable(value)}


def _a_library_s_own(value: Any) -> bool:
    """Whether `value` is an installed library's code, not a test's: torch replaces some of its functions itself on
    first use (dynamo's wrappers of `torch.jit.trace`, the fused optimizers' kernels), and Lightning wraps
    `torch.compile` when it is imported, as it does in a user's process; no test undoes that, or should."""
    for _ in range(4):  # through wrappers (functools.wraps, lru_cache) to the code that runs
        code = getattr(value, "__code__", None)
        if code is not None:
            return str(code.co_filename).startswith(LIBRARIES)
        value = getattr(value, "__wrapped__", None)
        if value is None:
            return False
    return False


def _settings(name: str) -> dict[str, Any]:
    module = sys.modules[name]
    return dict(module.get_config_copy())  # type: ignore[attr-defined]


@dataclass
class PyTorchAsFound:
    """The functions and classes of every PyTorch module loaded at the first note, and the compiler settings."""

    functions: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def note(cls) -> PyTorchAsFound:
        for name in WATCHED:
            importlib.import_module(name)
        found = cls()
        for name, module in list(sys.modules.items()):
            if (name == "torch" or name.startswith("torch.")) and module is not None:
                found.functions[name] = _functions(module)
        for name in CONFIGS:
            found.settings[name] = _settings(name)
        return found

    def differences(self) -> list[str]:
        """What differs now, each in words; everything that differs is put back as it was noted."""
        said = []
        for name, noted in self.functions.items():
            module = sys.modules.get(name)
            if module is None:
                continue
            now = _functions(module)
            for attribute, value in noted.items():
                replaced = now.get(attribute)
                if replaced is value:
                    continue
                if replaced is not None and _a_library_s_own(replaced):
                    noted[attribute] = replaced  # the library's own, from now on
                    continue
                said.append(f"{name}.{attribute} was replaced")
                setattr(module, attribute, value)
        for name, noted in self.settings.items():
            module = sys.modules[name]
            now = _settings(name)
            for key, value in noted.items():
                if key in now and _differs(now[key], value):
                    said.append(f"{name}.{key} is {now[key]!r}, not {value!r}")
                    setattr(module, key, value)
        return said


def _differs(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except Exception:  # tensors, objects without a truth value: compare what they are
        return a is not b
