"""Targets for `autotune.resolve`: every form a target may take, and every way it can be wrong."""

from __future__ import annotations

import torch
from torch import nn

from autotune import Workload

BATCH_SIZE = 2


class TinyLM(nn.Module):
    """Embedding, two identical blocks and a head; returns an object with `.loss` like HF models."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
        self.head = nn.Linear(8, 16)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(x)
        return {"loss": nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()), "logits": logits}


def make_batches() -> list[dict[str, torch.Tensor]]:
    return [
        {"input_ids": torch.randint(0, 16, (2, length)), "labels": torch.randint(0, 16, (2, length))}
        for length in (5, 7, 6)
    ]


def _adamw(params):
    return torch.optim.AdamW(params, lr=1e-3)


workload = Workload(
    model=TinyLM(),
    batches=make_batches,
    task="train",
    optimizer=_adamw,
    dynamic_dims={"input_ids": [1], "labels": [1]},
)


def factory() -> Workload:
    return Workload(model=TinyLM(), batches=make_batches, task="infer")


def bare_module() -> nn.Module:
    return TinyLM()


def returns_number() -> int:
    return 42


def returns_nothing() -> None:
    return None


def needs_arguments(size: int) -> Workload:
    return Workload(model=TinyLM(), batches=make_batches, task="infer")


def raises_in_factory() -> Workload:
    """Raises while the workload is built, before any model runs (`trial_targets.workloads:raises` runs, then raises)."""
    raise RuntimeError("the dataset is not downloaded")


def train_without_optimizer() -> Workload:
    return Workload(model=TinyLM(), batches=make_batches, task="train")


def missing_input() -> Workload:
    return Workload(model=TinyLM(), batches=make_batches, task="infer", dynamic_dims={"attention_mask": [1]})


def axis_out_of_range() -> Workload:
    return Workload(model=TinyLM(), batches=make_batches, task="infer", dynamic_dims={"input_ids": [2]})


def _private_helper() -> None:
    """Not public: must not be listed when an attribute is missing."""


class Registry:
    """Reached through a dotted attribute path, `Registry.inner`."""

    inner = workload
