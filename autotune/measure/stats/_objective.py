"""What a study optimises: one speed objective, alone or followed by trade-offs it is weighed against.

Each objective is one module of `autotune.measure.stats.objectives` declaring an `Objective`:
its name as `--objective` spells it, its direction, unit and tie band, and the figure it
takes from a run's record. A single speed objective (`throughput`, `time-to:N`) drives a
single-objective study. A list (`throughput,compile-time`, `time-to:N,peak-memory`, ...)
drives a multi-objective study whose result is a Pareto front; its first entry is always
the speed objective, which the confirmation campaign and the pruning use.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from autotune.errors import SearchError
from autotune.runtime.registry import declared_in
from autotune.trial.run_record import RunRecord

__all__ = ["Objective", "Objectives", "faster", "objective_help", "objective_kinds"]


@dataclass(frozen=True)
class Objective(ABC):
    """One thing a study optimises. Subclass it in a module of `autotune.measure.stats.objectives` (a frozen
    dataclass, `OBJECTIVE` an instance) and set the class variables; override `of`, and `speed_value` for a speed
    objective."""

    name: ClassVar[str]
    """How `--objective` names it (a parametrised one is NAME:N, see `parse`)."""
    spelled: ClassVar[str]
    """How it is written in `--objective`, for the help and errors, e.g. 'time-to:N (N >= 1 steps)'."""
    direction: ClassVar[str]
    """'maximize' or 'minimize'."""
    speed: ClassVar[bool]
    """A speed objective: the one a study prunes, confirms and exports by. The others are trade-offs, listed after
    one and weighed against it on a Pareto front (alone, eager would win them by definition)."""
    counts_compile: ClassVar[bool] = False
    """Its figure holds compile time: such a study's confirmation compiles every subject cold each replicate."""
    compile_decided: ClassVar[bool] = False
    """Two compiling subjects are ordered by the campaign's interval on their compile times, not by two figures."""
    tie_band: ClassVar[float] = 0.0
    """Figures within this relative difference are as good (a few MiB between runs is no trade-off)."""
    per_sample: ClassVar[bool] = False
    """Its figure is samples per second: the search's anchored ratios and the baselines' search-time lines apply."""

    @classmethod
    def parse(cls, text: str) -> Objective:
        """One objective from its spelling; alone it must be a speed objective."""
        objective = cls.one(text)
        if not objective.speed:
            raise SearchError(
                f"--objective {text!r} alone would make eager (no compile, least memory) the winner by definition; "
                f"list it after a speed objective, e.g. 'throughput,{text}'."
            )
        return objective

    @classmethod
    def one(cls, text: str) -> Objective:
        """Any registered objective from its spelling; SearchError listing what is allowed otherwise."""
        for kind in objective_kinds():
            found = kind.read(text)
            if found is not None:
                return found
        raise SearchError(f"--objective {text!r} is not allowed; use {objective_help()}.")

    @classmethod
    def read(cls, text: str) -> Objective | None:
        """This kind's objective if `text` spells it, else None."""
        return cls() if text == cls.name else None

    @property
    @abstractmethod
    def unit(self) -> str:
        """The unit of its figure, for axes and tables."""

    @property
    def horizon(self) -> int | None:
        """The steps its figure runs after compiling (time-to:N), or None."""
        return None

    def speed_value(self, samples_per_second: float, batches_per_second: float, compile_seconds: float) -> float:
        """A speed objective's figure for one measurement."""
        raise SearchError(f"{self}: is not a speed objective.")

    @abstractmethod
    def of(self, record: RunRecord) -> float:
        """The objective of one complete run."""

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "maximize" else a < b

    def __str__(self) -> str:
        return self.name


@functools.cache
def objective_kinds() -> tuple[type[Objective], ...]:
    """Every registered kind of objective, in the order of its module's name."""
    # `declared_in` only checks instances against the class, which an abstract class does as well as any.
    found = declared_in("autotune.measure.stats.objectives", "OBJECTIVE", Objective)  # type: ignore[type-abstract]
    return tuple(type(entry) for _, entry in found)


def objective_help() -> str:
    """What `--objective` accepts, in words, from the registered objectives."""
    speeds = " or ".join(f"'{kind.spelled}'" for kind in objective_kinds() if kind.speed)
    trade = " and/or ".join(f"'{kind.spelled}'" for kind in objective_kinds() if not kind.speed)
    return f"{speeds}, or a comma-separated list of one of those with {trade} (e.g. 'throughput,compile-time')"


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
        items = [Objective.one(part) for part in parts]
        speed = [o for o in items if o.speed]
        if len(speed) != 1 or items[0] not in speed:
            trade = ", ".join(kind.spelled for kind in objective_kinds() if not kind.speed)
            raise SearchError(
                f"--objective {text!r}: a list starts with one speed objective ('throughput' or 'time-to:N') "
                f"followed by trade-offs ({trade})."
            )
        names = [o.name for o in items]
        if len(set(names)) != len(names):
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
        (`CampaignRules.cold_compiles`)."""
        return self.multi or any(o.counts_compile for o in self.items)

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.items]

    def values(self, record: RunRecord) -> list[float]:
        return [o.of(record) for o in self.items]

    def __str__(self) -> str:
        return ",".join(str(o) for o in self.items)

    def __iter__(self) -> Iterator[Objective]:
        return iter(self.items)


def faster(a: float, b: float, objective: Objective) -> float:
    """How many times faster `a` is than `b` under the objective (samples/s up, or seconds down)."""
    if objective.direction == "maximize":
        return a / b if b else float("inf")
    return b / a if a else float("inf")
