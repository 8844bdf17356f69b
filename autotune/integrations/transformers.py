"""A tuned configuration applied where people train: a `transformers.Trainer`, or a loop prepared by accelerate.

    from autotune.integrations.transformers import apply_to_trainer

    trainer = Trainer(model=model, args=args, train_dataset=..., data_collator=...)
    apply_to_trainer(trainer, "outputs/<study>/best.yaml")
    trainer.train()

`apply_to_trainer` compiles the model in place (state_dict keys and checkpoints stay the same),
runs the configuration's `prepare_batch` on every batch the Trainer computes a loss on, and,
through a `TrainerCallback`, compiles the optimizer step once the Trainer has created its
optimizer, and calls `finish_warmup()` after the warm-up steps when the configuration has
settings for then (the eager stance). Compiled autograd, when chosen, wraps the Trainer's
backward. The compile cache exported beside best.yaml is loaded when it is there.

With accelerate's own loop, apply after `prepare`:

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    tuned = apply_to_accelerate(model, optimizer, "outputs/<study>/best.yaml")
    for batch in loader:
        loss = model(**tuned.prepare_batch(batch)).loss
        tuned.module.backward(loss, run=accelerator.backward)
        ...
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from transformers import Trainer, TrainerCallback

from autotune.errors import ConfigError, WorkloadError
from autotune.integrations._training import (
    compile_optimizer_step,
    load_cache_beside,
    read_for_training,
    refuse_other_model,
)
from autotune.runtime.tuned import TunedConfig
from autotune.workload.trainer import infer_padding, refuse_compile_flags, trainer_workload

__all__ = ["WARMUP_STEPS", "apply_to_accelerate", "apply_to_trainer", "infer_padding", "trainer_workload"]

WARMUP_STEPS = 8
"""Training steps after which `finish_warmup()` is called, for a configuration with settings for after the warm-up
(the eager stance): the usual shapes have compiled by then (autotune warms up on 8 batches before it measures)."""


def apply_to_trainer(
    trainer: Trainer, path: str | os.PathLike[str], *, warmup_steps: int = WARMUP_STEPS
) -> TunedConfig:
    """Apply the configuration in `path` (a best.yaml) to `trainer`; call it before `trainer.train()`.

    Raises WorkloadError when the Trainer's arguments ask for torch_compile, and ConfigError when
    the configuration was tuned for another task or another model class. Warns, as
    `autotune.load` does, when it was tuned in another environment. Returns the configuration.
    """
    if not isinstance(trainer, Trainer):
        raise WorkloadError(f"apply_to_trainer: expected a transformers.Trainer, got {type(trainer).__name__}.")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 1:
        raise ConfigError(f"apply_to_trainer: warmup_steps={warmup_steps!r} must be an integer >= 1.")
    refuse_compile_flags(trainer.args)
    if trainer.model is None:
        raise WorkloadError("apply_to_trainer: the Trainer has no model yet; build it with model=... (or model_init).")
    tuned = _loaded(path, trainer.model)
    tuned.apply(trainer.model, None)
    _prepare_every_batch(trainer, tuned)
    if tuned.config.backward_wrappers():
        _compiled_backward(trainer, tuned)
    trainer.add_callback(_Tuned(tuned, warmup_steps))
    return tuned


def apply_to_accelerate(model: nn.Module, optimizer: Any, path: str | os.PathLike[str]) -> TunedConfig:
    """Apply the configuration in `path` to a model and optimizer returned by `Accelerator.prepare`.

    The model (or the module a distributed wrapper holds) is compiled in place; the optimizer
    step is compiled on the torch optimizer the prepared one wraps, with its learning rate made a
    tensor so that a scheduler does not recompile it. Returns the configuration, whose
    `prepare_batch` and `module.backward(loss, run=accelerator.backward)` the loop then calls.
    """
    inner = getattr(model, "module", model)
    tuned = _loaded(path, inner)
    tuned.apply(inner, None)
    if optimizer is not None and tuned.config.compile_optimizer:
        compile_optimizer_step(tuned, optimizer)
    return tuned


def _loaded(path: str | os.PathLike[str], model: nn.Module) -> TunedConfig:
    """Read best.yaml (warning on another environment), refuse another task or model, load the compile cache."""
    # As warnings.warn counts from here: this function, the apply_* function, the user's line.
    tuned = read_for_training(path, trainer="a Trainer", stacklevel=3)
    refuse_other_model(tuned, path, model)
    load_cache_beside(tuned, path)
    return tuned


def _prepare_every_batch(trainer: Trainer, tuned: TunedConfig) -> None:
    """Pad and mark every batch the Trainer computes a loss on, after it reached the device."""
    compute_loss = trainer.compute_loss
    needed = set(tuned.workload.dynamic_dims)

    def prepared_compute_loss(model: nn.Module, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        missing = needed - set(inputs.keys())
        if missing:
            raise ConfigError(
                f"the configuration pads and marks {sorted(needed)}, but this batch has no {sorted(missing)}; "
                f"its inputs: {sorted(inputs.keys())}. Was it tuned on another collator?"
            )
        return compute_loss(model, tuned.prepare_batch(inputs), *args, **kwargs)

    trainer.compute_loss = prepared_compute_loss  # type: ignore[method-assign]


def _compiled_backward(trainer: Trainer, tuned: TunedConfig) -> None:
    """Run accelerate's backward (which the Trainer calls) under the configuration's compiled autograd."""
    accelerator_backward = trainer.accelerator.backward

    def backward(loss: torch.Tensor, **kwargs: Any) -> None:
        tuned.module.backward(loss, run=lambda value: accelerator_backward(value, **kwargs))

    trainer.accelerator.backward = backward  # type: ignore[method-assign]


class _Tuned(TrainerCallback):
    """Compiles the optimizer step once the Trainer made it; ends the warm-up after `warmup_steps` steps."""

    def __init__(self, tuned: TunedConfig, warmup_steps: int) -> None:
        self.tuned = tuned
        self.warmup_steps = warmup_steps
        self.steps = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
        if self.tuned.config.compile_optimizer and optimizer is not None:
            compile_optimizer_step(self.tuned, optimizer)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps += 1
        if self.steps == self.warmup_steps and self.tuned.config.after_warmup_settings():
            self.tuned.module.finish_warmup()
