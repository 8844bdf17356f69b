"""Measuring one trial inside the worker: clocks, memory, dynamo's counters and accuracy against eager.

Nothing here imports Optuna or knows about studies: it only turns what ran into numbers.
"""

from __future__ import annotations

import logging
import math
import resource
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "DynamoWatch",
    "Protocol",
    "Stopwatch",
    "compare",
    "dynamo_counts",
    "peak_memory_mb",
    "reset_peak_memory",
    "synchronize",
    "tensor_leaves",
    "tolerance_for",
]


@dataclass(frozen=True, kw_only=True)
class Protocol:
    """How a trial is measured; the same for every trial and baseline of a study."""

    windows: int = 5
    """Steady-state windows; each is a pass over the trial's fixed batches."""
    passes_per_window: int = 1
    """Passes over the fixed batches in one window (more for tiny, fast workloads)."""
    max_warmup_passes: int = 4
    """Warm-up passes allowed for shapes and recompiles to settle before measuring."""
    check_accuracy: bool = True
    """Compare loss and gradients (train) or outputs (infer) with eager before measuring."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Protocol:
        """The inverse of to_dict."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def synchronize(device: torch.device) -> None:
    """Wait for queued device work, so a clock read after it sees the work done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """Start a fresh peak-memory count (CUDA only; the CPU peak is the process's)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> float:
    """Peak device memory allocated (CUDA), or the process's peak resident memory (CPU), in MiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def dynamo_counts() -> dict[str, int]:
    """Graphs compiled, graph breaks, recompiles and frames compiled so far in this process."""
    from torch._dynamo.utils import counters

    graph_breaks = sum(counters["graph_break"].values())
    recompiles = 0
    get_metrics = getattr(torch._dynamo.utils, "get_compilation_metrics", None)
    if get_metrics is not None:
        recompiles = sum(1 for m in get_metrics() if m.compile_id and not str(m.compile_id).endswith("/0"))
    return {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "graph_breaks": int(graph_breaks),
        "recompiles": int(recompiles),
        "frames": int(counters["frames"]["ok"]),
    }


class DynamoWatch(logging.Handler):
    """Catches dynamo's warning that it hit a recompile limit and fell back to eager.

    Dynamo only logs it and runs the frame eagerly from then on; a trial in that state
    would look fast or slow for the wrong reason, so the worker fails it instead.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.limit_hits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "hit config." in message and "limit" in message:
            self.limit_hits.append(message.splitlines()[0] + " " + " ".join(message.splitlines()[1:3]).strip())

    def __enter__(self) -> DynamoWatch:
        logging.getLogger("torch._dynamo").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("torch._dynamo").removeHandler(self)


def tensor_leaves(value: Any) -> Iterator[torch.Tensor]:
    """Every floating-point tensor inside an output (tensors, tuples, lists, dicts, ModelOutputs)."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield value
    elif isinstance(value, Mapping) or hasattr(value, "to_tuple"):
        items = value.values() if isinstance(value, Mapping) else value.to_tuple()
        for item in items:
            yield from tensor_leaves(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensor_leaves(item)


def tolerance_for(dtype: torch.dtype | None) -> float:
    """Relative-error tolerance: float32 work lands far below 1e-3; bf16/fp16 between 1e-3 and 1e-2."""
    if dtype in (torch.bfloat16, torch.float16):
        return 5e-2
    return 5e-3


def compare(reference: torch.Tensor, candidate: torch.Tensor, tolerance: float, scale: float = 0.0) -> float | None:
    """Relative error ‖candidate − reference‖ / max(‖reference‖, scale), or None if within tolerance.

    `scale` keeps tensors that are zero in exact arithmetic (the gradient of an attention
    key bias, say) from being judged on rounding noise relative to itself. A candidate
    that is longer along some axis (padded inputs) is cut to the reference's shape:
    padding at the end must leave the real positions unchanged.
    """
    if candidate.shape != reference.shape:
        if candidate.dim() != reference.dim() or any(
            c < r for c, r in zip(candidate.shape, reference.shape, strict=False)
        ):
            return math.inf
        candidate = candidate[tuple(slice(0, n) for n in reference.shape)]
    ref = reference.detach().double()
    cand = candidate.detach().double()
    if not torch.isfinite(cand).all():
        return math.inf
    error = float(torch.linalg.vector_norm(cand - ref) / max(float(torch.linalg.vector_norm(ref)), scale, 1e-12))
    return None if error <= tolerance else error


@dataclass
class Stopwatch:
    """Synchronised wall-clock timing of device work."""

    device: torch.device
    started: float = field(default=0.0)

    def start(self) -> None:
        synchronize(self.device)
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        synchronize(self.device)
        return time.perf_counter() - self.started
