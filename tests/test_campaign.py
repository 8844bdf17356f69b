"""The measurement campaign's statistics, the export rule and the retune decision, on synthetic runs.

No worker runs here: campaigns are built from made-up figures, or measured with a stand-in
for the runner that records the order in which subjects ran.
"""

from __future__ import annotations

import math
import random

import pytest

from autotune import CompileConfig
from autotune.measure import (
    Campaign,
    Harness,
    Interval,
    Objective,
    Subject,
    choose,
    confirmation_rows,
    decide,
    metrics,
    paired_interval,
    rotation,
)
from autotune.measure import _campaign as measurement
from autotune.runtime.summary import WorkloadSummary
from autotune.trial.request import RunRecord, TrialRun

pytestmark = pytest.mark.parallel

THROUGHPUT = Objective()
REGIONAL = CompileConfig(scope="regional")


def run(samples_per_second: float | None, *, failed: str = "", probe: float = 0.004, noisy: str = "") -> RunRecord:
    if failed:
        return RunRecord(state="failed", reason=failed, message="it broke")
    return RunRecord(
        state="complete",
        samples_per_second=samples_per_second,
        batches_per_second=samples_per_second,
        compile_seconds=1.0,
        probe_seconds=[probe, probe],
        noisy=noisy,
    )


def campaign(**runs: list[float | None]) -> Campaign:
    """A campaign whose subject `name` ran at the given samples/s, one value per round (None: failed)."""
    result = Campaign(objective=THROUGHPUT)
    for name, values in runs.items():
        config = None if name == "eager" else (CompileConfig() if name == "compile" else REGIONAL)
        result.subjects[name] = Subject(name=name, config=config, trial=7 if name.startswith("trial") else None)
        result.runs[name] = [run(v) if v is not None else run(None, failed="accuracy") for v in values]
    result.orders = [rotation(list(runs), index) for index in range(max(len(v) for v in runs.values()))]
    return result


# -- rotation and intervals -----------------------------------------------------------------------


def test_every_round_rotates_the_order_so_each_subject_leads_once() -> None:
    names = ["eager", "compile", "trial 3"]
    orders = [rotation(names, index) for index in range(3)]
    assert orders == [["eager", "compile", "trial 3"], ["compile", "trial 3", "eager"], ["trial 3", "eager", "compile"]]
    assert {order[0] for order in orders} == set(names) and {order[-1] for order in orders} == set(names)


def test_the_interval_brackets_the_median_and_narrows_with_agreeing_rounds() -> None:
    spread = paired_interval([1.0, 1.3, 0.9, 1.2, 1.1])
    assert spread.median == pytest.approx(1.1) and spread.low <= spread.median <= spread.high
    tight = paired_interval([1.10, 1.11, 1.09, 1.10, 1.10])
    assert tight.high - tight.low < spread.high - spread.low
    assert tight.gain and not spread.gain, "only the agreeing rounds show a gain that excludes 1"
    assert paired_interval([1.2]) == Interval(1.2, 1.2, 1.2, 1), "one round: a number, no spread"
    assert paired_interval([1.1, 1.1]).low == pytest.approx(1.1), "identical rounds: no spread to widen"


@pytest.mark.parametrize("rounds", [3, 4, 6])
def test_the_interval_covers_the_true_ratio_95_times_in_100(rounds: int) -> None:
    # Paired ratios that scatter log-normally around a true ratio of 1.15, as runs on a noisy machine do.
    rng = random.Random(rounds)
    covered = 0
    for _ in range(2000):
        interval = paired_interval([1.15 * math.exp(rng.gauss(0, 0.08)) for _ in range(rounds)])
        covered += interval.low <= 1.15 <= interval.high
    assert 0.93 <= covered / 2000 <= 0.975
    # The smallest and largest of the ratios, what a bootstrap of the median gives with so few
    # rounds, would cover it only 1 - 2 / 2**rounds of the time (75% with 3 rounds).


def test_ratios_pair_runs_of_the_same_round() -> None:
    # The machine got twice as fast after round 1; paired ratios do not notice, a ratio of medians would.
    drifting = campaign(compile=[100, 200, 200], **{"trial 7": [110, 220, 220]})
    versus = drifting.ratio("trial 7", "compile")
    assert versus is not None and versus.median == pytest.approx(1.1) and versus.rounds == 3
    assert versus.low == pytest.approx(1.1) and versus.gain


def test_rounds_where_either_side_failed_are_left_out_of_a_ratio() -> None:
    versus = campaign(compile=[100, None, 100], **{"trial 7": [120, 120, 130]}).ratio("trial 7", "compile")
    assert versus is not None and versus.rounds == 2


def test_time_to_objectives_count_fewer_seconds_as_faster() -> None:
    seconds = Campaign(objective=Objective.parse("time-to:10"))
    for name, rate in (("compile", 10.0), ("trial 7", 20.0)):
        seconds.subjects[name] = Subject(name=name, config=REGIONAL)
        seconds.runs[name] = [run(rate), run(rate)]
    versus = seconds.ratio("trial 7", "compile")
    assert versus is not None and versus.median == pytest.approx((1 + 10 / 10) / (1 + 10 / 20))


def test_a_campaign_round_trips_through_plain_data() -> None:
    original = campaign(eager=[50, 55], compile=[100, 98], **{"trial 7": [120, None]})
    again = Campaign.from_dict(original.to_dict())
    assert again.to_dict() == original.to_dict()
    assert again.ratio("trial 7", "compile") == original.ratio("trial 7", "compile")


# -- measuring: order, adaptive rounds, noise -----------------------------------------------------


class FakeRunner:
    """Stands in for `run_trial`: answers from a table of rates and records the order of the runs."""

    def __init__(self, rates: dict[str, list[float]], noisy_once: str = "") -> None:
        self.rates = rates
        self.noisy_once = noisy_once
        self.order: list[str] = []

    def __call__(self, request, monitor=None) -> TrialRun:
        name = self.name_of(request)
        rates = self.rates[name]
        rate = rates[sum(1 for n in self.order if n == name) % len(rates)]
        self.order.append(name)
        noisy = ""
        if name == self.noisy_once:
            noisy, self.noisy_once = "a background job slowed the calibration probe", ""
        return TrialRun(
            state="complete",
            result={
                "samples_per_second": rate,
                "batches_per_second": rate,
                "compile_seconds": 0.0,
                "probe_seconds": [0.004, 0.004],
                "noisy": noisy,
            },
        )

    def name_of(self, request) -> str:
        if request.source is None:
            return "eager"
        return "compile" if "scope=whole" in request.source else "trial 7"


@pytest.fixture
def harness(toy_summary: WorkloadSummary) -> Harness:
    return Harness(spec="examples.toy:model", summary=toy_summary)


def subjects() -> list[Subject]:
    return [*Subject.baselines(), Subject(name="trial 7", config=REGIONAL, trial=7)]


def test_measure_rotates_the_order_and_stops_once_the_leader_is_decided(harness, monkeypatch) -> None:
    runner = FakeRunner({"eager": [50.0], "compile": [100.0], "trial 7": [130.0, 131.0, 129.0]})
    monkeypatch.setattr(measurement, "run_trial", runner)
    result = measurement.measure(harness, subjects(), objective=THROUGHPUT, min_rounds=3, max_rounds=6)
    assert result.rounds == 3, "a clear gain is decided after the minimum rounds"
    assert runner.order == [
        *rotation(["eager", "compile", "trial 7"], 0),
        *rotation(["eager", "compile", "trial 7"], 1),
        *rotation(["eager", "compile", "trial 7"], 2),
    ]
    assert result.orders == [rotation(["eager", "compile", "trial 7"], i) for i in range(3)]


def test_measure_adds_rounds_while_the_interval_straddles_no_gain(harness, monkeypatch) -> None:
    runner = FakeRunner({"eager": [50.0], "compile": [100.0], "trial 7": [90.0, 112.0, 95.0, 110.0]})
    monkeypatch.setattr(measurement, "run_trial", runner)
    result = measurement.measure(harness, subjects(), objective=THROUGHPUT, min_rounds=3, max_rounds=5)
    assert result.rounds == 5, "undecided: rounds were added up to the budget"


def test_a_noisy_run_is_measured_again_and_kept_for_the_record(harness, monkeypatch) -> None:
    runner = FakeRunner({"eager": [50.0], "compile": [100.0], "trial 7": [130.0]}, noisy_once="compile")
    monkeypatch.setattr(measurement, "run_trial", runner)
    result = measurement.measure(harness, subjects(), objective=THROUGHPUT, min_rounds=1, max_rounds=1)
    assert runner.order.count("compile") == 2
    assert [r["subject"] for r in result.remeasured] == ["compile"]
    assert not result.runs["compile"][0].noisy and result.noise()["remeasured"] == 1


def test_a_subject_that_is_a_baseline_is_not_run_again_and_shares_its_runs(harness, monkeypatch) -> None:
    runner = FakeRunner({"eager": [50.0, 52.0], "compile": [100.0, 90.0]})
    monkeypatch.setattr(measurement, "run_trial", runner)
    incumbent = Subject(name="incumbent", config=CompileConfig(), same_as="compile")
    result = measurement.measure(
        harness, [*Subject.baselines(), incumbent], objective=THROUGHPUT, min_rounds=2, max_rounds=2
    )
    assert runner.order == ["eager", "compile", "compile", "eager"], "two subjects run, in rotated rounds"
    assert result.orders == [["eager", "compile"], ["compile", "eager"]]
    assert result.complete_runs("incumbent") == result.complete_runs("compile")
    assert result.ratio("incumbent", "compile") == Interval(1.0, 1.0, 1.0, 2)
    assert result.ratio("incumbent", "eager") == result.ratio("compile", "eager")
    assert result.noise()["runs"] == 4, "each run counted once"
    (row,) = [r for r in confirmation_rows(result) if r["subject"] == "incumbent"]
    assert row["configuration"].endswith("(the compile runs: the same code)") and row["runs"] == 2
    again = Campaign.from_dict(result.to_dict())
    assert again.subjects["incumbent"].same_as == "compile" and again.to_dict() == result.to_dict()
    # More rounds (a retune making sure of a regression) run the baselines only, and the incumbent has them too.
    more = measurement.measure(harness, [], objective=THROUGHPUT, min_rounds=3, max_rounds=3, campaign=again)
    assert runner.order[4:] == ["eager", "compile"] and len(more.complete_runs("incumbent")) == 3


def test_a_subject_cannot_be_the_same_as_a_subject_that_is_not_measured(harness) -> None:
    stray = Subject(name="incumbent", config=CompileConfig(), same_as="trial 7")
    with pytest.raises(ValueError, match="'incumbent' is the same as 'trial 7'"):
        measurement.measure(harness, [*Subject.baselines(), stray], objective=THROUGHPUT)


def test_a_run_whose_probe_is_much_slower_than_the_campaigns_fastest_is_noisy() -> None:
    quiet = campaign(eager=[50.0], compile=[100.0])
    slow = run(120.0, probe=0.004 * 3)
    assert measurement._is_noisy(quiet, slow) and "calibration probe took 12.0 ms" in slow.noisy
    assert not measurement._is_noisy(quiet, run(120.0, probe=0.0045))


# -- what is exported -----------------------------------------------------------------------------


def test_a_trial_is_exported_only_when_its_gain_over_plain_compile_survives_the_noise() -> None:
    clear = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [120, 121, 119]}))
    assert (clear.subject, clear.trial, clear.config) == ("trial 7", 7, REGIONAL)
    assert clear.verdict.startswith("trial 7 is exported: 1.20x")
    straddling = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [104, 96, 106]}))
    assert (straddling.subject, straddling.config) == ("compile", CompileConfig())
    assert "does not exclude no gain" in straddling.verdict


def test_when_every_configuration_trails_plain_compile_plain_compile_is_exported() -> None:
    chosen = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [80, 82, 79]}))
    assert chosen.exported == "plain torch.compile" and chosen.config == CompileConfig() and chosen.trial is None
    assert chosen.verdict.startswith(
        "Plain torch.compile is exported: no configuration beat it (the best, trial 7, ran 0.80x"
    )


def test_when_eager_beats_plain_compile_nothing_is_compiled() -> None:
    chosen = choose(campaign(eager=[150, 152, 151], compile=[100, 101, 99], **{"trial 7": [90, 92, 91]}))
    assert chosen.exported == "no compilation" and chosen.config.scope == "none"
    assert chosen.verdict.startswith("No compilation is exported: eager ran 1.5")


def test_the_metrics_record_ratios_with_intervals_the_verdict_and_the_noise() -> None:
    measured = campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [120, 121, 119]})
    figures = metrics(measured, choose(measured))
    assert figures["exported"] == "trial 7" and figures["rounds"] == 3
    assert figures["vs_compile"]["low"] > 1 and figures["speedup_vs_compile"] == figures["vs_compile"]["median"]
    assert figures["verdict"].startswith("trial 7 is exported") and figures["noise"]["runs"] == 9


# -- the retune decision --------------------------------------------------------------------------


def retune_campaign(
    incumbent: list[float | None], challenger: list[float | None] | None = None, **baselines
) -> Campaign:
    runs: dict[str, list[float | None]] = {"eager": baselines.get("eager", [50.0] * len(incumbent))}
    runs["compile"] = baselines.get("compile", [100.0] * len(incumbent))
    runs["incumbent"] = incumbent
    if challenger is not None:
        runs["challenger"] = challenger
    return campaign(**runs)


def verdict(measured: Campaign, **recorded: Interval | None):
    return decide(measured, recorded=recorded, min_gain=0.03, max_regression=0.10)


def test_within_noise_the_incumbent_stays() -> None:
    result = verdict(retune_campaign([120, 121, 119], [122, 119, 123]))
    assert (result.decision, result.replaced, result.regressions) == ("unchanged", False, [])


def test_a_challenger_faster_in_every_round_replaces_the_incumbent() -> None:
    result = verdict(retune_campaign([120, 121, 119], [140, 139, 141]))
    assert (result.decision, result.replaced) == ("improved", True)
    assert result.gain == pytest.approx(140 / 120 - 1, rel=0.02)


def test_a_faster_median_with_one_losing_round_is_not_enough() -> None:
    result = verdict(retune_campaign([120, 121, 119], [140, 139, 110]))
    assert result.gain and result.gain > 0.03
    assert (result.decision, result.replaced) == ("unchanged", False)


def test_one_round_is_not_a_measurement() -> None:
    assert verdict(retune_campaign([100.0], [150.0])).replaced is False


def test_a_failing_incumbent_is_a_regression_and_a_working_challenger_replaces_it() -> None:
    result = verdict(retune_campaign([None, None], [80.0, 81.0]))
    assert result.decision == "regression" and result.replaced is True
    assert result.regressions == ["the incumbent failed (accuracy): it broke"]


def test_a_ratio_to_plain_compile_that_fell_beyond_the_recorded_interval_is_a_regression() -> None:
    tuned_at = Interval(1.30, 1.25, 1.35, 3)
    fell = verdict(retune_campaign([100, 101, 99]), compile=tuned_at)
    assert fell.decision == "regression"
    assert (
        "now runs 1.00x plain torch.compile" in fell.regressions[0]
        and "against 1.30x [1.25, 1.35]" in fell.regressions[0]
    )
    held = verdict(retune_campaign([128, 131, 126]), compile=tuned_at)
    assert held.decision == "unchanged"


def test_a_machine_that_got_slower_as_a_whole_is_no_regression() -> None:
    # Everything runs at half the speed recorded in best.yaml; the ratios have not moved.
    slower_machine = retune_campaign([60, 61, 59], eager=[25, 25, 26], compile=[50, 50, 49])
    assert (
        verdict(slower_machine, compile=Interval(1.2, 1.15, 1.25, 3), eager=Interval(2.4, 2.3, 2.5, 3)).decision
        == "unchanged"
    )


def test_a_drop_whose_interval_overlaps_the_recorded_one_is_not_called_a_regression() -> None:
    noisy = retune_campaign([100, 150, 100])
    assert verdict(noisy, compile=Interval(1.3, 1.0, 1.6, 3)).decision == "unchanged"


def test_a_configuration_confirmed_faster_than_plain_compile_but_slower_than_eager_is_not_exported() -> None:
    # Compiling costs a fixed pause per step: every compiled subject runs at ~1% of eager. The configuration
    # (plain compile's twin) edges plain compile out by 0.2% in every round, an interval wholly above 1.
    measured = campaign(
        eager=[170_000.0, 205_000.0], compile=[1389.0, 1376.0], **{"trial 7": [1392.0 * 1.0001, 1379.0 * 1.0002]}
    )
    assert measured.ratio("trial 7", "compile").low > 1.0
    choice = choose(measured)
    assert choice.subject == "eager" and choice.config.scope == "none"
    assert choice.verdict.startswith("No compilation is exported: eager ran ")
    assert "no configuration beat eager (the best, trial 7, ran 0.0" in choice.verdict
