"""What a study optimises: throughput, or the time to compile and run N steps."""

from __future__ import annotations

import re
from dataclasses import dataclass

from autotune.errors import SearchError
from autotune.trial.request import RunRecord

__all__ = ["Objective", "faster"]


@dataclass(frozen=True)
class Objective:
    """What the study optimises: steady-state throughput, or compile time plus N steps."""

    kind: str = "throughput"
    steps: int = 0

    @classmethod
    def parse(cls, text: str) -> Objective:
        """'throughput' or 'time-to:N' (N steps)."""
        if text == "throughput":
            return cls()
        match = re.fullmatch(r"time-to:(\d+)", text)
        if not match or int(match.group(1)) < 1:
            raise SearchError(
                f"--objective {text!r} is not allowed; use 'throughput' or 'time-to:N' with N >= 1 steps."
            )
        return cls("time-to", int(match.group(1)))

    @property
    def direction(self) -> str:
        return "maximize" if self.kind == "throughput" else "minimize"

    @property
    def unit(self) -> str:
        return "samples/s" if self.kind == "throughput" else f"s (compile + {self.steps} steps)"

    def __str__(self) -> str:
        return self.kind if self.kind == "throughput" else f"time-to:{self.steps}"

    def value(self, samples_per_second: float, batches_per_second: float, compile_seconds: float) -> float:
        """The objective for one measurement."""
        if self.kind == "throughput":
            return samples_per_second
        return compile_seconds + self.steps / max(batches_per_second, 1e-9)

    def of(self, record: RunRecord) -> float:
        """The objective of one complete run."""
        assert record.samples_per_second is not None and record.batches_per_second is not None
        return self.value(record.samples_per_second, record.batches_per_second, record.compile_seconds or 0.0)

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "maximize" else a < b


def faster(a: float, b: float, objective: Objective) -> float:
    """How many times faster `a` is than `b` under the objective (samples/s up, or seconds down)."""
    if objective.direction == "maximize":
        return a / b if b else float("inf")
    return b / a if a else float("inf")
