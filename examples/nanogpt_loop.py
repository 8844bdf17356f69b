"""A training loop of nanoGPT's shape, tuned with its own step: a Python-float learning rate set on every parameter
group each step from a cosine schedule with warm-up, two micro-batches of gradient accumulation, a gradient scaler,
unscaling and clipping at 1.0.

nanoGPT's `train.py` sets `param_group["lr"] = lr` from its `get_lr(it)` before every step. Whether
a compiled `optimizer.step` then compiles again at every new value is a fact of the PyTorch
release and the backend, not of the loop: the search runs the step over several of the
schedule's values and counts what compiles (on the releases tested, once more when the rate first
changes, and never again), so the compiled optimizer step is searched as any other setting:

    autotune search --model examples.nanogpt_loop:workload --trials 4

The same loop, with the exported file applied, trains as it did eagerly:

    python -m examples.nanogpt_loop --steps 16
    python -m examples.nanogpt_loop --steps 16 --apply autotune_out/apply_compilation.py
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from autotune import Workload
from examples.loop import configure_optimizers, load, run_loop
from examples.toy import ToyLM, make_batches

LEARNING_RATE = 6e-4
MIN_LR = 6e-5
WARMUP_ITERS = 4
LR_DECAY_ITERS = 200
MICRO_BATCHES = 2
"""nanoGPT's gradient_accumulation_steps: each batch the step takes is split into this many micro-batches."""
BLOCK = 32
"""Every sequence is this long, as nanoGPT's block_size makes them."""


def get_lr(it: int) -> float:
    """nanoGPT's schedule: a linear warm-up, then a cosine down to MIN_LR; a Python float."""
    if it < WARMUP_ITERS:
        return LEARNING_RATE * (it + 1) / (WARMUP_ITERS + 1)
    if it > LR_DECAY_ITERS:
        return MIN_LR
    ratio = (it - WARMUP_ITERS) / (LR_DECAY_ITERS - WARMUP_ITERS)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LEARNING_RATE - MIN_LR)


@dataclass
class LoopState:
    """What the loop carries besides the optimizer: its iteration and its scaler."""

    scaler: torch.amp.GradScaler
    iter_num: int = 0


def setup(model: nn.Module) -> tuple[torch.optim.Optimizer, LoopState]:
    """What the script builds before its loop: nanoGPT's AdamW groups with a float rate, and a scaler (enabled for
    float16 only, as nanoGPT enables it)."""
    optimizer = configure_optimizers(model, lr=LEARNING_RATE)
    for group in optimizer.param_groups:
        group["lr"] = LEARNING_RATE  # a Python float, as nanoGPT's configure_optimizers leaves it
    return optimizer, LoopState(scaler=torch.amp.GradScaler("cpu", enabled=False))


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor], state: LoopState
) -> Any:
    """One iteration of nanoGPT's loop: set the rate, accumulate over the micro-batches, unscale, clip, step."""
    lr = get_lr(state.iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    total = torch.zeros(())
    for micro in range(MICRO_BATCHES):
        part = {key: value.chunk(MICRO_BATCHES)[micro] for key, value in batch.items()}
        loss = model(**part).loss / MICRO_BATCHES
        state.scaler.scale(loss).backward()
        total = total + loss.detach()
    state.scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    state.scaler.step(optimizer)
    state.scaler.update()
    optimizer.zero_grad(set_to_none=True)
    state.iter_num += 1
    return total


def batches(count: int = 8) -> list[dict[str, torch.Tensor]]:
    """Batches of MICRO_BATCHES x 4 sequences of BLOCK tokens each."""
    return make_batches(count=count, batch_size=4 * MICRO_BATCHES, min_len=BLOCK, max_len=BLOCK)


def workload() -> Workload:
    """The loop's model, batches and step, for `autotune search --model examples.nanogpt_loop:workload`."""
    return Workload(model=ToyLM(), batches=batches, step=train_step, setup=setup)


def train(steps: int, exported: Any = None, seed: int = 0) -> list[float]:
    """The loop itself: `steps` iterations over the same seeded batches, with `exported` (an apply_compilation.py,
    loaded) applied to the model and the optimizer where given. Returns every iteration's loss."""
    # The step is looked up when called, so that a caller may wrap it (the tests count its compiles).
    return run_loop(steps, exported, seed, setup=setup, step=lambda *args: train_step(*args), batches=batches)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--apply", help="an exported apply_compilation.py to apply to the model and optimizer")
    args = parser.parse_args(argv)
    for index, loss in enumerate(train(args.steps, load(args.apply) if args.apply else None), 1):
        print(f"step {index:3d}  loss {loss:.6f}  lr {get_lr(index - 1):.3g}")


if __name__ == "__main__":
    main()
