"""Delta debugging of a failing configuration: the smallest set of its settings that still fails.

Each probe runs one subset of the settings (`config_with`) in a fresh process and says whether it
still fails for the same reason. The search is Zeller's ddmin: try each part of the current set,
then each part's complement, then finer parts, until no single setting can go. Probes of the same
effective settings are run once. A budget in seconds bounds the whole: when the next probe would
not fit, the narrowing stops and reports the smallest failing set found so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from autotune.runtime.config import CompileConfig
from autotune.study.explain._settings import Setting, config_with, effective, settings_of

__all__ = ["Narrowing", "Probe", "ProbeOutcome", "narrow"]


@dataclass(frozen=True)
class ProbeOutcome:
    """What one short run of a configuration said."""

    failed: bool
    """It failed for the reason being narrowed."""
    reason: str = ""
    message: str = ""
    seconds: float = 0.0


Probe = Callable[[CompileConfig, float], ProbeOutcome]
"""Runs a configuration in a fresh process within the seconds given; says whether it failed as the trial did."""


@dataclass
class Narrowing:
    """Where a narrowing ended: the failing settings it kept, and what it took."""

    culprit: tuple[Setting, ...]
    """The smallest failing set of settings found; all of them where plain compile itself fails (`against`)."""
    config: CompileConfig
    """The configuration of the culprit settings alone (plain compile where `plain_fails`)."""
    against: str = "plain compile"
    """What the culprit is relative to: 'plain compile', or 'eager' where plain compile failed too; 'not reproduced'
    where no short run failed, the whole configuration's included."""
    complete: bool = True
    """False where the budget ran out first: `culprit` still fails, but may not be the smallest."""
    probes: int = 0
    seconds: float = 0.0
    messages: list[str] = field(default_factory=list)
    """The failing probes' messages, the last one last."""


def narrow(
    config: CompileConfig,
    probe: Probe,
    budget: float,
    *,
    option_needs: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Narrowing:
    """Narrow the failing `config` to the smallest set of its settings that still fails, within `budget` seconds."""
    settings = settings_of(config)
    search = _Search(config, probe, budget, option_needs or {}, clock)
    plain = search.fails(frozenset())
    if plain is None or plain:
        # Plain compile fails too (or was not probed): nothing of the configuration is needed beyond compiling.
        kept = () if plain else settings
        return search.result(kept, against="eager" if plain else "plain compile", complete=plain is not None)
    names = [s.name for s in settings]
    kept_names, complete = _ddmin(names, search)
    if complete and not search.messages:
        # No smaller set failed: the whole configuration is run once, to tell its failure from one that did not come back.
        whole = search.fails(frozenset(names))
        if whole is False:
            unreproduced = search.result((), against="not reproduced")
            unreproduced.config = config  # the reproduction runs the whole configuration
            return unreproduced
        complete = whole is True
    kept = tuple(s for s in settings if s.name in kept_names)
    return search.result(kept, complete=complete)


def _ddmin(names: Sequence[str], search: _Search) -> tuple[list[str], bool]:
    """Zeller's ddmin over `names`, known to fail; (the smallest failing list found, whether it finished)."""
    current = list(names)
    parts = 2
    while len(current) >= 2:
        chunks = _split(current, parts)
        complements = [[name for name in current if name not in chunk] for chunk in chunks]
        reduced = None
        for index, candidate in enumerate([*chunks, *complements]):
            verdict = search.fails(frozenset(candidate))
            if verdict is None:
                return current, False
            if verdict:
                # A part that fails alone starts over in halves; a complement keeps the granularity, one part less.
                reduced, parts = candidate, 2 if index < len(chunks) else max(parts - 1, 2)
                break
        if reduced is not None:
            current = [name for name in current if name in search.effective(reduced)]
            continue
        if parts >= len(current):
            break
        parts = min(len(current), parts * 2)
    return current, True


def _split(names: list[str], parts: int) -> list[list[str]]:
    size, extra = divmod(len(names), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        chunks.append(names[start:end])
        start = end
    return [chunk for chunk in chunks if chunk]


class _Search:
    """The probes of one narrowing: each effective subset run once, within the budget."""

    def __init__(
        self,
        config: CompileConfig,
        probe: Probe,
        budget: float,
        option_needs: Mapping[str, str],
        clock: Callable[[], float],
    ) -> None:
        self.config, self.probe, self.budget, self.needs, self.clock = config, probe, budget, option_needs, clock
        self.started = clock()
        self.seen: dict[frozenset[str], bool] = {}
        self.probes = 0
        self.longest = 0.0
        self.messages: list[str] = []

    def effective(self, names: Sequence[str] | frozenset[str]) -> frozenset[str]:
        return effective(self.config, names, self.needs)

    def left(self) -> float:
        return self.budget - (self.clock() - self.started)

    def fails(self, names: frozenset[str]) -> bool | None:
        """Whether the configuration of `names` fails as the trial did; None when the budget cannot pay for a probe."""
        key = self.effective(names)
        if key in self.seen:
            return self.seen[key]
        left = self.left()
        if left <= 0 or (self.probes and left < self.longest):
            return None
        outcome = self.probe(config_with(self.config, key, self.needs), left)
        self.probes += 1
        self.longest = max(self.longest, outcome.seconds)
        if outcome.failed:
            self.messages.append(outcome.message)
        elif self.left() <= 0 and outcome.reason == "timeout":
            return None  # cut short by the budget: it says nothing
        self.seen[key] = outcome.failed
        return outcome.failed

    def result(self, kept: Sequence[Setting], *, against: str = "plain compile", complete: bool = True) -> Narrowing:
        return Narrowing(
            culprit=tuple(kept),
            config=config_with(self.config, [s.name for s in kept], self.needs),
            against=against,
            complete=complete,
            probes=self.probes,
            seconds=round(self.clock() - self.started, 3),
            messages=self.messages,
        )
