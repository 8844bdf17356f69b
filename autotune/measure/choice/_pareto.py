"""The Pareto front of a multi-objective study, from its confirmation campaign, and which point best.yaml gets.

Candidates are eager, plain torch.compile and every confirmed configuration, placed by
their confirmed figures: the speed objective (over the replicates), the median compile
time (eager: 0 s) and the median peak memory. A point is on the front when no other point
is at least as good on every objective and better on one.

The never-worse rule carries over: against plain torch.compile, speed is read with the
outcome rule and band a single-objective search chooses by (`outcome`): faster only when
decided a gain, slower when decided a loss, as fast when equivalent within the band; an
undecided speed cannot be told from plain compile's either way, so neither point dominates the
other. A configuration slower by its estimate, undecided, that once compiled sooner does not
push plain compile off the front. Between other points (eager and the configurations) speed
is compared by median. Peak memory is compared by median, and two within the band of each
other are as good.

Compile time is read the same way: a study whose front weighs compile time compiles every
configuration cold again before each replicate (`CampaignRules.cold_compiles`), and two points'
compile times are compared by the outcome rule and band on their paired ratio
(`Campaign.compile_ratio`, simultaneous over the campaign's looks and candidates as speed's
intervals are); a compile-time bound (`fastest:2x`) holds a point only when its
interval lies wholly within it. One cold compile each (a campaign without them) is one
measurement: it is shown, and decides nothing. Eager compiles nothing, which needs no interval.

Which point best.yaml ships is a pick rule (`--pick`):

- `fastest` — what a single-objective search would export among the front (a
  configuration only with a confirmed gain over plain torch.compile);
- `fastest:Kx` / `fastest:Ss` — the same among the points that compile in at most K times
  plain torch.compile's compile time, or S seconds (the default is `fastest:2x`);
- `least-compile`, `least-memory` — the point with the shortest compile, or least memory;
- `eager`, `compile`, `trial:N` — that point, if it is on the front.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autotune.errors import SearchError
from autotune.measure.choice._choice import Choice, choose
from autotune.measure.engine import BASELINES, Campaign
from autotune.measure.stats import BAND, Objective, Objectives, outcome
from autotune.runtime.config import CompileConfig

__all__ = [
    "DEFAULT_PICK",
    "Pick",
    "Point",
    "choose_point",
    "front",
    "parse_pick",
    "point_figures",
    "points",
    "subjects_to_confirm",
]

DEFAULT_PICK = "fastest:2x"
YARDSTICK = "compile"
"""Speed against this subject is judged by the paired interval; between any others, by the medians."""


@dataclass(frozen=True)
class Point:
    """One candidate with its confirmed figures, in the order of the study's objectives."""

    subject: str
    values: tuple[float, ...]
    compile_seconds: float
    peak_memory_mb: float | None


@dataclass(frozen=True)
class Pick:
    """A parsed pick rule."""

    rule: str
    """'fastest', 'least-compile', 'least-memory' or 'subject'."""
    bound: float | None = None
    """For 'fastest': the compile-time bound (seconds, or a multiple of plain compile's when `relative`)."""
    relative: bool = False
    subject: str = ""

    def __str__(self) -> str:
        if self.rule == "subject":
            return self.subject.replace("trial ", "trial:")
        if self.rule == "fastest" and self.bound is not None:
            return f"fastest:{self.bound:g}{'x' if self.relative else 's'}"
        return self.rule


_PICK_HELP = "fastest, fastest:Kx, fastest:Ss, least-compile, least-memory, eager, compile or trial:N"


def parse_pick(text: str) -> Pick:
    """A pick rule from its text; SearchError names what is allowed."""
    value = str(text).strip()
    if value in ("fastest", "least-compile", "least-memory"):
        return Pick(value)
    if value in BASELINES:
        return Pick("subject", subject=value)
    match = re.fullmatch(r"trial:(\d+)", value)
    if match:
        return Pick("subject", subject=f"trial {int(match.group(1))}")
    match = re.fullmatch(r"fastest:(\d+(?:\.\d+)?)([xs])", value)
    if match and float(match.group(1)) > 0:
        return Pick("fastest", bound=float(match.group(1)), relative=match.group(2) == "x")
    raise SearchError(f"--pick {text!r} is not allowed; use {_PICK_HELP} (K, S > 0).")


def points(campaign: Campaign, objectives: Objectives) -> list[Point]:
    """Every subject that completed its confirmation runs, with its confirmed figures.

    Each figure is the lower median over the replicates, as in the confirmation table; compile
    time is the median of the cold compiles between replicates (`Campaign.compile_seconds`).
    """
    found = []
    for name in campaign.subjects:
        runs = campaign.complete_indexed(name)
        if not runs or campaign.counted_failure(name) is not None:
            continue
        memory = [r.peak_memory_mb for _, r in runs if r.peak_memory_mb is not None]
        found.append(
            Point(
                name,
                tuple(_lower_median([campaign.value_of(name, r, o, i) for i, r in runs]) for o in objectives),
                campaign.compile_seconds(name) or 0.0,
                _lower_median(memory) if memory else None,
            )
        )
    return found


def _lower_median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


def front(campaign: Campaign, objectives: Objectives) -> list[Point]:
    """The points no other point dominates, fastest first."""
    every = points(campaign, objectives)
    kept = [p for p in every if not any(_dominates(campaign, objectives, q, p) for q in every if q is not p)]
    primary = objectives.primary
    return sorted(kept, key=lambda p: p.values[0], reverse=primary.direction == "maximize")


def _dominates(campaign: Campaign, objectives: Objectives, a: Point, b: Point) -> bool:
    """Whether `a` is at least as good as `b` on every objective and better on one."""
    better = False
    for index, objective in enumerate(objectives):
        order = _compare(campaign, objective, a, b, index)
        if order is None or order < 0:
            return False
        better = better or order > 0
    return better


def _compare(campaign: Campaign, objective: Objective, a: Point, b: Point, index: int) -> int | None:
    """1 when `a` is better than `b` on this objective, -1 when worse, 0 when as good; None when undecided."""
    if index == 0 and YARDSTICK in (a.subject, b.subject):
        # Speed against plain torch.compile, the yardstick of the never-worse rule: read as a single-objective
        # search reads it (`outcome`, the same band).
        said = outcome(campaign.ratio(a.subject, b.subject), BAND)
        return {"gain": 1, "loss": -1, "equivalent": 0}.get(said)
    if objective.compile_decided and "eager" not in (a.subject, b.subject):
        return _compile_order(campaign, a.subject, b.subject)
    x, y = a.values[index], b.values[index]
    if x == y or abs(x - y) <= objective.tie_band * max(x, y):
        return 0  # within the objective's band is as good: a few MiB of memory between runs is no trade-off
    return 1 if objective.better(x, y) else -1


def _compile_order(campaign: Campaign, a: str, b: str) -> int | None:
    """Compile time between two compiling subjects, by the same outcome rule and band as speed: 1 when `a` is
    decided to compile sooner, -1 later, 0 as soon (equivalent within the band); None when undecided, and when
    there is no interval at all: one cold compile each decides nothing, so neither point dominates the other."""
    said = outcome(campaign.compile_ratio(a, b), BAND)
    return {"gain": 1, "loss": -1, "equivalent": 0}.get(said)


def choose_point(campaign: Campaign, objectives: Objectives, pick: Pick) -> tuple[Choice, list[Point]]:
    """The point best.yaml ships under `pick`, and the front it was picked from."""
    on_front = front(campaign, objectives)
    if not on_front:
        return choose(campaign), on_front
    names = [p.subject for p in on_front]
    if pick.rule == "subject":
        if pick.subject not in names:
            raise SearchError(
                f"--pick {pick}: {pick.subject} is not on the Pareto front; its points: {', '.join(names)}."
            )
        return _choice(campaign, pick.subject, f"{pick.subject} is exported: picked by --pick {pick}."), on_front
    if pick.rule in ("least-compile", "least-memory"):
        figure = "compile_seconds" if pick.rule == "least-compile" else "peak_memory_mb"
        best = min(on_front, key=lambda p: getattr(p, figure) if getattr(p, figure) is not None else float("inf"))
        what = "the shortest compile" if pick.rule == "least-compile" else "the least peak memory"
        return _choice(campaign, best.subject, f"{best.subject} is exported: {what} on the Pareto front."), on_front
    bound = _compile_bound(campaign, pick)
    eligible = [p.subject for p in on_front if bound is None or _within(campaign, p, pick, bound)]
    chosen = choose(campaign.only([*BASELINES, *eligible]))
    if chosen.subject not in names:
        # The rule's answer was dominated (e.g. plain compile by a configuration as fast that compiles sooner).
        # Only what dominates it is as fast by the same rule and better on another objective, so only that may
        # ship instead: the fastest such point within the bound. A point merely not dominated (an undecided
        # speed) proves nothing, and where no point on the front dominates the answer, the answer ships.
        answer = next((p for p in points(campaign, objectives) if p.subject == chosen.subject), None)
        better = [
            p.subject
            for p in on_front
            if answer is not None and p.subject in eligible and _dominates(campaign, objectives, p, answer)
        ]
        if better:
            chosen = _choice(
                campaign,
                better[0],
                f"{better[0]} is exported: it dominates {chosen.exported} on the Pareto front (as fast by the "
                "export rule, better on another objective), the fastest such point within the bound.",
            )
    if bound is not None:
        verdict = f"{chosen.verdict.rstrip('.')} (--pick {pick}: compile at most {bound:.3g} s)."
        return dataclasses.replace(chosen, verdict=verdict), on_front
    return chosen, on_front


def _compile_bound(campaign: Campaign, pick: Pick) -> float | None:
    if pick.bound is None:
        return None
    if not pick.relative:
        return pick.bound
    runs = campaign.complete_runs("compile")
    if not runs:
        return None  # plain compile failed: no yardstick, so no bound
    return pick.bound * (campaign.compile_seconds("compile") or 0.0)


def _within(campaign: Campaign, point: Point, pick: Pick, bound: float) -> bool:
    """Whether a point compiles within the pick's bound: wholly, by the upper end of its interval (the ratio to plain
    compile's compile time for `fastest:Kx`, its own compile seconds for `fastest:Ss`). Eager and plain compile
    itself always are (K >= 1 holds plain compile). Without cold compiles between replicates, a point's one cold
    compile decides nothing: it is within."""
    if point.subject == "eager" or (pick.relative and point.subject == YARDSTICK and (pick.bound or 0) >= 1):
        return True
    if pick.relative:
        versus = campaign.compile_ratio(YARDSTICK, point.subject)  # how many times longer it compiles
        return versus is None or versus.high <= (pick.bound or 0.0)
    seconds = campaign.extra_compile(point.subject)
    return seconds is None or seconds.high <= bound


def _choice(campaign: Campaign, name: str, verdict: str) -> Choice:
    subject = campaign.subjects[name]
    if name == "eager":
        return Choice(
            subject=name, exported="no compilation", config=CompileConfig(scope="none"), trial=None, verdict=verdict
        )
    if name == "compile":
        return Choice(subject=name, exported="plain torch.compile", config=CompileConfig(), trial=None, verdict=verdict)
    assert subject.config is not None
    return Choice(subject=name, exported=name, config=subject.config, trial=subject.trial, verdict=verdict)


def point_figures(campaign: Campaign, objectives: Objectives, point: Point) -> dict[str, Any]:
    """What pareto.yaml and the report say of a point: its objectives, compile time, memory and ratios."""
    figures: dict[str, Any] = {str(o): round(v, 6) for o, v in zip(objectives, point.values, strict=True)}
    figures["compile_seconds"] = round(point.compile_seconds, 3)
    figures["peak_memory_mb"] = round(point.peak_memory_mb, 1) if point.peak_memory_mb is not None else None
    for reference in BASELINES:
        versus = campaign.ratio(point.subject, reference) if point.subject != reference else None
        figures[f"vs_{reference}"] = versus.to_dict() if versus else None
    return figures


def subjects_to_confirm(values: Sequence[tuple[int, float]], count: int) -> list[int]:
    """Up to `count` trial numbers spread along the front (given as (trial, speed value), fastest first)."""
    if len(values) <= count:
        return [number for number, _ in values]
    if count <= 1:
        return [values[0][0]]
    step = (len(values) - 1) / (count - 1)
    return [values[round(i * step)][0] for i in range(count)]
