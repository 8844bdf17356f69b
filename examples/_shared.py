"""What the example workloads share: the size knob, seeded model construction, padding masks, eager training passes."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar, cast

import torch

from autotune.errors import WorkloadError

Size = Literal["tiny", "full"]
SIZES: tuple[Size, ...] = ("tiny", "full")
SIZE_VARIABLE = "AUTOTUNE_EXAMPLE_SIZE"
"""Environment variable read by the zero-argument targets, e.g. `AUTOTUNE_EXAMPLE_SIZE=full` on a GPU."""


T = TypeVar("T")


def study_parser(doc: str, workload: str) -> argparse.ArgumentParser:
    """A measuring study's parser: its description (the first paragraph of `doc`), --workload and --seed."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--workload", default=workload, help="PKG.MOD:ATTR of the workload (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def between_loads(measure: Callable[[], T]) -> T:
    """`measure()`, with the 1-minute load printed before and after: nothing else may run while a study measures."""
    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    result = measure()
    print(f"load after: {os.getloadavg()[0]:.2f}", flush=True)
    return result


def checked_size(size: str | None) -> Size:
    """`size`, or the size named by $AUTOTUNE_EXAMPLE_SIZE when None (default 'tiny'); raise if unknown."""
    chosen = size if size is not None else os.environ.get(SIZE_VARIABLE, "tiny")
    if chosen not in SIZES:
        source = "size" if size is not None else f"${SIZE_VARIABLE}"
        raise WorkloadError(f"{source}: {chosen!r} is not an example size; use one of {SIZES}.")
    return cast(Size, chosen)


@contextlib.contextmanager
def seeded(seed: int = 0) -> Iterator[None]:
    """Run the block with torch's RNG seeded, then restore the caller's RNG state.

    Models built inside get the same initial weights in every process (the parent and each
    trial), without disturbing the RNG that autotune seeds before drawing batches.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """A (batch, width) 0/1 int64 mask that is 1 on the first `lengths[i]` positions of row i."""
    return (torch.arange(width)[None, :] < lengths[:, None]).long()


def draw_lengths(count: int, buckets: Sequence[tuple[float, int, int]]) -> torch.Tensor:
    """`count` lengths: a bucket (probability, low, high) is picked by its probability, then a length uniformly in it."""
    weights = torch.tensor([probability for probability, _, _ in buckets])
    picks = torch.multinomial(weights, count, replacement=True)
    lows = torch.tensor([low for _, low, _ in buckets])[picks]
    highs = torch.tensor([high for _, _, high in buckets])[picks]
    return lows + (torch.rand(count) * (highs - lows + 1)).long().clamp(max=highs - lows)


def eager_training(spec: str, warm_passes: int) -> tuple[Callable[[], None], list[Any]]:
    """Build the training workload `spec` on the CPU and run `warm_passes` eager passes over its batches.

    Returns (a function that runs one more pass, the batches): what the noise studies time.
    """
    from autotune.workload import resolve
    from autotune.workload.steps import StepRunner

    workload = resolve(spec)
    batches = workload.draw_batches(seed=0)
    model = workload.model
    optimizer = workload.optimizer(model.parameters())  # type: ignore[misc]
    step = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)

    def one_pass() -> None:
        for batch in batches:
            step(model, optimizer, batch)

    for _ in range(warm_passes):
        one_pass()
    return one_pass, batches


class StepClock:
    """Seconds per training step after the first `skip` steps (the compiles); a framework's callback ticks it."""

    def __init__(self, skip: int = 10) -> None:
        self.skip, self.started, self.steps = skip, 0.0, 0

    def tick(self) -> None:
        """One step has ended."""
        self.steps += 1
        if self.steps == self.skip:
            self.started = time.perf_counter()

    def summary(self) -> str:
        """'12.3 ms per step after the first 10', or that there were too few steps to time."""
        counted = self.steps - self.skip
        if counted <= 0:
            return "too few steps to time"
        return f"{(time.perf_counter() - self.started) / counted * 1000:.1f} ms per step after the first {self.skip}"


def counting_rows(
    size: int, *, vocab: int, lengths: Sequence[tuple[int, int, float]], eos_id: int, seed: int = 0
) -> list[list[int]]:
    """`size` token rows that count up from a random word with a random stride (modulo the words 2 to
    vocab - 1), each ending with `eos_id`; a row's length is drawn from the first (shortest, longest,
    share) range with that share, else from the second: text whose lengths vary, most short, a few long."""
    draw = random.Random(seed)
    rows: list[list[int]] = []
    for _ in range(size):
        low, high, _share = lengths[0] if draw.random() < lengths[0][2] else lengths[1]
        start, stride = draw.randrange(vocab - 2), draw.randint(1, 3)
        words = [2 + (start + stride * i) % (vocab - 2) for i in range(draw.randint(low, high) - 1)]
        rows.append([*words, eos_id])
    return rows
