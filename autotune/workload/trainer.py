"""A Hugging Face `transformers.Trainer` as a target: the Workload it would run, derived from it.

`trainer_workload(trainer)` builds the Workload a search measures from what the Trainer
already knows:

* the model (`trainer.model`), in training mode;
* batches from `trainer.get_train_dataloader()`: its collator, batch size and sampler;
* the optimizer its arguments would create (`Trainer.get_optimizer_cls_and_kwargs`, with the
  Trainer's split into parameters with and without weight decay), or the class and defaults of
  one passed to it;
* the loss as `trainer.compute_loss` computes it (label smoothing or `compute_loss_func`
  included), with `num_items_in_batch` counted as the Trainer counts it;
* autocast from `bf16` / `fp16`;
* gradient accumulation from `gradient_accumulation_steps`: a measured optimizer step runs over
  that many batches, as the Trainer runs it.

The inputs whose length varies, and the value each is padded with, are inferred from what the
collator produced (`infer_padding`): an axis is dynamic when its size differs between batches;
the pad value is what fills the positions the attention mask leaves out, or else the value most
rows end with. Pass `dynamic_dims` / `pad_values` to override them.

Refused by name: `torch_compile=True` in the arguments (autotune decides compilation), and no
train dataset.
transformers is imported only when a Trainer is handed in.
"""

from __future__ import annotations

import collections
import itertools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from autotune.errors import WorkloadError
from autotune.runtime.config import InputKey
from autotune.runtime.summary import TRAIN
from autotune.workload.contract import Workload, seed_everything
from autotune.workload.targets import TargetKind, register_target

__all__ = [
    "INFERENCE_BATCHES",
    "PaddingGuess",
    "chosen_padding",
    "infer_padding",
    "is_trainer",
    "refuse_compile_flags",
    "trainer_workload",
]

INFERENCE_BATCHES = 16
"""Batches drawn from the train dataloader to tell which axes vary and what pads them."""


def is_trainer(obj: Any) -> bool:
    """Whether `obj` is a transformers Trainer (without importing transformers when it is not loaded)."""
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(obj, transformers.Trainer)


def refuse_compile_flags(args: Any) -> None:
    """Raise a WorkloadError naming the flag when the TrainingArguments ask the Trainer to compile."""
    if getattr(args, "torch_compile", False):
        flags = ", ".join(
            f"{name}={getattr(args, name, None)!r}" for name in ("torch_compile_mode", "torch_compile_backend")
        )
        raise WorkloadError(
            f"TrainingArguments.torch_compile=True ({flags}): autotune decides how the model is compiled. "
            "Build the Trainer with torch_compile=False and neither torch_compile_mode nor torch_compile_backend "
            "(setting either turns torch_compile on)."
        )


class PaddingGuess:
    """Which axes of which inputs vary between batches, and what each is padded with."""

    def __init__(self) -> None:
        self.dynamic_dims: dict[InputKey, list[int]] = {}
        self.pad_values: dict[InputKey, int | float | bool] = {}
        self.unsure: list[InputKey] = []
        """Dynamic inputs with no padded position to read a pad value from (0 is assumed)."""

    def describe(self) -> str:
        """One line per input, as printed when a search starts."""
        if not self.dynamic_dims:
            return "no input changes length between batches: every batch has the same shapes"
        lines = []
        for key, axes in self.dynamic_dims.items():
            if key in self.unsure:
                pad = "pad value unknown (no padded position seen), 0 assumed"
            else:
                pad = f"padded with {self.pad_values.get(key, 0)!r}"
            lines.append(f"{key}: axis {', '.join(str(a) for a in axes)} varies, {pad}")
        return "; ".join(lines)


def infer_padding(batches: Sequence[Mapping[str, Any]]) -> PaddingGuess:
    """Infer dynamic axes and pad values from collated dict batches.

    An axis other than the batch axis is dynamic when its size differs between two batches. For a
    dynamic input with the attention mask's shape, its pad value is the one value found where the
    mask is 0; for another (labels of their own length), the value most rows end with, when rows
    shorter than the longest exist. Inputs with no padded position get 0 and are listed as unsure.
    """
    guess = PaddingGuess()
    tensors = [{k: v for k, v in b.items() if isinstance(v, torch.Tensor)} for b in batches]
    if not tensors:
        return guess
    for key, first in tensors[0].items():
        shapes = [t[key].shape for t in tensors if key in t and t[key].dim() == first.dim()]
        axes = [axis for axis in range(1, first.dim()) if len({shape[axis] for shape in shapes}) > 1]
        if not axes:
            continue
        guess.dynamic_dims[key] = axes
        value = _pad_value([t for t in tensors if key in t], key, axes[0])
        if value is None:
            guess.unsure.append(key)
            guess.pad_values[key] = False if first.dtype == torch.bool else 0
        else:
            guess.pad_values[key] = value
    return guess


def _pad_value(batches: list[dict[str, torch.Tensor]], key: str, axis: int) -> int | float | bool | None:
    masked: collections.Counter[Any] = collections.Counter()
    for batch in batches:
        mask, tensor = batch.get("attention_mask"), batch[key]
        if mask is not None and mask.shape == tensor.shape and key != "attention_mask":
            masked.update(tensor[mask == 0].unique().tolist())
    if key == "attention_mask":
        return 0 if _has_padding(batches) else None
    if masked:
        return _plain(masked.most_common(1)[0][0])
    ends: collections.Counter[Any] = collections.Counter()
    for batch in batches:
        tensor = batch[key].movedim(axis, -1)
        rows = tensor.reshape(-1, tensor.shape[-1])
        if rows.shape[0] < 2:
            continue
        ends.update(rows[:, -1].tolist())
    if not ends:
        return None
    value, count = ends.most_common(1)[0]
    # A value every row ends with is the last token of full-length rows, not necessarily padding.
    return _plain(value) if count < sum(ends.values()) or _has_padding(batches) else None


def _has_padding(batches: list[dict[str, torch.Tensor]]) -> bool:
    """Whether some row of the attention mask has a 0: the collator padded something."""
    return any(bool((b["attention_mask"] == 0).any()) for b in batches if "attention_mask" in b)


def _plain(value: Any) -> int | float | bool:
    return value if isinstance(value, (bool, float)) else int(value)


def chosen_padding(
    guess: PaddingGuess | None,
    dynamic_dims: Mapping[InputKey, Sequence[int]] | None,
    pad_values: Mapping[InputKey, float | int | bool] | None,
) -> tuple[dict[InputKey, Sequence[int]], dict[InputKey, float | int | bool]]:
    """The dynamic axes and pad values a Workload gets: what the caller gave, else what was inferred,
    the pad values kept only for the inputs that are dynamic."""
    dims: dict[InputKey, Sequence[int]] = dict(
        dynamic_dims if dynamic_dims is not None else guess.dynamic_dims if guess else {}
    )
    pads: dict[InputKey, float | int | bool] = dict(
        pad_values if pad_values is not None else guess.pad_values if guess else {}
    )
    return dims, {k: v for k, v in pads.items() if k in dims}


def trainer_workload(
    trainer: Any,
    *,
    dynamic_dims: Mapping[InputKey, Sequence[int]] | None = None,
    pad_values: Mapping[InputKey, float | int | bool] | None = None,
    num_batches: int = 8,
    report: Callable[[str], None] | None = None,
) -> Workload:
    """The Workload a `transformers.Trainer` runs; see the module docstring for what is taken from where.

    `dynamic_dims` and `pad_values` replace what would be inferred from the collator's batches;
    `report` receives one line saying what was inferred. `num_batches` is rounded up to a multiple
    of `gradient_accumulation_steps`. Raises WorkloadError for `torch_compile=True` or a Trainer
    without a train dataset.
    """
    args = trainer.args
    refuse_compile_flags(args)
    if trainer.train_dataset is None:
        raise WorkloadError(
            "Trainer: it has no train_dataset, so there is nothing to measure a training step on; "
            "pass train_dataset=... when building it."
        )
    accumulation = int(args.gradient_accumulation_steps)
    model: nn.Module = trainer.model
    loader = trainer.get_train_dataloader()
    guess = None
    if dynamic_dims is None or pad_values is None:
        seed_everything(0)
        guess = infer_padding([dict(b) for b in itertools.islice(iter(loader), INFERENCE_BATCHES)])
        if report is not None:
            report(f"inferred from the Trainer's collator: {guess.describe()}")
    dims, pads = chosen_padding(guess, dynamic_dims, pad_values)
    model.train()
    return Workload(
        model=model,
        batches=lambda: loader,
        task=TRAIN,
        optimizer=_optimizer_factory(trainer),
        forward=_trainer_forward(trainer),
        loss=lambda loss, batch: loss,
        dynamic_dims=dims,
        pad_values=pads,
        autocast=torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else None,
        num_batches=-(-num_batches // accumulation) * accumulation,
        accumulation_steps=accumulation,
    )


def _trainer_forward(trainer: Any) -> Callable[[nn.Module, Any], torch.Tensor]:
    count = getattr(trainer, "_get_num_items_in_batch", None)

    def forward(model: nn.Module, batch: Any) -> torch.Tensor:
        # The Trainer counts the labelled items of a step's batches and hands the count to the loss.
        items = count([batch], _device_of(batch)) if count is not None else None
        # compute_loss pops `labels` from the dict it gets: it gets a copy.
        return trainer.compute_loss(model, dict(batch), num_items_in_batch=items)

    return forward


def _device_of(batch: Mapping[str, Any]) -> torch.device:
    return next((v.device for v in batch.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))


def _optimizer_factory(trainer: Any) -> Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]:
    """The optimizer the Trainer would create, built on the parameters the worker hands over."""
    model = trainer.model
    if trainer.optimizer is not None:
        given = trainer.optimizer
        return lambda params: type(given)([p for p in params if p.requires_grad], **given.defaults)
    if getattr(trainer, "optimizer_cls_and_kwargs", None) is not None:
        cls, kwargs = trainer.optimizer_cls_and_kwargs
    else:
        cls, kwargs = trainer.get_optimizer_cls_and_kwargs(trainer.args, model)
    decay = set(trainer.get_decay_parameter_names(model))
    weight_decay = trainer.args.weight_decay

    def build(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
        wanted = {id(p) for p in params if p.requires_grad}
        named = [(n, p) for n, p in model.named_parameters() if id(p) in wanted]
        groups = [
            {"params": [p for n, p in named if n in decay], "weight_decay": weight_decay},
            {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
        ]
        return cls([g for g in groups if g["params"]], **kwargs)

    return build


TRAINER = register_target(TargetKind(name="a transformers.Trainer", recognises=is_trainer, build=trainer_workload))
"""A Hugging Face `Trainer` as a `--model` target."""
