"""`throughput`: samples per second in the steady state, on fresh batches; the default objective."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.measure.stats._objective import Objective
from autotune.trial.run_record import RunRecord


@dataclass(frozen=True)
class Throughput(Objective):
    name = "throughput"
    spelled = "throughput"
    direction = "maximize"
    speed = True
    per_sample = True

    @property
    def unit(self) -> str:
        return "samples/s"

    def speed_value(self, samples_per_second: float, batches_per_second: float, compile_seconds: float) -> float:
        return samples_per_second

    def of(self, record: RunRecord) -> float:
        assert record.samples_per_second is not None, "a complete run's record"
        return record.samples_per_second


OBJECTIVE = Throughput()
