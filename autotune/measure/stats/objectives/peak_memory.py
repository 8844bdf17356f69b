"""`peak-memory`: the most memory a run held; a trade-off weighed against a speed objective."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.measure.stats._objective import Objective
from autotune.measure.stats._statistics import BAND
from autotune.trial.run_record import RunRecord


@dataclass(frozen=True)
class PeakMemory(Objective):
    name = "peak-memory"
    spelled = "peak-memory"
    direction = "minimize"
    speed = False
    tie_band = BAND

    @property
    def unit(self) -> str:
        return "MiB peak memory"

    def of(self, record: RunRecord) -> float:
        return float(record.peak_memory_mb or 0.0)


OBJECTIVE = PeakMemory()
