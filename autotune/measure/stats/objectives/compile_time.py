"""`compile-time`: the seconds a cold compile takes; a trade-off weighed against a speed objective."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.measure.stats._objective import Objective
from autotune.trial.run_record import RunRecord


@dataclass(frozen=True)
class CompileTime(Objective):
    name = "compile-time"
    spelled = "compile-time"
    direction = "minimize"
    speed = False
    counts_compile = True
    compile_decided = True

    @property
    def unit(self) -> str:
        return "s compile"

    def of(self, record: RunRecord) -> float:
        return float(record.compile_seconds or 0.0)


OBJECTIVE = CompileTime()
