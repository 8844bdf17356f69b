"""Workloads for `autotune doctor`: each misbehaves under dynamo in one known way, at a known line."""

from __future__ import annotations

import random
import zlib

import torch
from torch import nn

from autotune import Workload


class BreaksGraph(nn.Module):
    """Three graph breaks a user might write: a value read in Python, a print, Python-side randomness."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.second = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.first(x)
        scale = y.abs().max().item()  # doctor: item
        print("scale", scale)  # doctor: print
        y = y * (1.0 + 0.0 * random.random())  # doctor: random
        return self.second(y / (1.0 + scale))


def _fixed_length(count: int = 4) -> list[torch.Tensor]:
    return [torch.randn(6, 16) for _ in range(count)]


def breaks_graph() -> Workload:
    return Workload(model=BreaksGraph(), batches=_fixed_length, task="infer")


class Tagger(nn.Module):
    """A per-position classifier over a sequence whose length varies."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # doctor: tagger
        return self.body(tokens).softmax(-1)


def _varying_length(count: int = 4) -> list[dict[str, torch.Tensor]]:
    lengths = [5, 9, 13, 17, 21, 25, 29, 33]
    return [{"tokens": torch.randn(2, lengths[i % len(lengths)], 16)} for i in range(count)]


def varying_length() -> Workload:
    """The length of `tokens` (axis 1) changes every batch and is not declared dynamic."""
    return Workload(model=Tagger(), batches=_varying_length, task="infer")


def varying_length_declared() -> Workload:
    return Workload(model=Tagger(), batches=_varying_length, task="infer", dynamic_dims={"tokens": [1]})


def clean() -> Workload:
    return Workload(
        model=Tagger(), batches=lambda count=4: [{"tokens": torch.randn(2, 8, 16)} for _ in range(count)], task="infer"
    )


def gpt2_default_loss() -> nn.Module:
    """The bundled GPT-2 example without its fix: transformers' loss lookup warns inside forward."""
    from examples.hf import gpt2

    model = gpt2()
    model.loss_type = None
    return model


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        picked = y[y > 0]  # doctor: mask
        crc = zlib.crc32(y.detach().numpy().tobytes())  # doctor: extension
        return y.sum() + picked.sum() + crc % 2


def data_dependent() -> Workload:
    return Workload(model=DataDependent(), batches=_fixed_length, task="infer")


class Stack(nn.Module):
    """Three repeated linear blocks (matrix products only: Inductor calls them out of line, so it compiles fast)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(3))
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def repeated_blocks() -> Workload:
    return Workload(model=Stack(), batches=_fixed_length, task="infer")
