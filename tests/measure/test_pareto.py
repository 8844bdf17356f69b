"""Multi-objective studies: parsing objectives, the Pareto front of a confirmation campaign, and the pick rules.

Campaigns here are built from made-up figures (no worker runs); test_search.py runs a real
multi-objective search end to end.
"""

from __future__ import annotations

import dataclasses

import pytest

from autotune import CompileConfig
from autotune.errors import SearchError
from autotune.measure import Campaign, Objectives, Subject, Throughput, parse_pick
from autotune.measure.choice import choose_point, front, subjects_to_confirm
from autotune.measure.stats import Looks, outcome
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel

SPEED_AND_COMPILE = Objectives.parse("throughput,compile-time")


def campaign(cold: bool = True, **subjects: tuple[list[float], float, float]) -> Campaign:
    """Subject name -> (samples/s per replicate, compile seconds, peak MiB); replicates with a little spread.

    With `cold`, every configuration compiled cold again before each replicate, within 1% of its compile
    seconds (`Campaign.compiles`); without, its compile time is one cold compile.
    """
    result = Campaign(objective=Throughput())
    for name, (rates, compile_seconds, memory) in subjects.items():
        config = (
            None
            if name == "eager"
            else (CompileConfig() if name == "compile" else CompileConfig(mode="max-autotune-no-cudagraphs"))
        )
        number = int(name.split()[1]) if name.startswith("trial") else None
        result.subjects[name] = Subject(name=name, config=config, trial=number)
        result.runs[name] = [
            RunRecord(
                state="complete",
                samples_per_second=rate,
                batches_per_second=rate,
                compile_seconds=0.0 if name == "eager" else compile_seconds,
                peak_memory_mb=memory,
            )
            for rate in rates
        ]
        if cold and config is not None:
            result.compiles[name] = [compile_seconds * f / 150.0 for f in steady(150.0)][: len(rates)]
    result.orders = [list(subjects) for _ in next(iter(subjects.values()))[0]]  # one replicate per figure
    return result


def steady(value: float) -> list[float]:
    """Six rounds within 1% of `value`: tight enough that a 10% difference is confirmed."""
    return [value * f for f in (1.0, 1.004, 0.996, 1.002, 0.998, 1.001)]


def test_objective_lists_start_with_one_speed_objective() -> None:
    assert Objectives.parse("throughput").multi is False
    parsed = Objectives.parse("throughput,compile-time,peak-memory")
    assert parsed.directions == ["maximize", "minimize", "minimize"]
    assert str(Objectives.parse("time-to:50,peak-memory")) == "time-to:50,peak-memory"
    record = RunRecord(
        state="complete", samples_per_second=10.0, batches_per_second=5.0, compile_seconds=3.0, peak_memory_mb=70.0
    )
    assert parsed.values(record) == [10.0, 3.0, 70.0]
    for bad, message in (
        ("compile-time", "alone would make eager"),
        ("compile-time,throughput", "starts with one speed objective"),
        ("throughput,time-to:5", "starts with one speed objective"),
        ("throughput,compile-time,compile-time", "names an objective twice"),
        ("throughput,latency", "is not allowed"),
    ):
        with pytest.raises(SearchError, match=message):
            Objectives.parse(bad)


def test_the_front_keeps_every_trade_off_and_drops_what_is_beaten_on_both() -> None:
    measured = campaign(
        eager=(steady(100.0), 0.0, 300.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{
            "trial 1": (steady(200.0), 40.0, 330.0),  # fastest, compiles longest
            "trial 2": (steady(170.0), 12.0, 320.0),  # between plain compile and trial 1
            "trial 3": (steady(140.0), 30.0, 340.0),  # slower than plain compile and compiles longer: beaten
        },
    )
    names = [p.subject for p in front(measured, SPEED_AND_COMPILE)]
    assert names == ["trial 1", "trial 2", "compile", "eager"]  # fastest first; eager compiles in 0 s


def test_within_the_noise_of_plain_compile_a_slower_compiling_trial_is_not_exported() -> None:
    noisy = [150.0 * f for f in (0.8, 1.3, 0.9, 1.25, 0.85, 1.2)]
    measured = campaign(
        eager=(steady(100.0), 0.0, 300.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{"trial 1": (noisy, 20.0, 320.0)},  # median above plain compile's, interval includes 1
    )
    # Undecided against plain compile, it cannot be told apart from it: neither dominates the other, and the
    # export reads speed by the same rule, so plain compile ships.
    assert sorted(p.subject for p in front(measured, SPEED_AND_COMPILE)) == ["compile", "eager", "trial 1"]
    assert choose_point(measured, SPEED_AND_COMPILE, parse_pick("fastest"))[0].subject == "compile"


def test_a_trial_as_fast_as_plain_compile_within_the_band_is_dominated_when_it_compiles_longer() -> None:
    measured = campaign(
        eager=(steady(100.0), 0.0, 300.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{"trial 1": (steady(150.5), 20.0, 320.0)},  # equivalent within +/-2%, compiles twice as long
    )
    assert [p.subject for p in front(measured, SPEED_AND_COMPILE)] == ["compile", "eager"]


def test_one_cold_compile_each_decides_nothing_on_the_front() -> None:
    # A trial decided faster than plain compile that once compiled half a second sooner pushed plain compile off
    # the front: one cold compile each cannot tell 10.0 s from 10.5 s. Now it decides nothing; compiled cold
    # before every replicate, the same half second is decided, and then it does push plain compile off.
    noisy = [150.0 * f for f in (0.8, 1.25, 0.85, 1.2, 0.82, 1.15)]  # below plain compile's median, undecided
    subjects = {
        "eager": (steady(100.0), 0.0, 320.0),
        "compile": (steady(150.0), 10.5, 320.0),
        "trial 1": (noisy, 9.5, 320.0),
        "trial 2": (steady(200.0), 10.0, 320.0),
    }
    once = campaign(cold=False, **subjects)
    assert once.compile_ratio("trial 2", "compile") is None, "one cold compile each: no interval"
    assert sorted(p.subject for p in front(once, SPEED_AND_COMPILE)) == ["compile", "eager", "trial 1", "trial 2"]
    repeated = campaign(**subjects)
    versus = repeated.compile_ratio("trial 2", "compile")
    assert versus is not None and versus.replicates == 6 and versus.low > 1.02, "decided sooner, beyond the band"
    # trial 1 compiles sooner than trial 2, decided, and runs slower by its median: both stay. Against plain
    # compile its speed is undecided: neither dominates the other.
    assert sorted(p.subject for p in front(repeated, SPEED_AND_COMPILE)) == ["eager", "trial 1", "trial 2"]


def test_when_plain_compile_is_dominated_only_what_dominates_it_ships_not_an_undecided_point() -> None:
    # trial 1 runs as fast as plain compile (within the band) and compiles sooner, decided: it pushes plain compile
    # off the front. trial 2 is faster by its median only (undecided against plain compile) and its compile time,
    # one cold compile to the next, is undecided too: nothing dominates it, so it stays on the front, first. It has
    # proven nothing, and the export must not ship it for being the fastest point left.
    noisy = [150.0 * f for f in (0.95, 1.3, 0.98, 1.25, 1.05, 1.22)]
    measured = campaign(
        eager=(steady(100.0), 0.0, 320.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{"trial 1": (steady(150.5), 8.0, 320.0), "trial 2": (noisy, 10.0, 320.0)},
    )
    measured.compiles["trial 2"] = [10.0 * f for f in (0.7, 1.3, 0.8, 1.25, 0.75, 1.2)]
    assert [p.subject for p in front(measured, SPEED_AND_COMPILE)] == ["trial 2", "trial 1", "eager"]
    chosen = choose_point(measured, SPEED_AND_COMPILE, parse_pick("fastest:2x"))[0]
    assert chosen.subject == "trial 1", chosen.verdict
    assert "dominates plain torch.compile" in chosen.verdict


def test_compile_time_is_judged_with_the_campaign_simultaneous_floored_interval() -> None:
    # Two cold compiles each that happen to agree closely (ratios 1.050 and 1.051) gave a plain 95% interval of
    # [1.044, 1.057]: "decided sooner" from two samples, at one look, for one of several comparisons. Read as
    # speed is read, over the campaign's looks and candidates with the spread floored, two samples decide nothing.
    measured = campaign(
        eager=(steady(100.0)[:2], 0.0, 320.0),
        compile=(steady(150.0)[:2], 10.0, 320.0),
        **{"trial 1": (steady(150.5)[:2], 10.0, 320.0)},
    )
    measured.compiles["compile"] = [10.5, 10.51]
    measured.compiles["trial 1"] = [10.0, 10.0]
    assert outcome(measured.compile_ratio("trial 1", "compile")) == "gain", "one look, one comparison: plain 95%"
    measured.looks = Looks(candidates=3, first=2, last=6)
    versus = measured.compile_ratio("trial 1", "compile")
    assert versus is not None and versus.replicates == 2 and versus.low < 1.0 < versus.high
    assert outcome(versus) == "undecided"


def test_peak_memory_within_the_band_is_as_good() -> None:
    # 0.1 MiB less peak memory made a trial as fast as plain compile dominate it, and ship.
    objectives = Objectives.parse("throughput,peak-memory")
    measured = campaign(
        eager=(steady(100.0), 0.0, 300.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{"trial 1": (steady(150.5), 10.0, 319.9)},
    )
    assert sorted(p.subject for p in front(measured, objectives)) == ["compile", "eager", "trial 1"]
    assert choose_point(measured, objectives, parse_pick("fastest"))[0].subject == "compile"
    measured.runs["trial 1"] = [dataclasses.replace(r, peak_memory_mb=310.0) for r in measured.runs["trial 1"]]
    assert sorted(p.subject for p in front(measured, objectives)) == ["eager", "trial 1"]
    assert choose_point(measured, objectives, parse_pick("fastest"))[0].subject == "trial 1"


def test_a_compile_bound_holds_a_point_only_when_its_interval_does() -> None:
    spread = [1.0, 1.6, 0.7, 1.5, 0.6, 1.4]  # compile seconds that vary by half from one cold compile to the next
    measured = campaign(
        eager=(steady(100.0), 0.0, 320.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{"trial 1": (steady(200.0), 18.0, 320.0)},
    )
    objectives = Objectives.parse("throughput,compile-time")
    assert choose_point(measured, objectives, parse_pick("fastest:2x"))[0].subject == "trial 1"  # 1.8x, decided
    measured.compiles["trial 1"] = [18.0 * f for f in spread]  # the same mean, 1.8x, but not decided under 2x
    versus = measured.compile_ratio("compile", "trial 1")
    assert versus is not None and versus.low < 2.0 < versus.high
    assert choose_point(measured, objectives, parse_pick("fastest:2x"))[0].subject == "compile"
    assert choose_point(measured, objectives, parse_pick("fastest:2.5x"))[0].subject == "compile"
    assert choose_point(measured, objectives, parse_pick("fastest:5x"))[0].subject == "trial 1"


def test_pick_rules_choose_among_the_front() -> None:
    measured = campaign(
        eager=(steady(100.0), 0.0, 300.0),
        compile=(steady(150.0), 10.0, 320.0),
        **{"trial 1": (steady(200.0), 40.0, 330.0), "trial 2": (steady(170.0), 12.0, 310.0)},
    )
    objectives = Objectives.parse("throughput,compile-time,peak-memory")

    def picked(rule: str) -> str:
        return choose_point(measured, objectives, parse_pick(rule))[0].subject

    assert picked("fastest") == "trial 1"
    assert picked("fastest:2x") == "trial 2"  # trial 1 compiles 4x as long as plain compile
    assert picked("fastest:45s") == "trial 1"
    assert picked("fastest:1x") == "compile"
    assert picked("least-compile") == "eager"
    assert picked("least-memory") == "eager"
    assert picked("trial:2") == "trial 2"
    chosen = choose_point(measured, objectives, parse_pick("fastest:2x"))[0]
    assert chosen.config == CompileConfig(mode="max-autotune-no-cudagraphs") and chosen.trial == 2
    assert "compile at most 20 s" in chosen.verdict
    with pytest.raises(SearchError, match="trial 9 is not on the Pareto front; its points: trial 1, trial 2"):
        picked("trial:9")


def test_pick_rules_are_checked() -> None:
    assert str(parse_pick("fastest:1.5x")) == "fastest:1.5x"
    assert str(parse_pick("trial:12")) == "trial:12"
    for bad in ("slowest", "fastest:0x", "fastest:2", "trial:x"):
        with pytest.raises(SearchError, match="is not allowed; use fastest"):
            parse_pick(bad)


def test_confirmation_spreads_its_budget_along_a_long_front() -> None:
    front_trials = [(n, 100.0 - n) for n in range(7)]
    assert subjects_to_confirm(front_trials, 3) == [0, 3, 6]
    assert subjects_to_confirm(front_trials[:2], 3) == [0, 1]
    assert subjects_to_confirm(front_trials, 1) == [0]
