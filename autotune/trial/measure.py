"""Measuring inside the worker: clocks, machine load, dynamo's counters and accuracy against eager.

Nothing here imports Optuna or knows about studies: it only turns what ran into numbers. What
the device itself says (synchronisation, memory, the calibration probe) is asked of its
`autotune.runtime.device.Device`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch._dynamo.utils import counters

from autotune.runtime.device import Device

__all__ = [
    "PRECISION_TOLERANCE",
    "Stopwatch",
    "cpu_times",
    "cpu_use",
    "others_share",
    "fail_on_recompile_limit",
    "frames_compiled",
    "watch_cuda_graph_recordings",
    "load_average",
    "steal_share",
    "working_dtype",
    "compare",
    "dynamo_counts",
    "tensor_leaves",
    "tolerance_for",
]


def load_average() -> float | None:
    """The 1-minute load average, or None where the system does not report one."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) CPU ticks since boot from /proc/stat, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(v) for v in fields]
    except (OSError, ValueError, IndexError):
        return None
    return (ticks[7] if len(ticks) > 7 else 0), sum(ticks[:8])


def cpu_use() -> tuple[int, int, int] | None:
    """(ticks the machine was busy, ticks in all, ticks this run used), since boot, or None off Linux.

    Busy counts user, nice, system, interrupts and steal. This run's ticks are the user and
    system time of every process in its process group: its own threads (OpenMP's included) and
    the compile workers Inductor started for it, whose work is the run's own, not another load.
    """
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields), _group_ticks(os.getpgrp())


def _group_ticks(group: int) -> int:
    """User and system ticks of every live process in process group `group` (/proc/PID/stat)."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # After the command name: state, ppid, pgrp, ... utime and stime are the 12th and 13th fields.
        if len(stat) > 12 and int(stat[2]) == group:
            ticks += int(stat[11]) + int(stat[12])
    return ticks


def others_share(before: tuple[int, int, int] | None, after: tuple[int, int, int] | None) -> float | None:
    """Share of the machine's CPU time that other processes used between two `cpu_use` readings.

    What a window's clock felt of the rest of the machine: 0 on a quiet machine, 0.5 when
    something kept one of two cores busy. None where the system does not say, or for a span
    too short for the kernel's ticks to count.
    """
    if before is None or after is None or after[1] - before[1] < 10:
        return None
    others = (after[0] - before[0]) - (after[2] - before[2])
    return max(0.0, min(1.0, others / (after[1] - before[1])))


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of CPU time the hypervisor gave to other machines between two `cpu_times` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def fail_on_recompile_limit() -> None:
    """Make dynamo raise when it hits its recompile limit, instead of running the frame eagerly from then on.

    A run in that state would look fast or slow for the wrong reason; raising turns it into a
    `recompile_limit` failure.
    """
    config = getattr(torch.compiler, "config", None)
    if config is not None and hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True
    else:  # older torch: the flag lives in dynamo's own config
        torch._dynamo.config.fail_on_recompile_limit_hit = True


_RECORDINGS = [0]
"""CUDA graphs recorded so far in this process (counted once `watch_cuda_graph_recordings` ran)."""


def _count_recording(args: Any) -> None:
    trigger = getattr(args, "callback_trigger", None)
    if getattr(trigger, "name", None) == "CUDAGRAPH_RECORDING":
        _RECORDINGS[0] += 1


def watch_cuda_graph_recordings() -> None:
    """Count every CUDA graph recording from now on (once per process; harmless where none happen).

    CUDA-graph trees warm a compiled function up on its first call and record it on the next,
    and record again for each new input shape: compile-time work that moves none of dynamo's
    counters. Dynamo calls its compile callbacks around each recording, which is where it is counted.
    """
    handler = getattr(torch._dynamo, "callback_handler", None)
    if handler is not None and _count_recording not in handler.end_callbacks:
        handler.register_end_callback(_count_recording)


def frames_compiled() -> int:
    """Compile events so far in this process: frames dynamo compiled and CUDA graphs recorded.

    One counter read, cheap enough for every timed step. A warm-up pass, a settle window or a
    step of the fresh stream that moved it compiled (or recorded) something and is treated so.
    """
    return int(counters["frames"]["ok"]) + _RECORDINGS[0]


def dynamo_counts() -> dict[str, int]:
    """Graphs compiled, graph breaks, recompiles and frames compiled so far in this process."""

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
        "cuda_graph_recordings": _RECORDINGS[0],
        "cuda_graph_skips": int(counters["inductor"]["cudagraph_skips"]),
    }


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


def working_dtype(autocast: torch.dtype | None, model: torch.nn.Module) -> torch.dtype | None:
    """The lowest floating-point precision a step computes in: the autocast dtype, else the parameters' lowest."""
    if autocast is not None:
        return autocast
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    for low in (torch.float16, torch.bfloat16):
        if low in dtypes:
            return low
    return None


PRECISION_TOLERANCE = 5e-2
"""Relative-error tolerance for a configuration that changes numerics (TF32/bf16 matmuls, unsafe math)."""


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

    device: Device
    started: float = field(default=0.0)

    def start(self) -> None:
        self.device.synchronize()
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        self.device.synchronize()
        return time.perf_counter() - self.started
