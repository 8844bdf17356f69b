"""Resolving a `"pkg.mod:attr"` target into a `Workload`: a Workload, a module, or a factory of either."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from typing import Any

from torch import nn

from autotune.errors import WorkloadError
from autotune.workload import hf
from autotune.workload.contract import Workload

__all__ = ["resolve"]


def resolve(spec: str) -> Workload:
    """Turn a `"pkg.mod:attr"` target into a Workload; the target may be a Workload, a module or a factory."""
    module_name, attr = _split_spec(spec)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise WorkloadError(f"--model {spec!r}: cannot import {module_name!r}: {detail}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise WorkloadError(
                f"--model {spec!r}: {module_name!r} has no attribute {attr!r}; "
                f"its public callables: {_public_callables(module)}."
            )
        target = getattr(target, part)
    return _as_workload(target, spec, called=False)


def _split_spec(spec: object) -> tuple[str, str]:
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise WorkloadError(f"--model {spec!r}: expected 'package.module:attribute', e.g. 'examples.toy:model'.")
    module_name, attr = spec.split(":")
    if not module_name or not attr:
        raise WorkloadError(f"--model {spec!r}: expected 'package.module:attribute', e.g. 'examples.toy:model'.")
    return module_name, attr


def _public_callables(module: Any) -> list[str]:
    return sorted(
        n for n, v in vars(module).items() if not n.startswith("_") and callable(v) and not inspect.ismodule(v)
    )


def _as_workload(target: Any, spec: str, called: bool) -> Workload:
    if isinstance(target, Workload):
        return target
    if isinstance(target, nn.Module):
        if hf.is_pretrained_model(target):
            return hf.workload_for(target)
        raise WorkloadError(
            f"--model {spec!r}: the target is a bare {type(target).__name__}, and autotune cannot tell what "
            "batches to feed it; return autotune.Workload(model=..., batches=..., task=...) instead "
            "(only transformers PreTrainedModels get synthesised batches)."
        )
    if callable(target) and not called and not isinstance(target, type):
        try:
            parameters = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):  # some builtins have no signature; calling them tells
            parameters = []
        required = [
            p.name
            for p in parameters
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if required:
            raise WorkloadError(f"--model {spec!r}: the factory must take no arguments, but it requires {required}.")
        try:
            result = target()
        except WorkloadError:
            raise
        except Exception as exc:
            raise WorkloadError(f"--model {spec!r}: calling the factory raised {type(exc).__name__}: {exc}") from exc
        return _as_workload(result, spec, called=True)
    what = "the factory returned" if called else "the target is"
    kind = f"the class {target.__name__}" if isinstance(target, type) else f"an object of type {type(target).__name__}"
    raise WorkloadError(
        f"--model {spec!r}: {what} {kind}; accepted: an autotune.Workload, a torch.nn.Module, "
        "or a zero-argument callable returning either."
    )
