"""The measurement's statistics (autotune.measure.stats): intervals over replicates, what an interval decides
at each boundary, and how many windows a replicate holds. Made-up figures only: no worker runs here.
"""

from __future__ import annotations

import math
import random

import pytest

from autotune.measure import CampaignRules, outcome
from autotune.measure.stats import (
    REPLICATE_SD_FLOOR,
    SPREAD_FLOOR_LEAST,
    Components,
    Interval,
    Looks,
    Pooled,
    chi2_quantile,
    components,
    measured_floor,
    pooled,
    replicate_interval,
    windows_per_replicate,
)

pytestmark = pytest.mark.parallel


# -- intervals over replicates --------------------------------------------------------------------


def test_the_interval_is_the_t_interval_of_the_replicates_log_ratios() -> None:
    logs = [math.log(r) for r in (1.10, 1.12, 1.08, 1.11)]
    interval = replicate_interval(logs, windows=48)
    centre = sum(logs) / 4
    sd = math.sqrt(sum((v - centre) ** 2 for v in logs) / 3)
    assert interval.median == pytest.approx(math.exp(centre))
    assert interval.low == pytest.approx(math.exp(centre - 3.182 * sd / 2), rel=1e-3), "t with 3 degrees of freedom"
    assert (interval.replicates, interval.windows) == (4, 48)
    assert replicate_interval([math.log(1.2)]) == Interval(
        pytest.approx(1.2), pytest.approx(1.2), pytest.approx(1.2), 1
    )


@pytest.mark.parametrize("replicates", [3, 4, 6])
def test_the_interval_covers_the_true_ratio_95_times_in_100(replicates: int) -> None:
    rng = random.Random(replicates)
    covered = 0
    for _ in range(2000):
        interval = replicate_interval([math.log(1.15) + rng.gauss(0, 0.03) for _ in range(replicates)])
        covered += interval.low <= 1.15 <= interval.high
    assert 0.93 <= covered / 2000 <= 0.975


# -- what an interval decides, at each boundary --------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [
        (1.016, 1.07, "gain"),
        # Above 1, but not by the margin of 1.5% (GAIN_MARGIN): a slower one can scatter there.
        (1.014, 1.07, "undecided"),
        (0.999, 1.05, "undecided"),
        (0.93, 0.985, "loss"),
        (0.93, 0.986, "undecided"),  # 1 / 1.015 = 0.98522
        (0.95, 1.001, "undecided"),
        (1 / 1.02, 1.02, "equivalent"),
        (0.985, 1.0201, "undecided"),
        (0.9805, 1.019, "equivalent"),  # the band's low edge is 1 / 1.02 = 0.98039
        (0.9803, 1.019, "undecided"),
        # Inside the band, an interval that excludes 1 is still equivalence: no gain or loss worth the name.
        (1.001, 1.0199, "equivalent"),
        (0.9805, 0.999, "equivalent"),
        # Out of the band, but with the estimate inside it: a difference smaller than the band, no claim. Before,
        # [1.001, 1.021] was a gain and [1.001, 1.019] not: the rule grew stricter as the measurement grew precise.
        (1.001, 1.021, "undecided"),
        (1.001, 1.0201, "undecided"),
        (0.9803, 0.999, "undecided"),
        (1.016, 1.045, "gain"),  # its estimate, 1.030, lies above the band
        (0.955, 0.984, "loss"),
    ],
)
def test_an_interval_decides_gain_loss_equivalence_or_nothing(low: float, high: float, said: str) -> None:
    # The estimate is the interval's geometric middle, as for a t-interval of log-ratios.
    assert outcome(Interval(math.sqrt(low * high), low, high, 3), within=0.02) == said


def test_one_replicate_decides_nothing() -> None:
    assert outcome(Interval(1.5, 1.4, 1.6, 1), within=0.02) == "undecided"


# -- variance components and how many windows a replicate holds ---------------------------------


def test_the_variance_components_separate_windows_from_replicates() -> None:
    rng = random.Random(1)
    per_replicate = []
    for _ in range(40):
        level = rng.gauss(0, 0.02)  # a process pair's own offset
        per_replicate.append([level + rng.gauss(0, 0.06) for _ in range(30)])
    parts = components(per_replicate)
    assert parts is not None and parts.replicates == 40
    assert math.sqrt(parts.window) == pytest.approx(0.06, rel=0.1)
    assert math.sqrt(parts.replicate) == pytest.approx(0.02, rel=0.35)


def test_more_windows_pay_when_windows_vary_more_and_replicates_cost_more() -> None:
    parts = Components(window=0.05**2, replicate=0.02**2, windows=12, replicates=3)
    best = windows_per_replicate(parts, window_seconds=1.0, replicate_seconds=10.0, least=4, most=100)
    assert best == math.ceil(math.sqrt(10.0 / 1.0 * 0.05**2 / 0.02**2))  # sqrt(c_p / c_w * window / replicate)
    cheaper = windows_per_replicate(parts, window_seconds=1.0, replicate_seconds=1.0, least=4, most=100)
    assert cheaper < best
    # Few replicates often show no variance between them; the plan assumes the least this machine
    # showed instead of putting every window into one long replicate.
    floor = math.ceil(math.sqrt(10.0 / 1.0 * 0.05**2 / REPLICATE_SD_FLOOR**2))
    for shown in (0.0, 0.01**2):
        quiet = Components(window=0.05**2, replicate=shown, windows=12, replicates=3)
        assert windows_per_replicate(quiet, window_seconds=1.0, replicate_seconds=10.0, least=4, most=40) == floor < 40
    assert windows_per_replicate(parts, window_seconds=100.0, replicate_seconds=1.0, least=4, most=40) == 4


# -- the spread borrowed across a campaign's pairs ------------------------------------------------


def test_a_borrowed_spread_adds_each_pairs_squares_about_its_own_mean() -> None:
    one, two = [0.10, 0.12, 0.14], [-0.20, -0.25, -0.21, -0.22]
    squares = sum((v - 0.12) ** 2 for v in one) + sum((v - sum(two) / 4) ** 2 for v in two)
    both = pooled([one, two, [0.3]])  # a pair of one replicate has no spread to lend
    assert both is not None and both.variance == pytest.approx(squares / (2 + 3))
    # Two pairs sharing the reference's runs carry 4 k (n - 1) / (3 + k) degrees of freedom, not k (n - 1).
    assert both.df == pytest.approx(4 * 2 * 2.5 / 5)
    alone = pooled([one])
    assert alone is not None and alone.df == 2 and alone.variance == pytest.approx(squares_of(one) / 2)
    assert pooled([[0.1]]) is None


def test_the_satterthwaite_degrees_of_freedom_of_pairs_sharing_a_reference_hold_by_simulation() -> None:
    # Three subjects alike, two pairs against the same reference: the pooled variance over 2 sigma^2 should scatter
    # as a chi-square on the degrees of freedom `pooled` gives (variance 2 / df), not on k (n - 1).
    rng = random.Random(3)
    scaled = []
    for _ in range(4000):
        reference = [rng.gauss(0, 1) for _ in range(4)]
        pairs = [[rng.gauss(0, 1) - r for r in reference] for _ in range(2)]
        scaled.append(pooled(pairs).variance / 2)
    mean = sum(scaled) / len(scaled)
    spread = sum((v - mean) ** 2 for v in scaled) / (len(scaled) - 1)
    df = pooled([[0.0, 1.0, 2.0, 3.0]] * 2).df
    assert mean == pytest.approx(1.0, abs=0.05)
    assert 2 / spread == pytest.approx(df, rel=0.15), (2 / spread, df)


def squares_of(values: list[float]) -> float:
    centre = sum(values) / len(values)
    return sum((v - centre) ** 2 for v in values)


# -- the floor under the spread, measured on the device ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("df", "expected"), [(1, 0.003932), (2, 0.102587), (3.2, 0.416168), (4, 0.710723), (10, 3.940299), (30, 18.492661)]
)
def test_the_chi_square_quantile_matches_its_tables(df: float, expected: float) -> None:
    # Tabled 5% quantiles, and a fractional df (as a pooled spread's Satterthwaite df is) checked by integrating
    # the density.
    assert chi2_quantile(0.05, df) == pytest.approx(expected, rel=1e-4)
    with pytest.raises(ValueError, match="p must lie in"):
        chi2_quantile(0.6, 3)


def test_a_measured_floor_is_the_upper_bound_of_the_pooled_spread_between_the_least_and_the_cpu_s() -> None:
    quiet = Pooled(variance=0.004**2, df=6)
    # The one-sided 95% bound: sd * sqrt(df / chi2_0.05(df)); 1.92 times the spread at 6 degrees of freedom.
    assert measured_floor(quiet) == pytest.approx(0.004 * math.sqrt(6 / 1.635383), rel=1e-4)
    assert measured_floor(Pooled(variance=0.004**2, df=2)) == REPLICATE_SD_FLOOR, "two df say little: the most"
    assert measured_floor(Pooled(variance=0.03**2, df=40)) == REPLICATE_SD_FLOOR, "never above the CPU's floor"
    assert measured_floor(Pooled(variance=0.0, df=40)) == SPREAD_FLOOR_LEAST, "never below the least"
    assert measured_floor(None) == REPLICATE_SD_FLOOR, "no pair with two replicates: the most"


def test_an_interval_takes_the_floor_it_is_given_only_at_a_campaign_s_looks() -> None:
    lucky = [0.05, 0.0501, 0.0499, 0.05]
    looks = Looks(first=2, last=4)
    wide = replicate_interval(lucky, looks=looks)
    narrow = replicate_interval(lucky, looks=looks, floor=0.004)
    assert narrow.low > wide.low and narrow.high < wide.high
    assert math.log(narrow.high / narrow.median) == pytest.approx(looks.quantile(4) * 0.004 / 2)
    assert replicate_interval(lucky, floor=0.004) == replicate_interval(lucky), "one plain look: no floor at all"


def test_the_floor_rule_is_recorded_with_the_looks_and_checked() -> None:
    looks = Looks(first=3, last=9)
    assert looks.floor_rule == "measured" and Looks.from_dict(looks.to_dict()) == looks
    recorded = {k: v for k, v in looks.to_dict().items() if k != "floor_rule"}
    assert Looks.from_dict(recorded).floor_rule == "fixed", "a campaign recorded before it was measured"
    with pytest.raises(ValueError, match="floor_rule must be one of measured, fixed"):
        Looks(floor_rule="guessed")
    with pytest.raises(ValueError, match="floor_rule: 'guessed' is not one of"):
        CampaignRules(floor_rule="guessed")
