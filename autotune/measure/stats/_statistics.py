"""The statistics of paired ratios at two levels: windows inside a replicate, replicates inside a campaign.

A replicate is one measurement session: every subject alive in a process of its own, taking
turns window by window on the same slices of the fresh stream. Drift within the session hits
both sides of a pair alike and cancels in their ratio; what differs between sessions (each
subject gets new processes, with their own memory layout and thread placement) does not, so
the replicates are the independent units:

* each replicate gives one paired log-ratio per pair of subjects (`replicate_log_ratio`);
* the interval is the Student-t interval of those replicate values, with replicates - 1
  degrees of freedom, mapped back from logarithms (`replicate_interval`; `SPREAD_RULE` can
  borrow the spread from every pair against the same reference instead, `pooled`), its spread
  never below a floor: what the device's own replicates show new processes agree to at best
  (`measured_floor`), and never above `REPLICATE_SD_FLOOR`;
* the variance of single windows' paired log-ratios inside replicates, and what is left
  between replicates beyond it, are the two variance components (`components`); with the
  cost of a window and of a new process they give the windows per replicate that narrow the
  interval fastest for the time spent (`windows_per_replicate`, Kalibera and Jones).

A campaign looks at its figures after the replicates it planned (every one from its first look
to its last, or a few: `Looks.at`), and judges the best of several candidates each time; an
interval at the plain 95% level, looked at after every replicate, claims a gain for a candidate no faster than the reference in 11 to 18% of
campaigns. So a campaign spends its error (`Looks`): one-sided 2.5% on each side over the
whole campaign, shared by its candidates (Bonferroni) and, for each, a share at the last look
(three quarters in a search's confirmation; half in `autotune validate` and a retune) and the rest in equal parts over the earlier ones (a Bonferroni
alpha-spending schedule). Every interval it prints is then simultaneous: it holds at whichever look the campaign stopped, for whichever
candidate led, with at least 95% probability, and a gain is claimed for a candidate no faster
than the reference in at most 2.5% of campaigns.

An outcome (`outcome`) reads an interval against 1: equivalence when it lies inside the band
of +/- `within` (whether or not it excludes 1); a gain when it lies above 1 + `GAIN_MARGIN` (the
campaign is sure of at least 1.5%) and its estimate lies above the band (a gain worth the name,
measured as one); a loss likewise below; undecided otherwise. With the estimate held to the
band, more precision can only turn an undecided small difference into equivalence, never into a
claim.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.measure.stats._distributions import chi2_quantile, t975, t_cdf, t_quantile

__all__ = [
    "BAND",
    "FUTILITY_CHANCE",
    "FUTILITY_ERROR",
    "FUTILITY_RULE",
    "FUTILITY_RULES",
    "FLOOR_CONFIDENCE",
    "FLOOR_RULES",
    "OUTCOMES",
    "REPLICATE_SD_FLOOR",
    "SPREAD_RULE",
    "SPREAD_RULES",
    "SPREAD_FLOOR_LEAST",
    "Components",
    "Interval",
    "Looks",
    "Pooled",
    "chi2_quantile",
    "components",
    "gain_margin",
    "measured_floor",
    "mean_interval",
    "outcome",
    "paired_interval",
    "pooled",
    "replicate_interval",
    "spaced_looks",
    "spread_rule",
    "t975",
    "t_cdf",
    "t_quantile",
    "claim_chance",
    "upper_bound",
    "windows_per_replicate",
]

OUTCOMES = ("gain", "loss", "equivalent", "undecided")
"""What an interval against 1 says."""
BAND = 0.02
"""The band of equivalence around 1: a ratio within +/-2% is no difference worth a configuration."""
ERROR = 0.025
"""The chance, over a whole campaign, that an interval misses on one side: 2.5% each side, 95% in all."""
GAIN_MARGIN = 0.015
"""How far beyond 1 an interval's lower end must lie for a gain (its upper end below 1 / (1 + it) for a loss): a gain
is claimed only where the campaign is sure of at least 1.5%. Without it, a candidate slightly slower than plain
compile was exported whenever a few of its replicates scattered high; what the margin costs in power and saves in
slower exports is simulated in outputs/benchmarks/decision-error.md (*The trade-off: a margin against slower exports
and power*)."""
FUTILITY_ERROR = 0.3
"""How often `upper_bound` may fall below a candidate's true ratio: the bound a campaign's stop for want of a gain
supposes the candidate may reach (`FUTILITY_RULES`). Chosen under the `band` rule, where a real gain was found as
often as without the stop (outputs/benchmarks/decision-error.md, which also has 0.2 and 0.4)."""
FUTILITY_RULES = ("band", "chance")
"""When a campaign stops for want of a gain: `band`, once every candidate's `upper_bound` lies inside the band;
`chance`, once every candidate's `claim_chance` is under `FUTILITY_CHANCE`."""
FUTILITY_RULE = "chance"
"""The rule a campaign stops by unless its rules say otherwise (`CampaignRules.futility_rule`; the simulation's
`--futility-rule`)."""
FUTILITY_CHANCE = 0.05
"""The default `CampaignRules.futility_chance`: under the `chance` rule, a campaign stops for want of a gain once no
candidate would be claimed a gain at its last look in as much as this share of campaigns, were its true ratio as high
as its `upper_bound`. At 5% a campaign with no gain to find stops sooner than under the `band` rule, and a real gain is
found as often; 10% cost power (outputs/benchmarks/decision-error.md, *The stop for want of a gain, by the chance at
the last look*)."""
SPREAD_RULES = ("floor", "pooled", "pooled-floor")
"""How a campaign's interval takes a pair's spread between replicates: `floor`, the pair's own replicates with the spread
never below `REPLICATE_SD_FLOOR`; `pooled`, borrowed from every pair against the same reference (`Pooled`), on their
degrees of freedom; `pooled-floor`, borrowed and floored. The windows' least spread holds under all three."""
SPREAD_RULE = "floor"
"""The rule in force (`SPREAD_RULES`). The simulation supports borrowing (outputs/benchmarks/decision-error.md, *A
spread borrowed across pairs: simulated, not adopted*), but on real processes eager's pair and a configuration's
scatter differently, and a borrowed spread narrowed a configuration's interval below what its own replicates showed;
so each pair keeps its own, floored, until the simulation models subjects of different kinds. `--spread-rule` there
sets it per process."""
REPLICATE_SD_FLOOR = 0.015
"""The least standard deviation between replicates' paired log-ratios that a campaign's windows per replicate and its
compile-time ratios assume, and the most its intervals and its stop for want of a gain take as their floor (under the
`floor` and `pooled-floor` rules): the smallest seen between new pairs of identical processes on the 2-core CPU
(recorded in outputs/benchmarks/noise.md). Under the `measured` floor rule a quieter device, a GPU, floors lower
(`measured_floor`)."""
FLOOR_RULES = ("measured", "fixed")
"""Where a campaign's floor under the spread comes from: `measured`, from the campaign's own replicates on its device
(`measured_floor`, never above `REPLICATE_SD_FLOOR`); `fixed`, `REPLICATE_SD_FLOOR` on every device (campaigns
recorded before the floor was measured are read so)."""
FLOOR_CONFIDENCE = 0.95
"""How sure a measured floor is not to lie below the device's true spread between replicates: it is the one-sided
upper confidence bound of the spread the campaign's pairs show together (`measured_floor`)."""
SPREAD_FLOOR_LEAST = 0.002
"""The least a measured floor may be: replicates that agree to a fifth of a percent say more about the stand-ins
than about any device."""


def measured_floor(spread: Pooled | None, ceiling: float = REPLICATE_SD_FLOOR) -> float:
    """The floor under a pair's spread that the device's own replicates support: the one-sided `FLOOR_CONFIDENCE` upper
    confidence bound of the spread pooled over the campaign's pairs (`pooled`, on its degrees of freedom), never above
    `ceiling` nor below `SPREAD_FLOOR_LEAST`; `ceiling` itself before any pair has two replicates.

    A pair whose own replicates agree more closely than that is taken to be lucky, as under the fixed floor; but
    on a device whose processes agree better than the 2-core CPU's (a GPU), the floor follows them down, and a gain
    of 2 or 3% that the CPU's floor would hide can be shown. The bound is conservative: its few degrees of freedom
    early in a campaign keep it at `ceiling` until the replicates say the device is quiet."""
    if spread is None or spread.df <= 0:
        return ceiling
    bound = math.sqrt(spread.variance * spread.df / chi2_quantile(1.0 - FLOOR_CONFIDENCE, spread.df))
    return min(ceiling, max(SPREAD_FLOOR_LEAST, bound))


def spread_rule() -> str:
    """The `SPREAD_RULE` in force, read when asked (the simulation sets it after this module is loaded)."""
    return SPREAD_RULE


@dataclass(frozen=True)
class Pooled:
    """A spread between replicates borrowed from several pairs against one reference: their variance and the degrees
    of freedom it rests on (`pooled`)."""

    variance: float
    df: float


def pooled(pairs: Sequence[Sequence[float]]) -> Pooled | None:
    """The spread of paired log-ratios pooled over several pairs against the same reference, each pair's replicates
    about its own mean; None where no pair has two replicates (a pair of one lends nothing).

    The pairs share the reference's runs, so their sums of squares are correlated (a correlation of one half
    between two pairs' log-ratios when every subject varies alike): k pairs of n replicates each carry about
    4 k (n - 1) / (3 + k) degrees of freedom (Satterthwaite), not k (n - 1); one pair carries its own n - 1.
    """
    groups = [list(g) for g in pairs if len(g) >= 2]
    if not groups:
        return None
    squares = math.fsum(math.fsum((v - math.fsum(g) / len(g)) ** 2 for v in g) for g in groups)
    freedom = sum(len(g) - 1 for g in groups)
    df = max(max(len(g) - 1 for g in groups), freedom * 4 / (3 + len(groups)))
    return Pooled(squares / freedom, df)


@dataclass(frozen=True)
class Interval:
    """A ratio between two subjects with its interval (95%, simultaneous over a campaign's looks), over paired replicates.

    `median` is the point estimate: the geometric mean of the replicates' paired ratios (the
    name is kept from earlier files, where it was the median of paired rounds of fresh processes).
    """

    median: float
    low: float
    high: float
    replicates: int
    """Replicates (independent sessions) the interval rests on."""
    windows: int = 0
    """Paired windows in all, over those replicates (0 where files did not record them)."""

    def gain(self, margin: float | None = None) -> bool:
        """The whole interval is above 1 + `margin` (None: `GAIN_MARGIN`): a gain that survives the noise."""
        return self.low > 1.0 + (GAIN_MARGIN if margin is None else margin)

    def loss(self, margin: float | None = None) -> bool:
        """The whole interval is below 1 / (1 + `margin`) (None: `GAIN_MARGIN`): a loss that survives the noise."""
        return self.high < 1.0 / (1.0 + (GAIN_MARGIN if margin is None else margin))

    def equivalent(self, within: float) -> bool:
        """The whole interval lies inside [1 / (1 + within), 1 + within]: no difference worth the name."""
        return self.low >= 1.0 / (1.0 + within) and self.high <= 1.0 + within

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to its estimate: 0.03 reads as +/-3%."""
        return (self.high - self.low) / 2 / self.median if self.median else math.inf

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "median": round(self.median, 4),
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "replicates": self.replicates,
        }
        if self.windows:
            data["windows"] = self.windows
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Interval:
        return cls(
            float(data["median"]),
            float(data["low"]),
            float(data["high"]),
            int(data["replicates"] if "replicates" in data else data["rounds"]),  # rounds: earlier files
            int(data.get("windows") or 0),
        )


def outcome(interval: Interval | None, within: float = BAND) -> str:
    """'gain', 'loss', 'equivalent' or 'undecided' for a ratio to the reference (None: undecided).

    Equivalence comes first: an interval inside the +/- `within` band is no difference worth
    the name even where it excludes 1. A precise enough measurement of two identical
    configurations excludes 1 in one comparison in twenty, by construction; it must not be
    called a gain (or a loss) for that. A gain needs the whole interval above 1 + `gain_margin(within)`
    and its estimate above the band: [1.001, 1.021] around 1.011 is a difference smaller than the band,
    not yet told from equivalence, and stays undecided (a loss likewise).
    """
    if interval is None or interval.replicates < 2:
        return "undecided"  # one replicate says nothing of the variation between processes
    if interval.equivalent(within):
        return "equivalent"
    margin = gain_margin(within)
    if interval.gain(margin) and interval.median > 1.0 + within:
        return "gain"
    if interval.loss(margin) and interval.median < 1.0 / (1.0 + within):
        return "loss"
    return "undecided"


def gain_margin(within: float = BAND) -> float:
    """How far past 1 an interval's far end must lie for a gain or a loss: `GAIN_MARGIN`, or the band where a
    caller chose one narrower (a caller who counts a 0.5% difference as one accepts claims from 0.5%)."""
    return min(GAIN_MARGIN, within)


@dataclass(frozen=True)
class Looks:
    """How a campaign spends its error over the looks it takes and the candidates it compares.

    A look is a judgement after a replicate: the campaign may stop there, deciding or finding no
    gain left to show. Each of the `candidates` is compared with the reference at each look. The
    whole campaign may miss on one side with probability `error` at most: each candidate gets
    `error / candidates` (Bonferroni), of which the last look spends `last_share` and the earlier
    looks share the rest equally. By the union bound, every interval of every candidate at every
    look then holds at once with probability 1 - 2 `error`, whatever the look the campaign stops at.

    The looks are `at`, planned replicates from `first` to `last` (empty: every replicate from
    `first` to `last`, the schedule of method version 6 and earlier). A campaign made to stop
    between them (its seconds spent, every rival failed) spends what its looks so far left
    unspent there: a stop that depends on the clock, not on the ratios, keeps the bound.

    Few looks and most of the error at the last keep the power where a campaign that has not
    stopped early decides: early looks on two or three degrees of freedom need quantiles of 7 to
    25 and decide only large gains, so error spent on every one of them is power lost at the end.
    """

    candidates: int = 1
    first: int = 2
    last: int = 2
    error: float = ERROR
    at: tuple[int, ...] = ()
    """The planned looks, from `first` to `last` (empty: every replicate between them)."""
    last_share: float = 0.5
    """The share of a candidate's error the last look spends (the rest shared by the earlier looks)."""
    floor_rule: str = "measured"
    """Where the floor under its intervals' spread comes from (`FLOOR_RULES`)."""

    def __post_init__(self) -> None:
        if self.candidates < 1:
            raise ValueError(f"looks: candidates must be >= 1, got {self.candidates}")
        if not 1 <= self.first <= self.last:
            raise ValueError(f"looks: 1 <= first <= last must hold, got ({self.first=}, {self.last=})")
        if not 0 < self.error < 0.5:
            raise ValueError(f"looks: error must lie in (0, 0.5), got {self.error}")
        if self.at and (list(self.at) != sorted(set(self.at)) or self.at[0] != self.first or self.at[-1] != self.last):
            raise ValueError(f"looks: at must rise from first to last, got {self.at} ({self.first=}, {self.last=})")
        if not 0 < self.last_share <= 1:
            raise ValueError(f"looks: last_share must lie in (0, 1], got {self.last_share}")
        if self.floor_rule not in FLOOR_RULES:
            raise ValueError(f"looks: floor_rule must be one of {', '.join(FLOOR_RULES)}, got {self.floor_rule!r}")

    @property
    def planned(self) -> tuple[int, ...]:
        """The replicates after which the campaign looks."""
        return self.at or tuple(range(self.first, self.last + 1))

    @property
    def count(self) -> int:
        """How many looks the campaign may take."""
        return len(self.planned)

    def judges(self, replicates: int) -> bool:
        """Whether the campaign looks after `replicates` replicates: decides, or stops for want of a gain."""
        return replicates in self.planned

    def _weight(self, replicates: int) -> float:
        """What the planned look after `replicates` replicates spends, of one candidate's error."""
        per_candidate = self.error / self.candidates
        if self.count == 1:
            return per_candidate
        if replicates >= self.last:
            return per_candidate * self.last_share
        return per_candidate * (1 - self.last_share) / (self.count - 1)

    def share(self, replicates: int) -> float:
        """The one-sided error one candidate's interval spends after `replicates` replicates: a planned look's
        weight, or, for a campaign made to stop between looks, what the looks before it left unspent."""
        if replicates in self.planned:
            return self._weight(replicates)
        spent = sum(self._weight(n) for n in self.planned if n < replicates)
        return max(self.error / self.candidates - spent, 0.0)

    def quantile(self, replicates: int, at: int | None = None, df: float | None = None) -> float:
        """The Student-t quantile of an interval over `replicates` paired replicates (df = replicates - 1, or `df` for
        a borrowed spread), judged after replicate `at` of the campaign (None: `replicates`). They differ where a
        subject's run failed in some replicate: the error spent is the look's, whatever the pairs it has."""
        share = self.share(replicates if at is None else at)
        if replicates < 2 or share <= 0:
            return math.inf
        return t_quantile(1.0 - share, replicates - 1 if df is None else max(1, math.floor(df)))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "candidates": self.candidates,
            "first": self.first,
            "last": self.last,
            "error": self.error,
        }
        if self.at:
            data["at"] = list(self.at)
        if self.last_share != 0.5:
            data["last_share"] = self.last_share
        if self.floor_rule != "fixed":  # absent, as in every campaign recorded before the floor was measured
            data["floor_rule"] = self.floor_rule
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Looks:
        return cls(
            candidates=int(data.get("candidates", 1)),
            first=int(data.get("first", 2)),
            last=int(data.get("last", 2)),
            error=float(data.get("error", ERROR)),
            at=tuple(int(n) for n in data.get("at") or ()),
            last_share=float(data.get("last_share", 0.5)),
            floor_rule=str(data.get("floor_rule", "fixed")),  # recorded before the floor was measured: fixed
        )

    def describe(self) -> str:
        """In words, for reports."""
        shown = ", ".join(str(n) for n in self.planned) if self.at else f"{self.first} to {self.last}"
        looks = f"{self.count} look(s), after replicates {shown}"
        spent = (
            f"{self.last_share:.0%} of the error at the last look, the rest shared by the earlier ones"
            if self.count > 1
            else "all the error at its one look"
        )
        return f"simultaneous {1 - 2 * self.error:.0%} over {self.candidates} candidate(s) and {looks} (Bonferroni over candidates; {spent})"


def spaced_looks(first: int, last: int, count: int) -> tuple[int, ...]:
    """`count` looks from replicate `first` to `last`, as evenly spaced as whole replicates allow (fewer when the
    span holds fewer)."""
    if count < 1:
        raise ValueError(f"looks: count must be >= 1, got {count}")
    if count == 1 or first == last:
        return (last,)
    steps = [first + math.floor((last - first) * i / (count - 1) + 0.5) for i in range(count)]
    return tuple(sorted(set(steps)))


def replicate_interval(
    log_ratios: Sequence[float],
    windows: int = 0,
    looks: Looks | None = None,
    parts: Components | None = None,
    at: int | None = None,
    borrowed: Pooled | None = None,
    floor: float = REPLICATE_SD_FLOOR,
) -> Interval:
    """The geometric mean of per-replicate ratios (given as logarithms) with its t-interval (df = n - 1).

    Without `looks`, the plain 95% interval of one look at one candidate; with them, the
    campaign's simultaneous interval at the look after replicate `at` (None: as many as the
    log-ratios; `Looks.quantile`), whose spread is never
    taken below `floor` (`REPLICATE_SD_FLOOR`, or what the device's replicates support, `measured_floor`): a few
    replicates that happen to agree more closely than new processes on the device do are luck, and a campaign
    that stopped on them (a precision stop, an early gain) would print an interval that covers less than it says.

    With a spread `borrowed` from the campaign's pairs (`pooled`) and a `SPREAD_RULE` that borrows, the interval
    takes that spread on its degrees of freedom instead of the pair's own, floored under `pooled-floor` as under
    `floor` (the default), not under `pooled`.

    Given the campaign's variance components (`parts`), the spread is never taken below what
    the windows alone put into a replicate's mean either (`Components.least_replicate_sd`): the
    replicates' own spread rests on a few of them, the windows' on every window of every
    replicate, and a replicate's mean can vary no less than its windows make it.
    """
    if not log_ratios:
        raise ValueError("an interval needs at least one replicate")
    centre = statistics.fmean(log_ratios)
    if len(log_ratios) == 1:
        value = math.exp(centre)
        return Interval(value, value, value, 1, windows)
    quantile = looks.quantile(len(log_ratios), at) if looks is not None else t975(len(log_ratios) - 1)
    spread = math.sqrt(_variance(log_ratios))
    if looks is not None:
        if borrowed is not None and SPREAD_RULE != "floor":
            # The pooled spread on its own degrees of freedom; floored as well only under `pooled-floor`.
            spread, quantile = math.sqrt(borrowed.variance), looks.quantile(len(log_ratios), at, df=borrowed.df)
            floor = floor if SPREAD_RULE == "pooled-floor" else 0.0
        spread = max(spread, floor, parts.least_replicate_sd if parts is not None else 0.0)
    half = quantile * spread / math.sqrt(len(log_ratios))
    return Interval(math.exp(centre), math.exp(centre - half), math.exp(centre + half), len(log_ratios), windows)


def upper_bound(
    log_ratios: Sequence[float],
    windows: int = 0,
    parts: Components | None = None,
    error: float | None = None,
    floor: float = REPLICATE_SD_FLOOR,
) -> float:
    """The one-sided upper bound of a ratio at a look, missing with probability `error` (None: `FUTILITY_ERROR`),
    with the spread floored as a campaign's intervals floor it: how fast the subject may be, at most, for all its
    replicates show: the most the stop for want of a gain supposes it may be (`claim_chance`; under the `band` rule, a
    campaign whose every candidate's bound lies inside the band has no gain left to find).

    It claims nothing and spends none of the campaign's error: a campaign stopped on it exports no configuration,
    so it can only miss a gain (its power, simulated in outputs/benchmarks/decision-error.md), never make one."""
    at = max(len(log_ratios), 1)
    looks = Looks(first=at, last=at, error=FUTILITY_ERROR if error is None else error)
    return replicate_interval(log_ratios, windows, looks, parts, floor=floor).high


def claim_chance(
    log_ratios: Sequence[float],
    looks: Looks,
    windows: int = 0,
    parts: Components | None = None,
    within: float = BAND,
    floor: float = REPLICATE_SD_FLOOR,
) -> float:
    """The chance that a candidate would be claimed a gain at the campaign's last look (`looks.last`), were its true
    log-ratio as high as its `upper_bound` now and its spread what its replicates so far show (floored as its
    intervals are): the replicates still to come, on their own, scatter about that bound, and the last look's
    interval needs its lower end above 1 + `gain_margin` and its estimate above the band.

    A candidate whose chance is small has, for all its replicates show, no gain the campaign could still claim: at a
    wide spread the last look's quantile asks for far more than the band, and a campaign that waits for the upper
    bound to fall inside the band runs most of its replicates for nothing. Like `upper_bound`, it claims nothing."""
    done = len(log_ratios)
    if done < 2:
        return 1.0
    centre = math.fsum(log_ratios) / done
    spread = max(math.sqrt(_variance(log_ratios)), floor, parts.least_replicate_sd if parts else 0.0)
    last, rest = max(looks.last, done), max(looks.last - done, 0)
    needed = max(math.log1p(gain_margin(within)) + looks.quantile(last) * spread / math.sqrt(last), math.log1p(within))
    if rest == 0:
        return 1.0 if centre > needed else 0.0  # at the last look its interval has said it
    high = math.log(upper_bound(log_ratios, windows, parts, floor=floor))
    expected = (done * centre + rest * high) / last
    scatter = spread * math.sqrt(rest) / last
    return 0.5 * math.erfc((needed - expected) / (scatter * math.sqrt(2.0)))


def _variance(values: Sequence[float]) -> float:
    """The sample variance (n - 1) in floating point: `statistics.variance` works in exact fractions, a hundred
    times slower, for a precision no interval here needs."""
    centre = math.fsum(values) / len(values)
    return math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The arithmetic mean of `values` (seconds, not ratios) with its plain t-interval (df = n - 1), 95% by default.

    For quantities measured once per replicate whose differences, not ratios, matter: the
    seconds a configuration compiles longer than plain compile, replicate by replicate. One
    value has no interval: low and high are the value itself, and `replicates` says 1.
    """
    if not values:
        raise ValueError("an interval needs at least one value")
    centre = statistics.fmean(values)
    if len(values) == 1:
        return Interval(centre, centre, centre, 1)
    df = len(values) - 1
    quantile = t975(df) if confidence == 0.95 else t_quantile(1.0 - (1.0 - confidence) / 2, df)
    half = quantile * math.sqrt(_variance(values)) / math.sqrt(len(values))
    return Interval(centre, centre - half, centre + half, len(values))


def paired_interval(ratios: Sequence[float]) -> Interval:
    """The interval of paired ratios, each from one replicate: `replicate_interval` of their logarithms."""
    return replicate_interval([math.log(r) for r in ratios])


@dataclass(frozen=True)
class Components:
    """The two variance components of paired log-ratios: a single window's, and a replicate's beyond its windows."""

    window: float
    """Variance of one window's paired log-ratio around its replicate's mean."""
    replicate: float
    """Variance between replicates' means beyond what their windows explain (0 when none shows)."""
    windows: float
    """Windows per replicate, on average, where they were estimated."""
    replicates: int

    @property
    def least_replicate_sd(self) -> float:
        """The least standard deviation a replicate's mean log-ratio can have: a window's, over its windows."""
        return math.sqrt(self.window / self.windows) if self.windows > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_sd": round(math.sqrt(self.window), 4),
            "replicate_sd": round(math.sqrt(self.replicate), 4),
            "windows_per_replicate": round(self.windows, 1),
            "replicates": self.replicates,
        }


def components(per_replicate: Sequence[Sequence[float]]) -> Components | None:
    """Variance components from each replicate's per-window paired log-ratios; None with too little data."""
    groups = [list(g) for g in per_replicate if len(g) >= 2]
    if not groups:
        return None
    window = statistics.fmean([_variance(g) for g in groups])
    size = statistics.fmean([len(g) for g in groups])
    if len(groups) < 2:
        return Components(window=window, replicate=0.0, windows=size, replicates=1)
    means = [statistics.fmean(g) for g in groups]
    replicate = max(_variance(means) - window / size, 0.0)
    return Components(window=window, replicate=replicate, windows=size, replicates=len(groups))


def windows_per_replicate(
    parts: Components, *, window_seconds: float, replicate_seconds: float, least: int, most: int
) -> int:
    """How many paired windows a replicate should hold to narrow the interval fastest for the time spent.

    With R replicates of n windows, the variance of the mean is replicate/R + window/(R n),
    and the cost R (c_replicate + n c_window); minimising one for the other gives
    n = sqrt(c_replicate / c_window * window / replicate) (Kalibera and Jones).

    The variance between replicates is estimated from few of them, and often comes out 0; it
    is never taken below `REPLICATE_SD_FLOOR` squared, the least seen between
    processes, or the rule would put every window into ever longer replicates.
    """
    replicate = max(parts.replicate, REPLICATE_SD_FLOOR**2)
    best = math.sqrt(replicate_seconds / max(window_seconds, 1e-9) * parts.window / replicate)
    return max(least, min(most, math.ceil(best)))
