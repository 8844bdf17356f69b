"""A PyTorch Lightning target: the Workload that `trainer.fit(module, datamodule)` would run, derived from it.

A target may be a `LightningModule` with its own `train_dataloader`, or a tuple `(trainer, module)`
or `(trainer, module, datamodule)` in the order of `trainer.fit(module, datamodule)` (a DataLoader
in the datamodule's place works too). `lightning_workload(module, trainer=..., datamodule=...)`
builds the Workload a search measures from what they already say:

* the module itself is the model, in training mode;
* batches from the datamodule's `train_dataloader()`, else the module's; the data hooks run first
  as `fit` runs them (`prepare_data`, `setup("fit")`, then the module's `configure_model`). The
  batch-transfer hooks (`on_before_batch_transfer`, `transfer_batch_to_device`,
  `on_after_batch_transfer`) are not called: autotune moves the batches to the trial device itself;
* a step is `module.training_step(batch, 1)` and its loss the tensor it returns, or its dict's
  `"loss"`. The batch index is 1 for every batch, so that work a step does "every N batches"
  (`batch_idx % N == 0`) is not counted in every measured step;
* the optimizer `configure_optimizers()` returns (an optimizer, a list or tuple of one, a dict
  with "optimizer", or `([optimizer], [schedulers])`). Schedulers are not stepped while measuring:
  a scheduler changes the learning rate, not the cost of a step; the optimizer runs at the rate it
  was configured with, before a scheduler set its first one;
* autocast from the Trainer's precision: '32-true' none, 'bf16-mixed' bfloat16, '16-mixed' float16;
* gradient accumulation from the Trainer's `accumulate_grad_batches`: a measured optimizer step
  runs over that many batches, as `fit` runs it.

The inputs whose length varies, and the value each is padded with, are inferred from dict batches
with `infer_padding`, as for a Hugging Face Trainer; pass `dynamic_dims` / `pad_values` to override.

The step is measured outside a Trainer: `self.log` does nothing (and its warning that no Trainer is
attached is silenced), and the Trainer's callbacks, gradient clipping and a module's own
`backward`, `optimizer_step` or `optimizer_zero_grad` are not part of the measured step. The
device is the one the search measures on, not the Trainer's accelerator.

Refused by name: a module that compiles itself (autotune decides compilation), manual
optimisation, more than one optimizer, a Trainer on more than one device or with a strategy other
than single-device, no `train_dataloader` and no datamodule, a precision other than those above,
and a tuple of another shape.
Lightning is imported by its users only: objects are recognised through `sys.modules`, for both
`lightning` and the older `pytorch_lightning` package.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import torch
from torch import nn

from autotune.errors import WorkloadError
from autotune.runtime.config import InputKey
from autotune.runtime.summary import TRAIN
from autotune.workload.contract import Workload, seed_everything
from autotune.workload.targets import TargetKind, register_target
from autotune.workload.trainer import INFERENCE_BATCHES, PaddingGuess, chosen_padding, infer_padding

__all__ = ["BATCH_INDEX", "PRECISIONS", "is_lightning_target", "lightning_workload", "target_workload"]

PRECISIONS: dict[str, torch.dtype | None] = {
    "32-true": None,
    "32": None,
    "bf16-mixed": torch.bfloat16,
    "16-mixed": torch.float16,
}
"""Trainer precisions autotune measures, and the autocast dtype each one runs the forward under."""

BATCH_INDEX = 1
"""The `batch_idx` every measured `training_step` gets: a step in the middle of an epoch, not the first."""

_PACKAGES = ("lightning.pytorch", "pytorch_lightning")
_LOG_OUTSIDE_FIT = r"You are trying to `self\.log\(\)` but the `self\.trainer` reference is not registered"


def is_lightning_target(obj: Any) -> bool:
    """Whether `obj` is a LightningModule (compiled or not) or a tuple holding a Lightning object.

    Lightning is not imported: without it loaded, nothing can be a Lightning object.
    """
    if not _loaded():
        return False
    if _is(_inner(obj), "LightningModule"):
        return True
    kinds = ("Trainer", "LightningModule", "LightningDataModule")
    return isinstance(obj, tuple) and any(_is(_inner(item), kind) for item in obj for kind in kinds)


def target_workload(target: Any, *, report: Callable[[str], None] | None = None) -> Workload:
    """The Workload of a `--model` target: a LightningModule, `(trainer, module)` or `(trainer, module, datamodule)`."""
    if not isinstance(target, tuple):
        return lightning_workload(target, report=report)
    trainer, module, datamodule = _unpacked(target)
    return lightning_workload(module, trainer=trainer, datamodule=datamodule, report=report)


def lightning_workload(
    module: nn.Module,
    *,
    trainer: Any = None,
    datamodule: Any = None,
    dynamic_dims: Mapping[InputKey, Sequence[int]] | None = None,
    pad_values: Mapping[InputKey, float | int | bool] | None = None,
    num_batches: int = 8,
    report: Callable[[str], None] | None = None,
) -> Workload:
    """The Workload `trainer.fit(module, datamodule)` runs; see the module docstring for what is taken from where.

    Without a trainer, there is no autocast and no gradient accumulation. `datamodule` may also be a
    DataLoader (as `trainer.fit(module, loader)` takes one). `dynamic_dims` and `pad_values` replace
    what would be inferred from dict batches; `report` receives one line saying what was derived.
    `num_batches` is rounded up to a multiple of `accumulate_grad_batches`. Raises WorkloadError for
    what the module docstring lists as refused.
    """
    lit: Any = _checked_module(module)  # Any: Lightning's hooks, which nn.Module's type does not know
    autocast, accumulation = _from_trainer(trainer) if trainer is not None else (None, 1)
    with _attached(trainer, lit, datamodule):
        _prepare(lit, datamodule)
        lit.configure_model()
        # configure_model may build or compile submodules: look again.
        _refuse_compiled(module)
        _configured_optimizer(lit, trainer)
        loader = _train_loader(lit, datamodule)
    # Measured outside fit, self.log has nowhere to log; Lightning's warning says so on every first call.
    warnings.filterwarnings("ignore", message=_LOG_OUTSIDE_FIT)
    lines = []
    if trainer is not None:
        lines.append(
            f"Lightning Trainer: precision {str(trainer.precision)!r} "
            f"({f'autocast {autocast}' if autocast else 'no autocast'}), "
            f"{accumulation} batch{'es' if accumulation > 1 else ''} per optimizer step"
        )
    guess = None
    if dynamic_dims is None or pad_values is None:
        guess, line = _guessed_padding(loader)
        lines.append(line)
    if report is not None and lines:
        report("; ".join(lines))
    dims, pads = chosen_padding(guess, dynamic_dims, pad_values)
    module.train()
    return Workload(
        model=module,
        batches=lambda: loader,
        task=TRAIN,
        optimizer=_optimizer_factory(lit, trainer),
        forward=_training_step,
        loss=_step_loss,
        dynamic_dims=dims,
        pad_values=pads,
        autocast=autocast,
        num_batches=-(-num_batches // accumulation) * accumulation,
        accumulation_steps=accumulation,
    )


def _checked_module(module: nn.Module) -> nn.Module:
    """`module`, once it is an uncompiled LightningModule with automatic optimisation and a training_step."""
    if not _is(_inner(module), "LightningModule"):
        raise WorkloadError(f"Lightning target: expected a LightningModule, got {type(module).__name__}.")
    _refuse_compiled(module)
    if getattr(module, "automatic_optimization", True) is False:
        raise WorkloadError(
            f"{type(module).__name__}.automatic_optimization is False: with manual optimisation, training_step "
            "steps the optimizers itself and autotune cannot tell a step's loss from its update. Measure it with "
            "automatic optimisation, or describe the step as an autotune.Workload."
        )
    if not _overrides(module, "training_step"):
        raise WorkloadError(f"{type(module).__name__}: it defines no training_step, so there is no step to measure.")
    return module


def _guessed_padding(loader: Iterable[Any]) -> tuple[PaddingGuess | None, str]:
    """What varies in length in the loader's first batches, and the line that says so."""
    seed_everything(0)
    drawn = list(itertools.islice(iter(loader), INFERENCE_BATCHES))
    if not drawn:
        return None, "the train_dataloader produced no batch"
    if not all(isinstance(b, Mapping) for b in drawn):
        return None, (
            f"the train_dataloader's batches are {type(drawn[0]).__name__}, not dicts: lengths that vary are not "
            "inferred; declare them with autotune.workload.lightning.lightning_workload(..., dynamic_dims=...)"
        )
    guess = infer_padding([dict(b) for b in drawn])
    return guess, f"inferred from the train_dataloader: {guess.describe()}"


def _training_step(model: Any, batch: Any) -> Any:
    return model.training_step(batch, BATCH_INDEX)


def _step_loss(output: Any, batch: Any) -> torch.Tensor:
    loss = output.get("loss") if isinstance(output, Mapping) else output
    if isinstance(loss, torch.Tensor):
        return loss
    if output is None:
        raise WorkloadError(
            "training_step returned None: Lightning skips such a batch, so there is no step to measure on it. "
            "Return the loss for every batch of the train_dataloader."
        )
    what = f"a dict without a 'loss' tensor (keys {list(output)})" if isinstance(output, Mapping) else repr(output)
    raise WorkloadError(
        f"training_step returned {what[:200]}; expected the loss tensor or a dict with the loss under 'loss'."
    )


def _loaded() -> list[ModuleType]:
    return [module for name in _PACKAGES if (module := sys.modules.get(name)) is not None]


def _is(obj: Any, kind: str) -> bool:
    return any(isinstance(obj, cls) for package in _loaded() if (cls := getattr(package, kind, None)) is not None)


def _inner(obj: Any) -> Any:
    """The module inside a `torch.compile(module)` wrapper, or `obj`."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is not None and isinstance(obj, eval_frame.OptimizedModule):
        return obj._orig_mod
    return obj


def _unpacked(target: tuple[Any, ...]) -> tuple[Any, nn.Module, Any]:
    kinds = ", ".join(_kind(item) for item in target)
    datamodule = target[2] if len(target) == 3 else None
    if (
        len(target) not in (2, 3)
        or not _is(target[0], "Trainer")
        or not _is(_inner(target[1]), "LightningModule")
        or not (
            datamodule is None
            or _is(datamodule, "LightningDataModule")
            or isinstance(datamodule, torch.utils.data.DataLoader)
        )
    ):
        raise WorkloadError(
            f"Lightning target: a tuple of ({kinds}); expected (trainer, module) or (trainer, module, datamodule), "
            "in the order of trainer.fit(module, datamodule): a Trainer, a LightningModule, and a "
            "LightningDataModule or DataLoader."
        )
    return target[0], target[1], datamodule


def _kind(obj: Any) -> str:
    for kind in ("Trainer", "LightningModule", "LightningDataModule"):
        if _is(_inner(obj), kind):
            return f"{kind} {type(obj).__name__}" if kind != type(obj).__name__ else kind
    return type(obj).__name__


def _refuse_compiled(module: nn.Module) -> None:
    if _inner(module) is not module:
        raise WorkloadError(
            f"Lightning target: the module is torch.compile({type(_inner(module)).__name__}); autotune decides "
            "how it is compiled. Hand over the module itself, uncompiled."
        )
    for path, sub in module.named_modules():
        where = f"its submodule {path!r}" if path else "the module"
        if _inner(sub) is not sub or getattr(sub, "_compiled_call_impl", None) is not None:
            raise WorkloadError(
                f"Lightning target: {where} ({type(_inner(sub)).__name__}) is already compiled; autotune decides "
                "how the model is compiled. Remove the torch.compile / .compile() call from the module "
                "(or make it optional) for the search."
            )


def _from_trainer(trainer: Any) -> tuple[torch.dtype | None, int]:
    """The autocast dtype and the accumulation steps of a Trainer that runs one process on one device."""
    strategy = trainer.strategy
    if trainer.num_devices != 1:
        raise WorkloadError(
            f"Trainer: it runs on {trainer.num_devices} devices ({type(strategy).__name__}); autotune measures a "
            "step on one device. Build the Trainer for the search with devices=1."
        )
    package = next(p for p in _loaded() if isinstance(trainer, p.Trainer))
    single = sys.modules[f"{package.__name__}.strategies"].SingleDeviceStrategy
    if not isinstance(strategy, single):
        raise WorkloadError(
            f"Trainer.strategy: {type(strategy).__name__} is not a single-device strategy; autotune measures one "
            "process on one device. Build the Trainer for the search with strategy='auto' and devices=1."
        )
    precision = str(trainer.precision)
    if precision not in PRECISIONS:
        raise WorkloadError(
            f"Trainer.precision: {precision!r} is not one autotune measures; allowed: {list(PRECISIONS)} "
            "(float32 weights, with or without autocast). Build the Trainer for the search with one of them."
        )
    accumulation = trainer.accumulate_grad_batches
    if isinstance(accumulation, bool) or not isinstance(accumulation, int) or accumulation < 1:
        raise WorkloadError(f"Trainer.accumulate_grad_batches: {accumulation!r} must be an integer >= 1.")
    return PRECISIONS[precision], accumulation


@contextlib.contextmanager
def _attached(trainer: Any, module: Any, datamodule: Any) -> Iterator[None]:
    """Attach the Trainer while the setup hooks run, as `fit` does: they may read `self.trainer`.

    Detached afterwards: outside `fit`, `self.log` in a module attached to a Trainer raises.
    """
    if trainer is None:
        yield
        return
    previous = module._trainer
    module.trainer = trainer
    has_trainer = _is(datamodule, "LightningDataModule")
    previous_data = datamodule.trainer if has_trainer else None
    if has_trainer:
        datamodule.trainer = trainer
    try:
        yield
    finally:
        module.trainer = previous
        if has_trainer:
            datamodule.trainer = previous_data


def _prepare(module: Any, datamodule: Any) -> None:
    """The data hooks `fit` runs before it asks for a loader: prepare_data, then setup("fit")."""
    with_hooks = datamodule is not None and _is(datamodule, "LightningDataModule")
    if with_hooks:
        datamodule.prepare_data()
    module.prepare_data()
    if with_hooks:
        datamodule.setup("fit")
    module.setup("fit")


def _train_loader(module: Any, datamodule: Any) -> Iterable[Any]:
    if datamodule is not None and not _is(datamodule, "LightningDataModule"):
        return datamodule  # a DataLoader handed in as trainer.fit(module, loader) takes one
    owner = datamodule if datamodule is not None else module
    if not _overrides(owner, "train_dataloader"):
        if datamodule is not None:
            raise WorkloadError(
                f"{type(datamodule).__name__}: the datamodule defines no train_dataloader, so there are no batches to "
                "measure on. Define train_dataloader() on it."
            )
        raise WorkloadError(
            f"{type(module).__name__}: it defines no train_dataloader and no datamodule came with it, so there are no "
            "batches to measure on. Define train_dataloader() on the module, or return (trainer, module, datamodule)."
        )
    loader = owner.train_dataloader()
    loaders = list(loader.values()) if isinstance(loader, Mapping) else loader
    if isinstance(loaders, (list, tuple)) and loaders and all(_is_loader(item) for item in loaders):
        raise WorkloadError(
            f"{type(owner).__name__}.train_dataloader returned {len(loaders)} loaders in a "
            f"{type(loader).__name__}; autotune measures the batches of one. Return one DataLoader for the search."
        )
    return loader  # type: ignore[no-any-return]


def _is_loader(obj: Any) -> bool:
    return isinstance(obj, torch.utils.data.DataLoader)


def _overrides(obj: Any, name: str) -> bool:
    """Whether `obj`'s `name` is its own (or its class's) rather than Lightning's default."""
    if name in vars(obj):
        return True
    owner = next((cls for cls in type(obj).__mro__ if name in vars(cls)), None)
    origin = getattr(owner, "__module__", "") or ""
    return owner is not None and not any(origin == p or origin.startswith(f"{p}.") for p in _PACKAGES)


def _configured_optimizer(module: Any, trainer: Any) -> torch.optim.Optimizer:
    """The one optimizer `configure_optimizers` returns; its schedulers are dropped."""
    with _attached(trainer, module, None):
        result = module.configure_optimizers()
    found = _optimizers_in(result)
    name = type(module).__name__
    if not found:
        raise WorkloadError(
            f"{name}.configure_optimizers returned {type(result).__name__}, which holds no optimizer; a training "
            "step needs one: return an optimizer, or a dict with it under 'optimizer'."
        )
    if len(found) > 1:
        raise WorkloadError(
            f"{name}.configure_optimizers returned {len(found)} optimizers ({', '.join(type(o).__name__ for o in found)}); "
            "autotune measures a step of one optimizer. Return one for the search."
        )
    return found[0]


def _optimizers_in(result: Any) -> list[torch.optim.Optimizer]:
    """Optimizers in what configure_optimizers may return; schedulers, and their config dicts, hold none."""
    if isinstance(result, torch.optim.Optimizer):
        return [result]
    if isinstance(result, Mapping):
        return _optimizers_in(result.get("optimizer"))
    if isinstance(result, (list, tuple)):
        return [optimizer for item in result for optimizer in _optimizers_in(item)]
    return []


def _optimizer_factory(module: Any, trainer: Any) -> Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]:
    """Builds the configured optimizer for the parameters the worker hands over (those of the moved module)."""

    def build(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
        handed = list(params)
        optimizer = _configured_optimizer(module, trainer)
        configured = {id(p) for group in optimizer.param_groups for p in group["params"]}
        if not configured <= {id(p) for p in handed}:
            return type(optimizer)([p for p in handed if p.requires_grad], **optimizer.defaults)
        # The module's own parameters (or some of them, e.g. the trainable ones): the optimizer as configured,
        # at the learning rate it was configured with. A scheduler sets its first rate when it is built and is
        # not stepped here; a warm-up from 0 would leave every measured step at 0, where a compiled step is
        # not the one that runs (the generated code steps eagerly at a rate of 0).
        for group in optimizer.param_groups:
            if "initial_lr" in group:
                group["lr"] = group["initial_lr"]
        return optimizer

    return build


LIGHTNING = register_target(
    TargetKind(
        name="a LightningModule with its own train_dataloader, a tuple (lightning Trainer, LightningModule) or "
        "(lightning Trainer, LightningModule, LightningDataModule)",
        recognises=is_lightning_target,
        build=target_workload,
    )
)
"""Lightning's objects as a `--model` target."""
