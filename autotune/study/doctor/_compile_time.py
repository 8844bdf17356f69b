"""Where plain torch.compile's time went, as the doctor prints it: part by part, then what would shorten it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["SPLIT_NAMES", "compile_time_lines"]


SPLIT_NAMES = {
    "tracing": "dynamo tracing",
    "aot_autograd": "AOTAutograd",
    "inductor": "Inductor code generation and kernel compilation",
    "autotuning": "autotuning (benchmarking kernels)",
    "cudagraphs": "CUDA-graph recording",
}
"""How each part of `autotune.trial.compile_split` is named for people."""


def compile_time_lines(total: float | None, split: Mapping[str, float], shorter: Sequence[str]) -> list[str]:
    """Where plain torch.compile's time went, part by part with its share, then what would shorten it."""
    parts = sum(split.values())
    measured = total if total else parts
    lines = [f"Where plain torch.compile's {measured:.1f} s of compiling went (torch's own compilation metrics)"]
    for name, label in SPLIT_NAMES.items():
        seconds = split.get(name, 0.0)
        if seconds or name in ("tracing", "aot_autograd", "inductor"):
            share = seconds / measured if measured else 0.0
            lines.append(f"  {label:<50} {seconds:>7.1f} s  {share:>4.0%}")
    if total:
        other = total - parts
        lines.append(f"  {'the rest (running the first steps, Python)':<50} {other:>7.1f} s  {other / total:>4.0%}")
    lines += ["What would shorten it:", *(f"  - {way}" for way in shorter)]
    return lines
