"""The statistics of paired ratios at two levels: windows inside a replicate, replicates inside a campaign.

A replicate is one measurement session: every subject alive in a process of its own, taking
turns window by window on the same slices of the fresh stream. Drift within the session hits
both sides of a pair alike and cancels in their ratio; what differs between sessions (each
subject gets new processes, with their own memory layout and thread placement) does not, so
the replicates are the independent units:

* each replicate gives one paired log-ratio per pair of subjects (`replicate_log_ratio`);
* the interval is the Student-t interval of those replicate values, with replicates - 1
  degrees of freedom, mapped back from logarithms (`replicate_interval`);
* the variance of single windows' paired log-ratios inside replicates, and what is left
  between replicates beyond it, are the two variance components (`components`); with the
  cost of a window and of a new process they give the windows per replicate that narrow the
  interval fastest for the time spent (`windows_per_replicate`, Kalibera and Jones).

An outcome (`outcome`) reads an interval against 1: equivalence when it lies inside the band
of +/- `within` (whether or not it excludes 1), else a gain when it lies above 1, a loss when
below, undecided otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OUTCOMES",
    "REPLICATE_SD_FLOOR",
    "Components",
    "Interval",
    "components",
    "outcome",
    "paired_interval",
    "replicate_interval",
    "t975",
    "windows_per_replicate",
]

OUTCOMES = ("gain", "loss", "equivalent", "undecided")
"""What an interval against 1 says."""
REPLICATE_SD_FLOOR = 0.015
"""The least standard deviation between replicates' paired log-ratios that windows per replicate are planned for:
the smallest seen between new pairs of identical processes on the 2-core machine this was built on
(outputs/benchmarks/noise.md: 0.015 to 0.076)."""


@dataclass(frozen=True)
class Interval:
    """A ratio between two subjects with its 95% interval, over paired replicates.

    `median` is the point estimate: the geometric mean of the replicates' paired ratios (the
    name is kept from earlier files, where it was the median of paired rounds).
    """

    median: float
    low: float
    high: float
    rounds: int
    """Replicates (independent sessions) the interval rests on."""
    windows: int = 0
    """Paired windows in all, over those replicates (0 where files did not record them)."""

    @property
    def gain(self) -> bool:
        """The whole interval is above 1: a gain that survives the noise."""
        return self.low > 1.0

    @property
    def loss(self) -> bool:
        """The whole interval is below 1."""
        return self.high < 1.0

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
            "rounds": self.rounds,
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
            int(data["rounds"]),
            int(data.get("windows") or 0),
        )


def outcome(interval: Interval | None, within: float) -> str:
    """'gain', 'loss', 'equivalent' or 'undecided' for a ratio to the reference (None: undecided).

    Equivalence comes first: an interval inside the +/- `within` band is no difference worth
    the name even where it excludes 1. A precise enough measurement of two identical
    configurations excludes 1 in one comparison in twenty, by construction; it must not be
    called a gain (or a loss) for that.
    """
    if interval is None or interval.rounds < 2:
        return "undecided"  # one replicate says nothing of the variation between processes
    if interval.equivalent(within):
        return "equivalent"
    if interval.gain:
        return "gain"
    if interval.loss:
        return "loss"
    return "undecided"


_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
"""Student's t, 97.5th percentile, by degrees of freedom (two-sided 95%)."""


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95% interval with `df` degrees of freedom."""
    if df in _T975:
        return _T975[df]
    # Beyond 10 degrees of freedom a two-term expansion around the normal quantile is within 0.2%.
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def replicate_interval(log_ratios: Sequence[float], windows: int = 0) -> Interval:
    """The geometric mean of per-replicate ratios (given as logarithms) with its 95% t-interval (df = n - 1)."""
    if not log_ratios:
        raise ValueError("an interval needs at least one replicate")
    centre = statistics.fmean(log_ratios)
    if len(log_ratios) == 1:
        value = math.exp(centre)
        return Interval(value, value, value, 1, windows)
    half = t975(len(log_ratios) - 1) * statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    return Interval(math.exp(centre), math.exp(centre - half), math.exp(centre + half), len(log_ratios), windows)


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
    window = statistics.fmean(statistics.variance(g) for g in groups)
    size = statistics.fmean(len(g) for g in groups)
    if len(groups) < 2:
        return Components(window=window, replicate=0.0, windows=size, replicates=1)
    means = [statistics.fmean(g) for g in groups]
    replicate = max(statistics.variance(means) - window / size, 0.0)
    return Components(window=window, replicate=replicate, windows=size, replicates=len(groups))


def windows_per_replicate(
    parts: Components, *, window_seconds: float, replicate_seconds: float, least: int, most: int
) -> int:
    """How many paired windows a replicate should hold to narrow the interval fastest for the time spent.

    With R replicates of n windows, the variance of the mean is replicate/R + window/(R n),
    and the cost R (c_replicate + n c_window); minimising one for the other gives
    n = sqrt(c_replicate / c_window * window / replicate) (Kalibera and Jones).

    The variance between replicates is estimated from few of them, and often comes out 0; it
    is never taken below `REPLICATE_SD_FLOOR` squared, the least this machine showed between
    processes, or the rule would put every window into ever longer replicates.
    """
    replicate = max(parts.replicate, REPLICATE_SD_FLOOR**2)
    best = math.sqrt(replicate_seconds / max(window_seconds, 1e-9) * parts.window / replicate)
    return max(least, min(most, math.ceil(best)))
