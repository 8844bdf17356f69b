"""A plain training loop, tuned with its own step: clipping, a cosine schedule with warm-up, AdamW with two groups.

Most PyTorch training scripts are a loop around a step function. This one trains the toy
language model of `examples.toy` the way such a script does: `configure_optimizers` puts weight
decay on the matrices only (two parameter groups), a learning rate warms up and then follows a
cosine, and `train_step` clips the gradients' norm before each optimizer step. autotune measures
that step as it is, and checks its losses and updates against eager before any speed counts:

    autotune search --model examples.loop:workload --trials 4

Then the same loop, with the exported file applied, trains as it did eagerly:

    python -m examples.loop --steps 20                                   # eager
    python -m examples.loop --steps 20 --apply autotune_out/apply_compilation.py
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from autotune import Workload
from examples.toy import ToyLM, make_batches

STEPS = 200
"""The schedule's length: the loop's whole run."""
WARMUP = 20


def configure_optimizers(model: nn.Module, lr: float = 1e-3, weight_decay: float = 0.1) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices and none on biases, norms or embeddings, as GPT-2 training scripts
    build it. The learning rate is a tensor, so that a compiled optimizer step reads each new value instead of
    recompiling for it."""
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "embed" in n]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=torch.tensor(lr), betas=(0.9, 0.95))


def cosine_with_warmup(optimizer: torch.optim.Optimizer, warmup: int = WARMUP, total: int = STEPS) -> Any:
    """A linear warm-up from a tenth of the rate, then a cosine down to a tenth of it."""

    def factor(step: int) -> float:
        if step < warmup:
            return 0.1 + 0.9 * step / warmup
        progress = min((step - warmup) / max(total - warmup, 1), 1.0)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def setup(model: nn.Module) -> tuple[torch.optim.Optimizer, Any]:
    """What the script builds before its loop: the optimizer and its schedule."""
    optimizer = configure_optimizers(model)
    return optimizer, cosine_with_warmup(optimizer)


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor], schedule: Any
) -> Any:
    """One step of the loop: forward, backward, clip, step, schedule, zero."""
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def workload() -> Workload:
    """The loop's model, batches and step, for `autotune search --model examples.loop:workload`."""
    return Workload(
        model=ToyLM(),
        batches=make_batches,
        step=train_step,
        setup=setup,
        dynamic_dims={"input_ids": [1], "attention_mask": [1], "labels": [1]},
        pad_values={"labels": -100},
        max_lengths={"input_ids": 64, "attention_mask": 64, "labels": 64},
    )


def train(steps: int, exported: Any = None, seed: int = 0) -> list[float]:
    """The loop itself: `steps` steps over the same seeded batches. With `exported` (an exported
    apply_compilation.py, loaded), the model and the optimizer are compiled as it says and each batch
    goes through its `prepare_batch`. Returns every step's loss."""
    return run_loop(steps, exported, seed, setup=setup, step=train_step, batches=make_batches)


def run_loop(
    steps: int,
    exported: Any,
    seed: int,
    *,
    setup: Callable[[nn.Module], tuple[torch.optim.Optimizer, Any]],
    step: Callable[..., Any],
    batches: Callable[..., list[Any]],
) -> list[float]:
    """A script's loop around its `step` on ToyLM: seeded, `setup` before it, `exported` applied where given."""
    torch.manual_seed(seed)
    model = ToyLM()
    drawn = batches(count=steps)
    optimizer, extras = setup(model)
    if exported is not None:
        model, optimizer = exported.apply_compilation(model, optimizer)
    prepare: Callable[[Any], Any] = exported.prepare_batch if exported is not None else (lambda batch: batch)
    model.train()
    return [float(step(model, optimizer, prepare(batch), extras)) for batch in drawn]


def load(path: str) -> Any:
    """An exported apply_compilation.py, as a module."""
    spec = importlib.util.spec_from_file_location("apply_compilation", Path(path))
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--apply", help="an exported apply_compilation.py to apply to the model and optimizer")
    args = parser.parse_args(argv)
    losses = train(args.steps, load(args.apply) if args.apply else None)
    for index, loss in enumerate(losses, 1):
        print(f"step {index:3d}  loss {loss:.6f}")


if __name__ == "__main__":
    main()
