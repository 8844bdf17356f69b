"""A tuned configuration applied to a Lightning training run, as a callback.

    from autotune.integrations.lightning import AutotuneCallback

    trainer = lightning.Trainer(callbacks=[AutotuneCallback("outputs/<study>/best.yaml")], ...)
    trainer.fit(module, datamodule=data)

When the fit starts (after `configure_model`, once the strategy has set the module up), the
callback compiles the module the configuration was tuned for in place (the LightningModule, or
the one module of the tuned class inside it), so state_dict keys and checkpoints stay the same;
it pads and marks every batch before `training_step` runs on it, and runs the backward pass
under compiled autograd when the configuration says so. When training starts (the optimizers
exist and a checkpoint's state is restored), it compiles the optimizer step, and after
`warmup_steps` optimizer steps it ends the warm-up for a configuration with an eager stance.
The compile cache exported beside best.yaml is loaded when it is there.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from torch import nn

from autotune.errors import ConfigError, WorkloadError
from autotune.integrations._training import compile_optimizer_step, load_cache_beside, read_for_training
from autotune.runtime.tuned import TunedConfig

__all__ = ["WARMUP_STEPS", "AutotuneCallback"]

WARMUP_STEPS = 8
"""Optimizer steps after which `finish_warmup()` is called, for a configuration with settings for after the warm-up
(the eager stance): the usual shapes have compiled by then (autotune warms up on 8 batches before it measures)."""

# What the callback leaves on a LightningModule: the best.yaml it was compiled with (so that a
# second fit does not compile it again, nor mistake it for a module that compiles itself).
_COMPILED_FROM = "_autotune_compiled_from"
# The hooks the callback wraps for the length of a fit; the wrapper keeps what it replaced.
_WRAPPED_HOOKS = ("training_step", "backward")
_REPLACED = "_autotune_replaced"


class AutotuneCallback(Callback):
    """Apply the configuration in a best.yaml to `Trainer.fit`; add it to `lightning.Trainer(callbacks=[...])`.

    Reads `path` at once, as `autotune.load` does: warns when it was tuned in another environment,
    and raises ConfigError when it was tuned for inference. When the fit starts it raises
    ConfigError for a module of another class than the one tuned, a module that already compiles
    itself, and manual optimization with a configuration that compiles the optimizer step.
    """

    def __init__(self, path: str | os.PathLike[str], *, warmup_steps: int = WARMUP_STEPS) -> None:
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 1:
            raise ConfigError(f"AutotuneCallback: warmup_steps={warmup_steps!r} must be an integer >= 1.")
        self.path = os.fspath(path)
        self.tuned: TunedConfig = read_for_training(path, trainer="Lightning's Trainer.fit", stacklevel=2)
        """The configuration: its `prepare_batch`, for instance, pads and marks batches elsewhere."""
        self.warmup_steps = warmup_steps
        # Read once: the hooks below run every step.
        self._wraps_backward = bool(self.tuned.config.backward_wrappers())
        self._finishes_warmup = bool(self.tuned.config.after_warmup_settings())
        self._first_step = 0
        self._warm = False
        self._backward_calls = 0

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Compile the tuned module in place and wrap `training_step` (and `backward`) for this fit."""
        # Not `setup`: modules built in `configure_model` exist only now, and the strategy has moved them.
        config = self.tuned.config
        if config.compile_optimizer and not pl_module.automatic_optimization:
            raise ConfigError(
                f"{self.path} compiles the optimizer step, and {type(pl_module).__name__} optimizes manually "
                "(automatic_optimization = False): autotune compiles the step Lightning runs with the closure "
                "of automatic optimization. Use automatic optimization, or a configuration with compile_optimizer: false."
            )
        _refuse_step_without_batch(pl_module)
        compiled_from = pl_module.__dict__.get(_COMPILED_FROM)
        here = os.path.realpath(self.path)
        if compiled_from is None:
            target = _tuned_module(self.tuned, self.path, pl_module)
            _refuse_compiled(pl_module)
            load_cache_beside(self.tuned, self.path)
            self.tuned.apply(target, None)
            pl_module.__dict__[_COMPILED_FROM] = here
        elif compiled_from != here:
            raise ConfigError(
                f"{type(pl_module).__name__} was compiled with {compiled_from} in an earlier fit, and this "
                f"AutotuneCallback applies {self.path}: a module is compiled once; build a new one to apply another."
            )
        _wrap(pl_module, "training_step", _prepared_step(pl_module.training_step, self.tuned))
        if self._wraps_backward:
            _wrap(pl_module, "backward", self._compiled_backward(pl_module.backward))

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Compile the optimizer steps: the optimizers exist now, with a checkpoint's state restored."""
        self._first_step = trainer.global_step
        self._warm = False
        if self.tuned.config.compile_optimizer:
            for optimizer in trainer.optimizers:
                _compile_closure_step(self.tuned, optimizer)

    def on_after_backward(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Check that compiled autograd is applied: it needs the strategy to call `LightningModule.backward`."""
        if self._wraps_backward and self._backward_calls == 0:
            raise ConfigError(
                f"{self.path} runs the backward pass under compiled autograd, which autotune applies in "
                f"LightningModule.backward, and {type(trainer.strategy).__name__} with "
                f"{type(trainer.precision_plugin).__name__} ran the backward pass without calling it. "
                "Use a configuration with compiled_autograd: false with this strategy."
            )
        self._backward_calls = 0

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """End the warm-up after `warmup_steps` optimizer steps of this fit (not batches: see accumulate_grad_batches)."""
        if self._warm or not self._finishes_warmup:
            return
        if trainer.global_step - self._first_step >= self.warmup_steps:
            self.tuned.module.finish_warmup()
            self._warm = True

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        """Put back the hooks this fit wrapped and the compiler's stance; the module stays compiled."""
        if stage == "fit":
            self._end_fit(pl_module)

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        """As teardown, which Lightning does not call when the fit raises."""
        self._end_fit(pl_module)

    def _end_fit(self, pl_module: LightningModule) -> None:
        for name in _WRAPPED_HOOKS:
            _unwrap(pl_module, name)
        if self._warm:
            # The stance is process-wide: a later fit (or evaluation) compiles new shapes again.
            torch.compiler.set_stance("default")
            self._warm = False

    def _compiled_backward(self, backward: Callable[..., Any]) -> Callable[..., Any]:
        """`backward` run under the configuration's compiled autograd (Lightning's precision plugin calls it)."""

        @functools.wraps(backward)
        def compiled_backward(loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            self._backward_calls += 1
            self.tuned.module.backward(loss, run=lambda value: backward(value, *args, **kwargs))

        return compiled_backward


def _tuned_module(tuned: TunedConfig, path: str, pl_module: LightningModule) -> nn.Module:
    """The module the configuration was tuned for: the LightningModule, or the one module of the tuned class inside it."""
    wanted = tuned.workload.model_class
    running = type(pl_module).__name__
    if not wanted or wanted == running:
        return pl_module
    found = [name for name, module in pl_module.named_modules() if name and type(module).__name__ == wanted]
    if len(found) == 1:
        return pl_module.get_submodule(found[0])
    if found:
        raise ConfigError(
            f"{path} was tuned for a {wanted} model ({tuned.workload.spec}), and this {running} holds "
            f"{len(found)} of them ({', '.join(found)}); autotune cannot tell which one to compile."
        )
    raise ConfigError(
        f"{path} was tuned for a {wanted} model ({tuned.workload.spec}), and this model is a {running}, "
        f"with no {wanted} inside; search this model to tune it."
    )


def _refuse_compiled(pl_module: LightningModule) -> None:
    """Raise ConfigError, naming the module, when it (or a module inside it) is compiled already."""
    from torch._dynamo import OptimizedModule  # dynamo loads in seconds: only once a fit starts

    name = type(pl_module).__name__
    advice = "autotune compiles it as tuned: remove that compile, or leave out the AutotuneCallback."
    if getattr(pl_module, "_compiler_ctx", None):
        raise ConfigError(f"{name} was passed to Trainer.fit compiled (torch.compile(module)); {advice}")
    for path, module in pl_module.named_modules():
        where = f"{name}.{path}" if path else name
        if isinstance(module, OptimizedModule):
            raise ConfigError(f"{where} is a torch.compile'd {type(module._orig_mod).__name__}; {advice}")
        if getattr(module, "_compiled_call_impl", None) is not None:
            raise ConfigError(f"{where} compiles itself (nn.Module.compile); {advice}")
        for hook in ("forward", "training_step"):
            function = getattr(module, hook, None)
            if hasattr(function, "_torchdynamo_orig_callable"):
                raise ConfigError(f"{where}.{hook} is compiled with torch.compile; {advice}")


def _refuse_step_without_batch(pl_module: LightningModule) -> None:
    """A training_step that takes `dataloader_iter` fetches its own batches: there is none to pad and mark."""
    if "dataloader_iter" in inspect.signature(pl_module.training_step).parameters:
        raise WorkloadError(
            f"{type(pl_module).__name__}.training_step takes dataloader_iter and fetches its own batches, so "
            "autotune cannot pad and mark them; take (batch, batch_idx) to apply a tuned configuration."
        )


def _prepared_step(training_step: Callable[..., Any], tuned: TunedConfig) -> Callable[..., Any]:
    """`training_step` on batches padded and marked as the configuration says (they are on the device by then)."""
    needed = set(tuned.workload.dynamic_dims)

    # functools.wraps keeps the signature Lightning inspects (whether the step takes batch_idx).
    @functools.wraps(training_step)
    def prepared_training_step(batch: Any, *args: Any, **kwargs: Any) -> Any:
        missing = needed - _inputs(batch)
        if missing:
            raise ConfigError(
                f"the configuration pads and marks {sorted(map(str, needed))}, but this batch has no "
                f"{sorted(map(str, missing))}; its inputs: {sorted(map(str, _inputs(batch)))}. "
                "Was it tuned on another collate function?"
            )
        return training_step(tuned.prepare_batch(batch), *args, **kwargs)

    return prepared_training_step


def _inputs(batch: Any) -> set[Any]:
    """The inputs of a batch as the configuration names them: dict keys, tuple positions, 0 for one tensor."""
    if isinstance(batch, torch.Tensor):
        return {0}
    if hasattr(batch, "keys"):
        return set(batch.keys())
    if isinstance(batch, (tuple, list)):
        return set(range(len(batch)))
    return set()


def _wrap(pl_module: LightningModule, name: str, wrapper: Callable[..., Any]) -> None:
    """Put `wrapper` on the module instance in place of the hook `name`, keeping what was there to put back."""
    _unwrap(pl_module, name)  # a fit that raised before its teardown leaves its wrapper
    wrapper.__dict__[_REPLACED] = pl_module.__dict__.get(name)
    pl_module.__dict__[name] = wrapper


def _unwrap(pl_module: LightningModule, name: str) -> None:
    current = pl_module.__dict__.get(name)
    if current is None or _REPLACED not in getattr(current, "__dict__", {}):
        return
    replaced = current.__dict__[_REPLACED]
    if replaced is None:
        del pl_module.__dict__[name]
    else:
        pl_module.__dict__[name] = replaced


def _compile_closure_step(tuned: TunedConfig, optimizer: torch.optim.Optimizer) -> None:
    """Compile `optimizer.step`, which Lightning calls with a closure that runs training_step and backward.

    The closure runs first, eagerly and with gradients on (as torch's own steps run it); the compiled
    step then runs without it, so the forward and backward are never traced into the step's graph.
    """
    if getattr(optimizer.step, "_autotune_closure_first", False):
        return  # the same optimizer in a second fit
    before = optimizer.step
    compile_optimizer_step(tuned, optimizer)
    step_without_closure = optimizer.step

    def step(closure: Callable[[], Any] | None = None, **kwargs: Any) -> Any:
        if closure is None:
            return step_without_closure(**kwargs)
        with torch.enable_grad():
            loss = closure()
        step_without_closure(**kwargs)
        return loss

    step._autotune_closure_first = True  # type: ignore[attr-defined]
    if hasattr(before, "_wrapped_by_lr_sched"):
        # A scheduler made in configure_optimizers wrapped the step to see it called; the compiled step still
        # calls that wrapper, so the scheduler need not warn that the step was replaced after it.
        step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    optimizer.step = step  # type: ignore[method-assign]
