"""What is exported, and the retune decision (autotune.measure.choice), on campaigns of made-up figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autotune import CompileConfig
from autotune.measure import Campaign, choose, metrics
from autotune.measure.choice import decide
from autotune.measure.report import confirmation_rows
from autotune.measure.stats import BAND, Interval, gain_margin
from examples import decision_error
from tests.measure.stands import REGIONAL, campaign, run

pytestmark = pytest.mark.parallel


# -- what is exported -----------------------------------------------------------------------------


def test_a_trial_is_exported_only_when_its_gain_over_plain_compile_survives_the_noise() -> None:
    clear = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [120, 121, 119]}))
    assert (clear.subject, clear.trial, clear.config, clear.decision) == ("trial 7", 7, REGIONAL, "gain")
    assert clear.verdict.startswith("trial 7 is exported: a gain, 1.20x")
    straddling = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [104, 96, 106]}))
    assert (straddling.subject, straddling.config, straddling.decision) == ("compile", CompileConfig(), "undecided")
    assert "undecided within the measurement's budget" in straddling.verdict


def test_a_configuration_equivalent_to_plain_compile_is_said_to_be() -> None:
    twin = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [100.2, 101.1, 99.3]}))
    assert twin.subject == "compile" and twin.decision == "equivalent"
    assert "is equivalent to it" in twin.verdict and "inside +/-2%" in twin.verdict


def test_a_gain_inside_the_band_of_equivalence_exports_plain_compile() -> None:
    # About 1% faster in every replicate: an interval above 1, wholly inside +/-2%.
    small = {"compile": [100, 101, 99], "trial 7": [101.0, 102.1, 99.9]}
    inside = choose(campaign(eager=[50, 52, 51], **small))
    assert (inside.subject, inside.decision) == ("compile", "equivalent"), inside.verdict
    assert "is equivalent to it" in inside.verdict
    # The same gain judged in a narrower band is a gain, and exported.
    narrow = choose(campaign(eager=[50, 52, 51], **small), within=0.005)
    assert (narrow.subject, narrow.decision) == ("trial 7", "gain"), narrow.verdict


def test_a_gain_the_measurement_is_not_sure_of_by_the_margin_exports_plain_compile() -> None:
    # 4% faster by its estimate, with its replicates scattered by 2%: the interval clears 1 and not 1.015
    # (GAIN_MARGIN). A candidate 1% slower than plain compile whose replicates scatter high looks like this, so it
    # is not exported; before the margin it was, as a gain.
    compile = [100.0, 101.0, 99.0, 100.0]
    trial = [c * 1.04 * f for c, f in zip(compile, (1.02, 0.985, 1.015, 0.98), strict=True)]
    said = choose(campaign(eager=[50, 52, 51, 50], compile=compile, **{"trial 7": trial}))
    assert (said.subject, said.decision) == ("compile", "undecided"), said.verdict
    assert "not sure of 1.5%" in said.verdict and "above 1.015" in said.verdict, said.verdict


def test_when_every_configuration_trails_plain_compile_plain_compile_is_exported() -> None:
    chosen = choose(campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [80, 82, 79]}))
    assert chosen.exported == "plain torch.compile" and chosen.config == CompileConfig() and chosen.trial is None
    assert chosen.decision == "loss"
    assert chosen.verdict.startswith(
        "Plain torch.compile is exported: no configuration beat it: the best, trial 7, is slower, 0.80x"
    )


def test_when_eager_beats_plain_compile_nothing_is_compiled() -> None:
    chosen = choose(campaign(eager=[150, 152, 151], compile=[100, 101, 99], **{"trial 7": [90, 92, 91]}))
    assert chosen.exported == "no compilation" and chosen.config.scope == "none"
    assert chosen.verdict.startswith("No compilation is exported: eager ran 1.5")


def test_one_failed_replicate_of_plain_compile_hands_eager_nothing_a_reproduced_failure_does() -> None:
    # Plain compile timed out once on a loaded machine: eager, slower in every other replicate, does not lead.
    once = campaign(eager=[90, 91, 90], compile=[100, None, 101], **{"trial 7": [99, 100, 101]})
    chosen = choose(once)
    assert chosen.exported == "plain torch.compile", chosen.verdict
    assert confirmation_rows(once)[1]["failed_replicates"].startswith("replicate 2 failed (accuracy) and its later")
    twice = campaign(eager=[90, 91, 90], compile=[100, None, None], **{"trial 7": [99, 100, 101]})
    chosen = choose(twice)
    assert chosen.exported == "no compilation"
    assert chosen.verdict.startswith(
        "No compilation is exported: plain torch.compile failed (accuracy) in replicates 2 and 3 (reproduced)"
    )


def test_a_configuration_that_failed_one_replicate_is_never_exported() -> None:
    measured = campaign(eager=[50, 51, 50], compile=[100, 101, 99], **{"trial 7": [150, None, 151]})
    chosen = choose(measured)
    assert chosen.exported == "plain torch.compile" and chosen.trial is None
    assert measured.failure_note("trial 7") == "replicate 2 failed (accuracy): it left the race, and is never exported"


def test_the_metrics_record_ratios_the_decision_the_design_and_the_noise() -> None:
    measured = campaign(eager=[50, 52, 51], compile=[100, 101, 99], **{"trial 7": [120, 121, 119]})
    figures = metrics(measured, choose(measured))
    assert figures["exported"] == "trial 7" and figures["replicates"] == 3 and figures["decision"] == "gain"
    assert figures["vs_compile"]["low"] > 1 and figures["speedup_vs_compile"] == figures["vs_compile"]["median"]
    assert figures["design"]["replicates"] == 3 and figures["design"]["co_residence"] == "together"
    assert figures["verdict"].startswith("trial 7 is exported") and figures["noise"]["runs"] == 9


def test_a_configuration_confirmed_faster_than_plain_compile_but_slower_than_eager_is_not_exported() -> None:
    measured = campaign(
        eager=[170_000.0, 205_000.0], compile=[1389.0, 1376.0], **{"trial 7": [1392.0 * 1.0001, 1379.0 * 1.0002]}
    )
    assert measured.ratio("trial 7", "compile").low > 1.0
    choice = choose(measured)
    assert choice.subject == "eager" and choice.config.scope == "none"
    assert "no configuration beat eager (the best, trial 7, ran 0.0" in choice.verdict


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


def test_a_challenger_faster_in_every_replicate_replaces_the_incumbent() -> None:
    result = verdict(retune_campaign([120, 121, 119], [140, 139, 141]))
    assert (result.decision, result.replaced) == ("improved", True)
    assert result.gain == pytest.approx(140 / 120 - 1, rel=0.02)


def test_a_faster_estimate_with_one_losing_replicate_is_not_enough() -> None:
    result = verdict(retune_campaign([120, 121, 119], [140, 139, 110]))
    assert result.gain and result.gain > 0.03
    assert (result.decision, result.replaced) == ("unchanged", False)


def test_one_replicate_is_not_a_measurement() -> None:
    assert verdict(retune_campaign([100.0], [150.0])).replaced is False


@pytest.mark.parametrize(("challenger", "replaced"), [([101, 104, 107, 104], False), ([102.5, 104, 105.5, 104], True)])
def test_a_challenger_replaces_the_incumbent_only_where_its_interval_clears_the_gain_margin(
    challenger: list[float], replaced: bool
) -> None:
    # Both estimates are 4% above the incumbent (over --min-gain's 3%); the first interval's lower end is above 1
    # but not above 1.015, the margin any gain must clear.
    measured = retune_campaign([100.0] * 4, challenger)
    versus = measured.ratio("challenger", "incumbent")
    assert versus.median > 1.03 and versus.low > 1.0
    assert (versus.low > 1 + gain_margin(BAND)) is replaced
    result = verdict(measured)
    assert (result.decision, result.replaced) == ("improved" if replaced else "unchanged", replaced)


def test_one_replicate_calls_no_regression() -> None:
    # One replicate has an interval of one point: 1.00x plain compile "lies wholly below" 1.30x [1.25, 1.35] and
    # called a regression (exit code 3, acted on by a scheduler) from a single pair of runs.
    tuned_at = Interval(1.30, 1.25, 1.35, 3)
    assert verdict(retune_campaign([100.0]), compile=tuned_at).decision == "unchanged"
    assert verdict(retune_campaign([100.0, 101.0]), compile=tuned_at).decision == "regression"


def test_a_challenger_decided_slower_than_plain_compile_replaces_nothing() -> None:
    # A challenger at 0.90x plain compile, 1.12x the incumbent at 0.80x, replaced it as "improved": every export
    # promises to be no worse than plain compile, and a retune's replacement is an export.
    result = verdict(retune_campaign([80.0, 80.5, 79.5], [90.0, 90.5, 89.5]))
    assert result.replaced is False and result.decision == "unchanged"
    failing = verdict(retune_campaign([None, None, None], [90.0, 90.5, 89.5]))
    assert failing.decision == "regression" and failing.replaced is False
    level = verdict(retune_campaign([80.0, 80.5, 79.5], [100.0, 101.0, 99.5]))
    assert level.decision == "improved" and level.replaced is True, "a challenger as fast as plain compile may"


def test_an_incumbent_decided_slower_than_plain_compile_is_warned_of_without_a_regression() -> None:
    # 0.80x plain compile today, with nothing recorded to compare (an older file, another method): no regression
    # (exit code 3 is for worse than when tuned), but the user is told that plain compile is faster.
    slower = verdict(retune_campaign([80.0, 80.5, 79.5]))
    assert slower.decision == "unchanged" and not slower.regressions
    assert len(slower.warnings) == 1 and "now runs 0.80x plain torch.compile" in slower.warnings[0]
    assert "ship plain torch.compile" in slower.warnings[0]
    assert verdict(retune_campaign([100.0, 101.0, 99.5])).warnings == (), "level with plain compile: nothing to say"
    replaced = verdict(retune_campaign([80.0, 80.5, 79.5], [100.0, 101.0, 99.5]))
    assert replaced.replaced and replaced.warnings == (), "a replacement answers it"
    regressed = verdict(retune_campaign([80.0, 80.5, 79.5]), compile=Interval(1.10, 1.05, 1.15, 3))
    assert regressed.decision == "regression" and regressed.warnings == (), "the regression says it already"


def test_an_incumbent_that_is_plain_compile_pairs_the_challenger_with_plain_compile_partners() -> None:
    # The incumbent is plain compile: it runs as the compile subject, and in the 'pairs' design the challenger's
    # partner is plain compile's run in the challenger's own group. The ratio to the incumbent must read it.
    measured = retune_campaign([100.0, 100.0], [110.0, 111.0])
    measured.subjects["incumbent"] = replace(measured.subjects["incumbent"], config=CompileConfig(), same_as="compile")
    measured.runs["incumbent"] = measured.runs["compile"]
    measured.partners["compile"] = {"challenger": [run(120.0), run(121.0)]}
    assert measured.ratio("challenger", "compile").median == pytest.approx(110.5 / 120.5, rel=0.01)
    assert measured.ratio("challenger", "incumbent").median == pytest.approx(110.5 / 120.5, rel=0.01)


def test_a_reproduced_failure_is_a_regression_and_only_a_decided_gain_over_plain_compile_replaces_it() -> None:
    result = verdict(retune_campaign([None, None], [100.0, 101.0]))
    assert result.decision == "regression"
    assert result.regressions == ["the incumbent failed (accuracy) in replicates 1 and 2 (reproduced): it broke"]
    assert result.replaced is False, "level with plain compile: it would ship a configuration that gains nothing"
    faster = verdict(retune_campaign([None, None, None], [130.0, 131.0, 130.5]))
    assert faster.decision == "regression" and faster.replaced is True
    cold = retune_campaign([120.0, 121.0], [100.0, 101.0])
    cold.cold["incumbent"] = run(None)
    assert verdict(cold).regressions == ["the incumbent failed (accuracy) in its first, cold run: it broke"]


def test_one_failed_replicate_of_the_incumbent_is_a_warning_not_a_regression() -> None:
    # One replicate timed out on a loaded nightly runner; the others ran as when it was tuned. Before, that one
    # run was a regression (exit code 3) and a challenger at 0.99x [0.90, 1.09] replaced the incumbent.
    tuned_at = Interval(1.20, 1.15, 1.25, 3)
    measured = retune_campaign([120.0, None, 121.0, 119.0], [119.0, 109.0, 120.0, 118.0])
    measured.runs["incumbent"][1] = run(None, failed="timeout")
    result = verdict(measured, compile=tuned_at)
    assert (result.decision, result.replaced, result.regressions) == ("unchanged", False, [])
    assert result.warnings == (
        "the incumbent's replicate 2 failed (timeout) and its later runs did not: not reproduced, so not counted: "
        "its figures rest on its other replicates",
    )
    last = verdict(retune_campaign([120.0, 121.0, None], [119.0, 121.0, 120.0]), compile=tuned_at)
    assert last.decision == "unchanged" and not last.replaced
    assert "replicate 3 failed (accuracy) and was not run again: not reproduced" in last.warnings[0]
    alone = verdict(retune_campaign([None], [130.0]))
    assert alone.decision == "unchanged" and "with no other run of it, nothing is claimed" in alone.warnings[0]


def test_a_ratio_to_plain_compile_that_fell_beyond_the_recorded_interval_is_a_regression() -> None:
    tuned_at = Interval(1.30, 1.25, 1.35, 3)
    fell = verdict(retune_campaign([100, 101, 99]), compile=tuned_at)
    assert fell.decision == "regression"
    assert "now runs 1.00x plain torch.compile" in fell.regressions[0]
    assert "against 1.30x [1.25, 1.35]" in fell.regressions[0]
    held = verdict(retune_campaign([128, 131, 126]), compile=tuned_at)
    assert held.decision == "unchanged"


@pytest.mark.parametrize(("now", "regressed"), [(119.5, False), (115.0, True)])
def test_a_drop_smaller_than_max_regression_is_none_even_below_the_recorded_interval(
    now: float, regressed: bool
) -> None:
    # Recorded 1.30x [1.28, 1.32]. Today's interval lies wholly below it either way; only a drop of
    # more than --max-regression (10%: below 1.17x) is a regression.
    tuned_at = Interval(1.30, 1.28, 1.32, 3)
    measured = retune_campaign([now, now * 1.002, now * 0.998])
    today = measured.ratio("incumbent", "compile")
    assert today.high < tuned_at.low
    assert (verdict(measured, compile=tuned_at).decision == "regression") is regressed


def test_a_machine_that_got_slower_as_a_whole_is_no_regression() -> None:
    slower_machine = retune_campaign([60, 61, 59], eager=[25, 25, 26], compile=[50, 50, 49])
    assert (
        verdict(slower_machine, compile=Interval(1.2, 1.15, 1.25, 3), eager=Interval(2.4, 2.3, 2.5, 3)).decision
        == "unchanged"
    )


def test_a_drop_whose_interval_overlaps_the_recorded_one_is_not_called_a_regression() -> None:
    noisy = retune_campaign([100, 150, 100])
    assert verdict(noisy, compile=Interval(1.3, 1.0, 1.6, 3)).decision == "unchanged"


def test_an_eager_that_got_faster_is_a_warning_not_the_incumbents_regression() -> None:
    # Tuned at 1.20x plain compile and 2.40x eager. After an upgrade eager runs 25% faster; the incumbent and plain
    # compile run as before. Its ratio to eager fell from 2.40x to 1.92x, beyond the recorded interval, while its
    # ratio to plain compile held: before, that was a regression (exit 3) in 6 to 14% of simulated nights.
    upgraded = retune_campaign([120, 121, 119], eager=[62.5, 62.6, 62.4], compile=[100, 100.5, 99.5])
    result = verdict(upgraded, compile=Interval(1.2, 1.15, 1.25, 3), eager=Interval(2.4, 2.3, 2.5, 3))
    assert (result.decision, result.regressions) == ("unchanged", [])
    assert len(result.warnings) == 1 and "now runs 1.92x eager" in result.warnings[0]
    assert "while against plain torch.compile it held" in result.warnings[0]
    # Where plain compile fell too, the regression says it; no warning says the ratio to it held.
    both = verdict(upgraded, compile=Interval(1.5, 1.45, 1.55, 3), eager=Interval(2.4, 2.3, 2.5, 3))
    assert both.decision == "regression" and both.warnings == (), both.warnings
    # An incumbent that is plain compile has no ratio to itself: eager judges it.
    plain = verdict(upgraded, compile=None, eager=Interval(2.4, 2.3, 2.5, 3))
    assert plain.decision == "regression" and "now runs 1.92x eager" in plain.regressions[0]


def test_the_simulated_retune_calls_no_false_regression_when_eager_got_faster() -> None:
    # The real engine and `decide` on stand-ins: a tuning day, then a night on which eager runs 12% faster and
    # nothing else moved.
    row = decision_error.run_retune_case(decision_error.RetuneCase("eager faster", 0.05, 0.0), campaigns=150, seed=2)
    assert row["false_regression"] <= 0.02 and row["false_replaced"] <= 0.02, row
