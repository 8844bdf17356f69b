"""Where a process's compile time went, from torch's own compilation metrics (not a timer of ours).

`torch._dynamo.utils.get_compilation_metrics()` keeps one record per compiled frame (and one per
backward compiled at run time), with cumulative times in microseconds. They nest: a frame's
dynamo time holds its backend's (AOTAutograd), which holds Inductor's. The split takes each
level without the one inside it:

* `tracing`: dynamo tracing the bytecode and building guards;
* `aot_autograd`: AOTAutograd tracing the forward and backward graphs (and the backward
  compiled at its first run, outside Inductor);
* `inductor`: Inductor's lowering, code generation and kernel compilation, autotuning left out;
* `autotuning`: choosing kernels by benchmarking them while compiling (max-autotune), and
  Triton's autotuning at the first run;
* `cudagraphs`: recording CUDA graphs (`reduce-overhead` and the like).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALWAYS_SHOWN", "SPLIT_LABELS", "SPLIT_PARTS", "compile_split"]

SPLIT_LABELS = {
    "tracing": "dynamo tracing",
    "aot_autograd": "AOTAutograd",
    "inductor": "Inductor code generation and kernel compilation",
    "autotuning": "autotuning (benchmarking kernels)",
    "cudagraphs": "CUDA-graph recording",
}
"""How each part is named for people, in the order the parts happen."""
SPLIT_PARTS = tuple(SPLIT_LABELS)
"""The parts of a compile, in the order they happen."""
ALWAYS_SHOWN = SPLIT_PARTS[:3]
"""The parts every compile has, shown even at zero; autotuning and CUDA graphs only where they took time."""


def compile_split() -> dict[str, float]:
    """Seconds per part (SPLIT_PARTS) over everything this process compiled so far; {} when nothing compiled."""
    from torch._dynamo.utils import get_compilation_metrics

    parts = dict.fromkeys(SPLIT_PARTS, 0.0)
    entries = get_compilation_metrics()
    for entry in entries:
        frame, backend = (
            _us(entry, "dynamo_cumulative_compile_time_us"),
            _us(entry, "aot_autograd_cumulative_compile_time_us"),
        )
        inductor, backward = (
            _us(entry, "inductor_cumulative_compile_time_us"),
            _us(entry, "backward_cumulative_compile_time_us"),
        )
        autotune = _us(entry, "compile_time_autotune_time_us")
        if frame:
            parts["tracing"] += max(frame - backend, 0.0)
            parts["aot_autograd"] += max(backend - inductor, 0.0)
        elif backward:
            parts["aot_autograd"] += max(backward - inductor, 0.0)
        parts["inductor"] += max(inductor - autotune, 0.0)
        parts["autotuning"] += autotune + _us(entry, "runtime_triton_autotune_time_us")
        parts["cudagraphs"] += _us(entry, "runtime_cudagraphify_time_us")
    return {k: round(v, 3) for k, v in parts.items()} if entries else {}


def _us(entry: Any, name: str) -> float:
    value = getattr(entry, name, None)
    return float(value) / 1e6 if value else 0.0
