"""What every training integration does with a best.yaml: read it for training, check the model, load its cache, compile the step.

Imports neither transformers nor Lightning, so that each integration needs only its own library.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from autotune.errors import ConfigError
from autotune.runtime.compile_cache import CACHE_FILE
from autotune.runtime.tuned import TunedConfig, load

__all__ = ["compile_optimizer_step", "load_cache_beside", "read_for_training", "refuse_other_model"]


def read_for_training(path: str | os.PathLike[str], *, trainer: str, stacklevel: int) -> TunedConfig:
    """Read best.yaml as `autotune.load` does, and refuse one tuned for inference.

    `trainer` names what trains, for the message (e.g. "a Trainer"). The warning on another
    environment is re-issued so that it points at the user's line: `stacklevel` is the one the
    caller of this function would give `warnings.warn` for that.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = load(path)
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=stacklevel + 1)
    if not tuned.workload.trains:
        raise ConfigError(
            f"{path} was tuned for the {tuned.workload.task!r} task, and {trainer} trains: its settings were "
            "measured on forward passes without gradients. Search the training itself, e.g. "
            "`autotune search --model mypkg.train:trainer`."
        )
    return tuned


def refuse_other_model(tuned: TunedConfig, path: str | os.PathLike[str], model: nn.Module) -> None:
    """Raise ConfigError when `tuned` names a model class and `model` is of another one."""
    running = type(model).__name__
    if tuned.workload.model_class and tuned.workload.model_class != running:
        raise ConfigError(
            f"{path} was tuned for a {tuned.workload.model_class} model ({tuned.workload.spec}), "
            f"and this model is a {running}; search this model to tune it."
        )


def load_cache_beside(tuned: TunedConfig, path: str | os.PathLike[str]) -> dict[str, int]:
    """Load the compile cache exported beside best.yaml, when the configuration has one and the file is there.

    Returns what torch loaded (an empty dict when nothing was).
    """
    cache = Path(path).parent / CACHE_FILE
    if tuned.compile_cache and cache.is_file():
        return tuned.load_compile_cache(cache)
    return {}


def compile_optimizer_step(tuned: TunedConfig, optimizer: Any) -> torch.optim.Optimizer:
    """Compile the step of the torch optimizer behind `optimizer` (accelerate wraps it), with tensor learning rates.

    Returns the torch optimizer whose step was compiled; one compiled already is left as it is.
    """
    inner = optimizer
    # accelerate's AcceleratedOptimizer is an Optimizer itself, whose step calls the one it wraps.
    while isinstance(getattr(inner, "optimizer", None), torch.optim.Optimizer):
        inner = inner.optimizer
    if not isinstance(inner, torch.optim.Optimizer):
        raise ConfigError(f"compile_optimizer: {type(optimizer).__name__} holds no torch.optim.Optimizer to compile.")
    if getattr(inner, "_autotune_compiled", False):
        return inner
    for group in inner.param_groups:
        # A float learning rate is a constant of the compiled step: every value a scheduler sets would recompile it.
        if not isinstance(group["lr"], torch.Tensor):
            group["lr"] = torch.tensor(float(group["lr"]))
    tuned.module.compile_optimizer(inner)
    inner._autotune_compiled = True  # type: ignore[attr-defined]
    return inner
