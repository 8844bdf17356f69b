"""Where plain torch.compile's time went, as the doctor prints it: part by part, then what would shorten it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autotune.trial.compile_split import ALWAYS_SHOWN, SPLIT_LABELS

__all__ = ["compile_time_lines"]


def compile_time_lines(total: float | None, split: Mapping[str, float], shorter: Sequence[str]) -> list[str]:
    """Where plain torch.compile's time went, part by part with its share, then what would shorten it."""
    parts = sum(split.values())
    measured = total if total else parts
    lines = [f"Where plain torch.compile's {measured:.1f} s of compiling went (torch's own compilation metrics)"]
    for name, label in SPLIT_LABELS.items():
        seconds = split.get(name, 0.0)
        if seconds or name in ALWAYS_SHOWN:
            share = seconds / measured if measured else 0.0
            lines.append(f"  {label:<50} {seconds:>7.1f} s  {share:>4.0%}")
    if total:
        other = total - parts
        lines.append(f"  {'the rest (running the first steps, Python)':<50} {other:>7.1f} s  {other / total:>4.0%}")
    lines += ["What would shorten it:", *(f"  - {way}" for way in shorter)]
    return lines
