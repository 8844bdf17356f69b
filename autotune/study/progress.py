"""What a long-running search or retune tells a display: the phase, counts, best confirmed figure, ETA."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Progress", "ProgressCallback", "quiet"]


@dataclass
class Progress:
    """One update for a live display; `message` set means a line to print rather than a status."""

    done: int
    total: int
    trial: int | None
    phase: str
    best_value: float | None
    best_speedup: float | None
    eta_seconds: float | None
    message: str = ""


ProgressCallback = Callable[[Progress], None]


def quiet(progress: Progress) -> None:
    """A display that shows nothing."""
