"""`time-to:N`: the seconds to compile and then run N steps, for jobs short enough that compile time counts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from autotune.errors import SearchError
from autotune.measure.stats._objective import Objective
from autotune.trial.run_record import RunRecord


@dataclass(frozen=True)
class TimeTo(Objective):
    steps: int = 1
    """The steps run after compiling (N >= 1)."""

    name = "time-to"
    spelled = "time-to:N (N >= 1 steps)"
    direction = "minimize"
    speed = True
    counts_compile = True

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise SearchError(f"--objective time-to:{self.steps}: N must be a whole number of steps >= 1.")

    @classmethod
    def read(cls, text: str) -> Objective | None:
        match = re.fullmatch(r"time-to:(\d+)", text)
        return cls(int(match.group(1))) if match and int(match.group(1)) >= 1 else None

    @property
    def unit(self) -> str:
        return f"s (compile + {self.steps} steps)"

    @property
    def horizon(self) -> int:
        return self.steps

    def speed_value(self, samples_per_second: float, batches_per_second: float, compile_seconds: float) -> float:
        return compile_seconds + self.steps / max(batches_per_second, 1e-9)

    def of(self, record: RunRecord) -> float:
        assert record.batches_per_second is not None, "a complete run's record"
        return self.speed_value(
            record.samples_per_second or 0.0, record.batches_per_second, record.compile_seconds or 0.0
        )

    def __str__(self) -> str:
        return f"time-to:{self.steps}"


OBJECTIVE = TimeTo()
