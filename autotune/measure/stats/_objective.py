"""What a study optimises: throughput or the time to compile and run N steps, alone or with compile time and memory.

A single objective (`throughput`, `time-to:N`) drives a single-objective study. A list
(`throughput,compile-time`, `throughput,peak-memory`, `time-to:N,peak-memory`, ...) drives a
multi-objective study whose result is a Pareto front; its first entry is always the speed
objective (throughput or time-to), which the confirmation campaign and the pruning use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autotune.errors import SearchError
from autotune.trial.request import RunRecord

__all__ = ["OBJECTIVE_HELP", "Objective", "Objectives", "faster"]

OBJECTIVE_HELP = (
    "'throughput', 'time-to:N' (N >= 1 steps), or a comma-separated list of one of those with "
    "'compile-time' and/or 'peak-memory' (e.g. 'throughput,compile-time')"
)
SPEED_KINDS = ("throughput", "time-to")
TRADE_OFF_KINDS = ("compile-time", "peak-memory")


@dataclass(frozen=True)
class Objective:
    """One thing a study optimises: steady-state throughput, compile time plus N steps, compile time or peak memory."""

    kind: str = "throughput"
    steps: int = 0

    @classmethod
    def parse(cls, text: str) -> Objective:
        """'throughput' or 'time-to:N' (N steps): a single objective measures speed."""
        objective = cls._one(text)
        if objective.kind in TRADE_OFF_KINDS:
            raise SearchError(
                f"--objective {text!r} alone would make eager (no compile, least memory) the winner by definition; "
                f"list it after a speed objective, e.g. 'throughput,{text}'."
            )
        return objective

    @classmethod
    def _one(cls, text: str) -> Objective:
        if text in ("throughput", *TRADE_OFF_KINDS):
            return cls(text)
        match = re.fullmatch(r"time-to:(\d+)", text)
        if not match or int(match.group(1)) < 1:
            raise SearchError(f"--objective {text!r} is not allowed; use {OBJECTIVE_HELP}.")
        return cls("time-to", int(match.group(1)))

    @property
    def direction(self) -> str:
        return "maximize" if self.kind == "throughput" else "minimize"

    @property
    def counts_compile(self) -> bool:
        """Whether the objective's figure holds compile time (`time-to:N`, `compile-time`)."""
        return self.kind in ("time-to", "compile-time")

    @property
    def unit(self) -> str:
        return {
            "throughput": "samples/s",
            "compile-time": "s compile",
            "peak-memory": "MiB peak memory",
        }.get(self.kind, f"s (compile + {self.steps} steps)")

    def __str__(self) -> str:
        return f"time-to:{self.steps}" if self.kind == "time-to" else self.kind

    def value(self, samples_per_second: float, batches_per_second: float, compile_seconds: float) -> float:
        """The speed objective for one measurement."""
        if self.kind == "throughput":
            return samples_per_second
        return compile_seconds + self.steps / max(batches_per_second, 1e-9)

    def of(self, record: RunRecord) -> float:
        """The objective of one complete run."""
        if self.kind == "compile-time":
            return float(record.compile_seconds or 0.0)
        if self.kind == "peak-memory":
            return float(record.peak_memory_mb or 0.0)
        assert record.samples_per_second is not None and record.batches_per_second is not None
        return self.value(record.samples_per_second, record.batches_per_second, record.compile_seconds or 0.0)

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "maximize" else a < b


@dataclass(frozen=True)
class Objectives:
    """What a study optimises: one speed objective, then the trade-offs it is weighed against (if any)."""

    items: tuple[Objective, ...]

    @classmethod
    def parse(cls, text: str) -> Objectives:
        """'throughput', 'time-to:N', or a list such as 'throughput,compile-time,peak-memory'."""
        parts = [part.strip() for part in str(text).split(",")]
        if len(parts) == 1:
            return cls((Objective.parse(parts[0]),))
        items = [Objective._one(part) for part in parts]
        speed = [o for o in items if o.kind in SPEED_KINDS]
        if len(speed) != 1 or items[0] not in speed:
            raise SearchError(
                f"--objective {text!r}: a list starts with one speed objective ('throughput' or 'time-to:N') "
                f"followed by trade-offs ({', '.join(TRADE_OFF_KINDS)})."
            )
        kinds = [o.kind for o in items]
        if len(set(kinds)) != len(kinds):
            raise SearchError(f"--objective {text!r} names an objective twice.")
        return cls(tuple(items))

    @property
    def primary(self) -> Objective:
        """The speed objective: what pruning, the confirmation's stopping rule and the default pick use."""
        return self.items[0]

    @property
    def multi(self) -> bool:
        return len(self.items) > 1

    @property
    def compile_decides(self) -> bool:
        """Whether compile time decides what is exported: `time-to:N` counts it, and a Pareto front weighs it (its
        `compile-time` axis, and the default pick's bound of twice plain compile's). Such a study's confirmation
        compiles every subject cold again each replicate, so that compile time has an interval
        (`Budget.cold_compiles`)."""
        return self.multi or any(o.counts_compile for o in self.items)

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.items]

    def values(self, record: RunRecord) -> list[float]:
        return [o.of(record) for o in self.items]

    def __str__(self) -> str:
        return ",".join(str(o) for o in self.items)

    def __iter__(self) -> Any:
        return iter(self.items)


def faster(a: float, b: float, objective: Objective) -> float:
    """How many times faster `a` is than `b` under the objective (samples/s up, or seconds down)."""
    if objective.direction == "maximize":
        return a / b if b else float("inf")
    return b / a if a else float("inf")
