"""How often the measurement engine decides wrongly, and how often it finds a real gain: a simulation of the engine itself.

    python -m examples.decision_error --json outputs/benchmarks/decision-error.json

Every campaign here runs autotune's own engine (`autotune.measure.measure`): the campaign,
its looks and stop rule, racing, window sizing, the seconds budget, the export choice
(`choose`) and the effort presets' budgets. Only the runs are stand-ins (`StandIns`, a
`Lab`): each replicate draws every subject's windows from a known distribution, so the true
ratio of every candidate to plain compile is known, and so is every error.

A replicate's paired log-ratio of two subjects has standard deviation `spread` at the
campaign's first window count: half of its variance is the subjects' own process-to-process
variation, half the windows' (which more windows per replicate narrow, as on a real machine).
A replicate costs what one of the toy's three subjects cost on the 2-core machine this was built
on, workers forked from a pre-imported server: 5 s to start each subject, then its windows.

The cases: true ratios 0.98, 0.99, 1.00, 1.05 and 1.10; spreads 0.005 to 0.06; the designs
`quick`, `default` and `thorough` (a search's confirmation of its best `confirm` trials) and
`validate` (one configuration, its precision stop and seconds budget). Where the true ratio is
1.00 or less, every candidate has it: the worst case for a false gain, since the leader is the
best of them all. Where it is above 1, one candidate has it and the others run as fast as plain
compile. Eager runs at 0.8x plain compile.

`--objective time-to` judges the same designs by `time-to:N` instead, as a search with that
objective does: every configuration compiles again, cold, before each replicate, and a true
ratio is then one of compile time plus N steps (`TIME_TO_STEPS`). Plain compile compiles in
`COMPILE_SECONDS`, each candidate `COMPILE_FACTOR` times as long, and each cold compile scatters
by `COMPILE_SD`; a candidate's throughput is what gives it its true ratio (`throughput_for`).

`--objective pareto` confirms as a search with `--objective throughput,compile-time` does: cold
compiles before each replicate, no racing and no stop on speed (decided, or for want of a gain), the fixed floor under
the spread, and the export picked
from the Pareto front by the default rule (`fastest:2x`). Every candidate compiles as long as
plain compile, so none truly dominates it on compile time: a candidate exported where the true
ratio is 1.00 or less is a false gain, whether by speed or by a compile time wrongly decided
shorter. Only the search designs run it (`validate` has no front).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.measure import (
    BASELINES,
    CampaignRules,
    Harness,
    Objectives,
    Subject,
    Throughput,
    TimeTo,
    choose,
    confirmation_rules,
    measure,
    outcome,
)
from autotune.measure.choice import DEFAULT_PICK, choose_point, decide, parse_pick
from autotune.measure.engine import Replicate, ReplicatePlan, validation_rules
from autotune.measure.stats import FLOOR_RULES, FUTILITY_CHANCE, FUTILITY_RULE, _statistics
from autotune.runtime.config import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._effort import EFFORTS
from autotune.trial.request import RunProtocol, TrialRequest, TrialRun
from autotune.trial.run_record import RunRecord

RATIOS = (0.98, 0.99, 1.00, 1.05, 1.10)
SPREADS = (0.005, 0.01, 0.02, 0.04, 0.05, 0.06)
"""Standard deviations of a replicate's paired log-ratio: 0.005 is the stand-ins' on a quiet machine,
0.015 to 0.076 were seen between real processes here before the steady allocator (outputs/benchmarks/noise.md), and the
demo's own confirmation replicates scatter by about 0.047."""
NOISES = ("machine", "plain")
"""`plain`: each subject's process level and its windows Gaussian and independent, every subject alike. `machine`: the
noise a shared machine has (see `StandIns`)."""
JUMP = 0.1
"""`machine` noise: the chance that a subject's process lands on its other level (390 against 600 samples/s in
noise.md); the jump carries half of the process's variance."""
SPREAD_FACTORS = {"compile": 1.0, "eager": 1.0, "trial 0": 1.3, "trial 1": 0.6, "config": 1.3}
"""`machine` noise: each subject's own process spread, against the others' (1.0 for any not named)."""
FAILURES = 0.01
"""`machine` noise: the chance that one run of a replicate fails (a timeout on a loaded machine)."""
BUSY = 0.03
"""`machine` noise: the chance that a neighbour takes the machine during a replicate: every subject then runs at its
own fraction of its speed (a log-level drop of mean 0.5 and sd 0.25, each subject's its own), and its runs say the
machine was busy, as a real run's CPU accounting does (`RunRecord.noisy`)."""
DESIGNS = ("quick", "default", "thorough", "validate")
OBJECTIVES = ("throughput", "time-to", "pareto")
PARETO = "throughput,compile-time"
"""The objectives of a `pareto` campaign, picked from by the search's default rule (`DEFAULT_PICK`)."""
TIME_TO_STEPS = 30_000
"""`time-to:N`'s N: plain compile runs them in 300 s at its 100 batches/s, after a compile of 30 s; eager, at 0.8x,
in 375 s, so plain compile is 1.14 times as fast as eager over the job and compile time is a tenth of it."""
COMPILE_SECONDS = 30.0
"""Plain compile's true cold compile (the toy's on a fast day of the 2-core machine: 25 to 30 s)."""
COMPILE_FACTOR = 1.5
"""A `time-to` candidate compiles 1.5 times as long as plain compile, and makes up for it in its steps, or not."""
COMPILE_SD = 0.07
"""Each cold compile's own scatter (log scale): before a validation's three replicates, plain compile compiled in
64.1 to 66.8 s and the configuration in 60.7 to 74.0 s (outputs/benchmarks/archive/validate-cold-compiles-2026-11-27.log)."""


def throughput_for(time_to_ratio: float) -> float:
    """The throughput, against plain compile, at which a candidate that compiles `COMPILE_FACTOR` times as long runs
    `TIME_TO_STEPS` steps `time_to_ratio` times as fast as plain compile, its compile included."""
    steps = TIME_TO_STEPS / 100.0  # plain compile's seconds of steps
    return steps / ((COMPILE_SECONDS + steps) / time_to_ratio - COMPILE_FACTOR * COMPILE_SECONDS)


START_SECONDS = 5.0
"""What starting one subject of a replicate costs: a forked process, a warm compile, a settle window (the toy's three
took 12.7 to 15.2 s in all: outputs/benchmarks/noise.md, *Forked workers*)."""
EAGER = 0.8
"""Eager's speed against plain compile."""
CANDIDATES = (
    CompileConfig(mode="max-autotune-no-cudagraphs"),
    CompileConfig(dynamic=True),
    CompileConfig(knobs={"fullgraph": True}),
    CompileConfig(mode="max-autotune-no-cudagraphs", dynamic=True),
    CompileConfig(mode="max-autotune-no-cudagraphs", knobs={"fullgraph": True}),
    CompileConfig(dynamic=False),
)
"""Configurations the stand-ins stand for: distinct sources, so each subject is its own."""


class StandInRun(TrialRun):
    """A run whose figures were drawn, not measured: `record` returns them as they are."""

    def __init__(self, figures: RunRecord) -> None:
        super().__init__(state="complete")
        self.figures = figures

    def record(self) -> RunRecord:
        return self.figures


@dataclass
class StandIns:
    """A `Lab` whose subjects run at known speeds, with process-to-process and window-to-window noise.

    With `noise="machine"`, what a shared machine adds, none of which moves a subject's true ratio:
    a drift common to every subject of a replicate and a trend over its windows (pairing must
    cancel both), a trend over the campaign, processes that jump between two levels, heavy tails
    (Student t, 3 degrees of freedom), a spread of its own for each subject (`SPREAD_FACTORS`),
    runs that fail at the rate `FAILURES`, and replicates spoiled by a busy neighbour (`BUSY`).
    """

    truth: Mapping[str | None, float]
    """Each subject's speed against plain compile, by its generated source (None: eager)."""
    spread: float
    first_windows: int
    rng: random.Random
    now: float = 0.0
    noise: str = "plain"
    names: Mapping[str | None, str] = dataclasses.field(default_factory=dict)
    """Each subject's name, by its generated source: its own spread under `machine` noise."""
    replicates: int = 0
    compile_seconds: Mapping[str | None, float] = dataclasses.field(default_factory=dict)
    """Each configuration's true cold compile, by its generated source (30 s for any not named)."""
    compile_sd: float = 0.0
    """Each cold compile's own scatter (log scale), drawn like a window's; 0: every compile takes its true time."""

    def clock(self) -> float:
        return self.now

    def _draw(self, sd: float) -> float:
        """Noise of standard deviation `sd`: Gaussian, or Student t with 3 degrees of freedom under `machine` noise."""
        if self.noise != "machine":
            return self.rng.gauss(0.0, sd)
        t3 = self.rng.gauss(0.0, 1.0) / math.sqrt(sum(self.rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3)
        return sd * t3 / math.sqrt(3)  # t with 3 degrees of freedom has variance 3

    def _process(self, sd: float) -> float:
        """A process's own level, of standard deviation `sd`: under `machine` noise, half of its variance a jump to a
        second level taken with probability `JUMP` (centred, so the mean level stays the subject's)."""
        if self.noise != "machine":
            return self.rng.gauss(0.0, sd)
        jump = sd * math.sqrt(0.5 / (JUMP * (1 - JUMP)))
        landed = 1.0 if self.rng.random() < JUMP else 0.0
        return -jump * (landed - JUMP) + self._draw(sd * math.sqrt(0.5))

    def first(self, request: TrialRequest) -> TrialRun:
        rate = 100.0 * self.truth[request.source]
        seconds = 0.0 if request.source is None else self.compile_seconds.get(request.source, COMPILE_SECONDS)
        if self.compile_sd and seconds:
            seconds *= math.exp(self._draw(self.compile_sd))
        return StandInRun(
            RunRecord(state="complete", samples_per_second=rate, batches_per_second=rate, compile_seconds=seconds)
        )

    def replicate(
        self, requests: Mapping[str, TrialRequest], plan: ReplicatePlan, rng: random.Random
    ) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
        process = self.spread / 2  # each subject's own: the pair's log-ratio varies by spread / sqrt(2) from it
        window = self.spread * math.sqrt(self.first_windows) / 2  # the mean of first_windows windows: the other half
        machine = self.noise == "machine"
        common = self.rng.gauss(0.0, 0.05) - 0.01 * self.replicates if machine else 0.0  # the day, and a trend
        slope = self.rng.gauss(0.0, 0.01) if machine else 0.0  # within the replicate, window by window
        busy = machine and self.rng.random() < BUSY
        self.replicates += 1
        runs: dict[str, TrialRun] = {}
        for name, request in requests.items():
            if machine and self.rng.random() < FAILURES:
                runs[name] = StandInRun(RunRecord(state="failed", reason="timeout", message="a stand-in's timeout"))
                continue
            own = process * (SPREAD_FACTORS.get(self.names.get(request.source, ""), 1.0) if machine else 1.0)
            level = math.log(100.0 * self.truth[request.source]) + common + self._process(own)
            if busy:
                level -= max(self.rng.gauss(0.5, 0.25), 0.0)
            logs = [level + slope * w + self._draw(window) for w in range(plan.windows)]
            rate = math.exp(statistics.fmean(logs))
            windows = [math.exp(v) for v in logs]
            noisy = "a stand-in's neighbour took the machine" if busy else ""
            runs[name] = StandInRun(
                RunRecord(
                    state="complete", samples_per_second=rate, batches_per_second=rate, windows=windows, noisy=noisy
                )
            )
        ready = START_SECONDS * len(requests)
        seconds = ready + plan.windows * len(requests) * plan.window_seconds
        self.now += seconds
        replicate = Replicate(
            design=plan.design, windows=plan.windows, batches_per_window=4, ready_seconds=ready, seconds=seconds
        )
        return replicate, runs, {}


@dataclass(frozen=True)
class Case:
    design: str
    spread: float
    true_ratio: float
    noise: str = "plain"
    objective: str = "throughput"
    """'throughput', or 'time-to': the true ratio is then of `TIME_TO_STEPS` steps and the compile before them."""

    @property
    def candidates(self) -> int:
        return 1 if self.design == "validate" else EFFORTS[self.design].confirm


def rules_of(
    design: str,
    protocol: RunProtocol,
    *,
    futility_rule: str = FUTILITY_RULE,
    futility_chance: float = FUTILITY_CHANCE,
    floor_rule: str = "measured",
) -> CampaignRules:
    """The rules the real command gives this design, stopping for want of a gain by `futility_rule` (where its rules
    stop so), its intervals' spread floored by `floor_rule` (`FLOOR_RULES`)."""
    if design == "validate":
        rules = validation_rules(protocol)
    else:
        effort = EFFORTS[design]
        rules = confirmation_rules(protocol, min_replicates=effort.replicates, max_replicates=effort.max_replicates)
    return dataclasses.replace(
        rules, futility_rule=futility_rule, futility_chance=futility_chance, floor_rule=floor_rule
    )


def run_case(
    case: Case,
    campaigns: int,
    seed: int,
    *,
    futility_rule: str = FUTILITY_RULE,
    futility_chance: float = FUTILITY_CHANCE,
    floor_rule: str = "measured",
) -> dict[str, Any]:
    """One row: `campaigns` campaigns of the real engine on stand-ins, stopping for want of a gain by `futility_rule`
    and `futility_chance` and flooring the spread by `floor_rule` (`CampaignRules`)."""
    harness = Harness(spec="stand-in", summary=WorkloadSummary(spec="stand-in", task="train"))
    protocol = harness.protocol
    rules = rules_of(
        case.design, protocol, futility_rule=futility_rule, futility_chance=futility_chance, floor_rule=floor_rule
    )
    time_to, pareto = case.objective == "time-to", case.objective == "pareto"
    objective = TimeTo(TIME_TO_STEPS) if time_to else Throughput()
    if time_to:
        # As a search whose objective counts compile time confirms (and `validate --cold-compiles`).
        rules = dataclasses.replace(rules, cold_compiles=True)
    if pareto:
        # As a search with a front confirms: every subject's figures, to the last replicate (`_confirm`).
        rules = dataclasses.replace(
            rules, cold_compiles=True, stop_decided=False, futility=False, race=False, floor_rule="fixed"
        )
    names = ["config"] if case.design == "validate" else [f"trial {i}" for i in range(case.candidates)]
    subjects = [*Subject.baselines()] + [
        Subject(name=name, config=CANDIDATES[i], created="stand-in") for i, name in enumerate(names)
    ]
    # The baselines' failures must be reproduced to count, as in a search's confirmation and a validation.
    subjects = [dataclasses.replace(s, created="stand-in") for s in subjects]
    speeds = {"eager": EAGER, "compile": 1.0}
    for index, name in enumerate(names):
        speeds[name] = case.true_ratio if case.true_ratio <= 1.0 or index == 0 else 1.0
    sources = {s.name: None if s.config is None else harness.source(s.config, s.created) for s in subjects}
    # Under time-to, `speeds` are the true time-to ratios (what an interval must cover); the stand-ins run at the
    # throughput that, after a compile COMPILE_FACTOR times as long, gives them.
    rates = {n: throughput_for(v) if time_to and n in names else v for n, v in speeds.items()}
    truth = {sources[s.name]: rates[s.name] for s in subjects}
    named = {source: name for name, source in sources.items()}
    compiles = {sources[n]: COMPILE_FACTOR * COMPILE_SECONDS for n in names} if time_to else {}
    timed = time_to or pareto  # each cold compile scatters (under pareto every one has plain compile's true time)
    rng = random.Random(f"{seed}:{case}")
    claimed = exported = covered = intervals = 0
    replicates: list[int] = []
    seconds: list[float] = []
    folders = Path(tempfile.mkdtemp(prefix="autotune-decision-error-"))  # stand-ins fill no cache: one for all
    for number in range(campaigns):
        lab = StandIns(
            truth=truth, spread=case.spread, first_windows=rules.windows, rng=rng, noise=case.noise, names=named,
            compile_seconds=compiles, compile_sd=COMPILE_SD if timed else 0.0,
        )  # fmt: skip
        campaign = measure(
            harness, subjects, objective=objective, rules=rules, lab=lab, seed=number, cache_root=folders
        )
        if pareto:
            choice, _ = choose_point(campaign, Objectives.parse(PARETO), parse_pick(DEFAULT_PICK))
        else:
            choice = choose(campaign)
        judged = "config" if case.design == "validate" else campaign.leader("compile")
        versus = campaign.ratio(judged, "compile") if judged else None
        said = choice.decision if case.design != "validate" else outcome(versus)
        claimed += said == "gain"
        exported += choice.subject not in BASELINES
        if versus is not None and versus.replicates >= 2:  # one replicate is a point, not an interval
            intervals += 1
            covered += versus.low <= speeds[judged or ""] <= versus.high
        replicates.append(campaign.replicate_count)
        seconds.append(sum(r.seconds for r in campaign.replicates))
    shutil.rmtree(folders, ignore_errors=True)
    return {
        "noise": case.noise,
        **({"objective": case.objective} if timed else {}),
        **({"floor_rule": rules.floor_rule} if rules.floor_rule != "measured" else {}),
        "design": case.design,
        "candidates": case.candidates,
        "spread": case.spread,
        "true_ratio": case.true_ratio,
        "campaigns": campaigns,
        "claimed_gain": claimed / campaigns,
        "exported": exported / campaigns,
        "covered": covered / intervals if intervals else 1.0,
        "exported_count": exported,
        "mean_replicates": statistics.fmean(replicates),
        "mean_seconds": statistics.fmean(seconds),
    }


RETUNE_SPREADS = (0.02, 0.05)
"""The spreads a retune is simulated at: a quiet machine's, and about the demo's."""
DAY_SDS = (0.0, 0.02)
"""A day-to-day component: each subject's true speed moves by this much (log scale) between the tuning day and the
retune's, independently, beyond anything a day's own intervals hold."""


@dataclass(frozen=True)
class RetuneCase:
    """A nightly retune of an incumbent tuned at 1.15x plain compile (eager at 0.8x), on a later day."""

    scenario: str
    """'unchanged', 'eager faster' (eager 12% faster after an upgrade, nothing else), 'regressed' (the incumbent 15%
    slower against plain compile) or 'better challenger' (a challenger 8% faster than the incumbent)."""
    spread: float
    day_sd: float
    noise: str = "plain"


RETUNE_SCENARIOS = ("unchanged", "eager faster", "regressed", "better challenger")
MIN_GAIN = 0.03
"""`autotune retune --min-gain`'s default."""
MAX_REGRESSION = 0.10
"""`autotune retune --max-regression`'s default."""
TUNED = 1.15
"""The incumbent's speed against plain compile on the day it was tuned."""


def run_retune_case(
    case: RetuneCase,
    campaigns: int,
    seed: int,
    *,
    futility_rule: str = FUTILITY_RULE,
    futility_chance: float = FUTILITY_CHANCE,
    floor_rule: str = "measured",
) -> dict[str, Any]:
    """One row: `campaigns` pairs of days, each the real engine on stand-ins and the real retune rule (`decide`).

    The tuning day is a confirmation of the incumbent against both baselines (`--effort default`'s budget, stopping
    for want of a gain by `futility_rule` and `futility_chance`); its intervals are what best.yaml records. The retune's day measures eager, plain compile, the incumbent and a
    challenger in the budget `autotune retune` gives them (3 to 6 replicates), and `decide` says regression,
    improved or unchanged."""
    harness = Harness(spec="stand-in", summary=WorkloadSummary(spec="stand-in", task="train"))
    incumbent = Subject(name="incumbent", config=CANDIDATES[0], created="stand-in", reproduce=True)
    challenger = Subject(name="challenger", config=CANDIDATES[1], created="stand-in")
    subjects = [dataclasses.replace(s, created="stand-in") for s in Subject.baselines()]
    tuned = {"eager": EAGER, "compile": 1.0, "incumbent": TUNED, "challenger": TUNED}
    later = dict(tuned)
    if case.scenario == "eager faster":
        later["eager"] = EAGER * 1.12
    elif case.scenario == "regressed":
        later["incumbent"] = later["challenger"] = TUNED * 0.85
    elif case.scenario == "better challenger":
        later["challenger"] = TUNED * 1.08
    sources = {s.name: None if s.config is None else harness.source(s.config, s.created) for s in
               [*subjects, incumbent, challenger]}  # fmt: skip
    named = {source: name for name, source in sources.items()}
    effort = EFFORTS["default"]
    confirm = dataclasses.replace(
        confirmation_rules(harness.protocol, min_replicates=effort.replicates, max_replicates=effort.max_replicates),
        futility_rule=futility_rule,
        futility_chance=futility_chance,
        floor_rule=floor_rule,
    )
    retune = CampaignRules(
        min_replicates=3, max_replicates=6, reference="incumbent", windows=confirm.windows, floor_rule=floor_rule
    )
    rng = random.Random(f"{seed}:{case}")
    regression = replaced = false_regression = false_replaced = 0
    replicates: list[int] = []
    folders = Path(tempfile.mkdtemp(prefix="autotune-retune-error-"))
    for number in range(campaigns):
        day = {name: speed * math.exp(rng.gauss(0.0, case.day_sd)) for name, speed in later.items()}
        day = {name: speed / day["compile"] for name, speed in day.items()}  # speeds are against plain compile
        first = StandIns(
            truth={sources[n]: tuned[n] for n in ("eager", "compile", "incumbent")},
            spread=case.spread, first_windows=confirm.windows, rng=rng, noise=case.noise, names=named,
        )  # fmt: skip
        tuning = measure(
            harness, [*subjects, incumbent], objective=Throughput(), rules=confirm, lab=first, seed=number,
            cache_root=folders,
        )  # fmt: skip
        recorded = {name: tuning.ratio("incumbent", name) for name in ("compile", "eager")}
        second = StandIns(
            truth={sources[n]: day[n] for n in day}, spread=case.spread, first_windows=retune.windows, rng=rng,
            noise=case.noise, names=named,
        )  # fmt: skip
        today = measure(
            harness, [*subjects, incumbent, challenger], objective=Throughput(), rules=retune, lab=second,
            seed=number, cache_root=folders,
        )  # fmt: skip
        verdict = decide(today, recorded=recorded, min_gain=MIN_GAIN, max_regression=MAX_REGRESSION)
        called = verdict.decision == "regression"
        regression += called
        replaced += verdict.replaced
        # What was true that day: the incumbent fell against plain compile by more than --max-regression, or not;
        # the challenger was faster than the incumbent, or not.
        false_regression += called and day["incumbent"] / TUNED >= 1 - MAX_REGRESSION
        false_replaced += verdict.replaced and day["challenger"] <= day["incumbent"]
        replicates.append(today.replicate_count)
    shutil.rmtree(folders, ignore_errors=True)
    return {
        "noise": case.noise,
        "design": "retune",
        "scenario": case.scenario,
        "spread": case.spread,
        "day_sd": case.day_sd,
        "campaigns": campaigns,
        "regression": regression / campaigns,
        "false_regression": false_regression / campaigns,
        "replaced": replaced / campaigns,
        "false_replaced": false_replaced / campaigns,
        "mean_replicates": statistics.fmean(replicates),
    }


def retune_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The retune rows as outputs/benchmarks/decision-error.md holds them."""
    headers = ["noise", "scenario", "spread", "day-to-day", "regression called", "of which false"]
    headers += ["challenger replaced it", "of which false", "replicates"]
    return markdown(
        headers,
        [
            [r["noise"], r["scenario"], f"{r['spread']}", f"{r['day_sd']}", f"{r['regression']:.1%}"]
            + [f"{r['false_regression']:.1%}", f"{r['replaced']:.1%}", f"{r['false_replaced']:.1%}"]
            + [f"{r['mean_replicates']:.1f}"]
            for r in rows
        ],
    )


def markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table of `rows` under `headers`."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def check_retune(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The bounds a retune must meet: a regression called where the incumbent did not fall by --max-regression
    against plain compile that day, or a challenger no faster than the incumbent that day put in its place, in at
    most 2.5% of nights; a real regression of 15% and a challenger 8% faster found in 80% of nights at a spread of
    0.02 without a day-to-day component."""
    broken = []
    for r in rows:
        name = f"retune {r['noise']} {r['scenario']} spread {r['spread']} day {r['day_sd']}"
        if r["false_regression"] > FALSE_GAINS:
            broken.append(f"{name}: a false regression called in {r['false_regression']:.1%} > {FALSE_GAINS:.1%}")
        if r["false_replaced"] > FALSE_GAINS:
            broken.append(
                f"{name}: a challenger no faster replaced it in {r['false_replaced']:.1%} > {FALSE_GAINS:.1%}"
            )
        quiet = r["noise"] == "plain" and r["spread"] == 0.02 and r["day_sd"] == 0.0
        for scenario, field in (("regressed", "regression"), ("better challenger", "replaced")):
            if quiet and r["scenario"] == scenario and r[field] < 0.80:
                broken.append(f"{name}: found in {r[field]:.1%} < 80%")
    return broken


def _retune_row(job: tuple[RetuneCase, int, int, str, float, str]) -> dict[str, Any]:
    case, campaigns, seed, rule, chance, floor = job
    return run_retune_case(case, campaigns, seed, futility_rule=rule, futility_chance=chance, floor_rule=floor)


def _set_margin(margin: float, default_max_rounds: int | None = None, spread_rule: str | None = None) -> None:
    """The margin the engine's gains must clear, the `default` effort's most replicates and the rule for a pair's
    spread, in this process (each of the pool's too). The stop for want of a gain travels with each job, into the
    campaign's rules."""
    _statistics.GAIN_MARGIN = margin
    if spread_rule is not None:
        _statistics.SPREAD_RULE = spread_rule
    if default_max_rounds is not None:
        EFFORTS["default"] = dataclasses.replace(EFFORTS["default"], max_replicates=default_max_rounds)


def _row(job: tuple[Case, int, int, str, float, str]) -> dict[str, Any]:
    case, campaigns, seed, rule, chance, floor = job
    return run_case(case, campaigns, seed, futility_rule=rule, futility_chance=chance, floor_rule=floor)


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as the Markdown table outputs/benchmarks/decision-error.md holds."""
    headers = ["noise", "design", "candidates", "spread", "true ratio", "gain claimed", "exported"]
    headers += ["interval covers", "replicates", "seconds"]
    judged = any("objective" in r for r in rows)
    return markdown(
        ["objective", *headers] if judged else headers,
        [
            ([r.get("objective", "throughput")] if judged else [])
            + [r["noise"], r["design"], f"{r['candidates']}", f"{r['spread']}", f"{r['true_ratio']:.2f}"]
            + [f"{r['claimed_gain']:.1%}", f"{r['exported']:.1%}", f"{r['covered']:.1%}"]
            + [f"{r['mean_replicates']:.1f}", f"{r['mean_seconds']:.0f}"]
            for r in rows
        ],
    )


FALSE_GAINS = 0.025
"""The most campaigns, of those whose candidates are no faster than plain compile, that may claim or export a gain: the
2.5% a side the README promises."""
COVERAGE = 0.95
"""The least share of final intervals that must hold their true ratio."""
SLOWER_EXPORTS = 0.001
"""The most campaigns that may export a candidate 1 or 2% slower than plain compile."""
NULL_REPLICATES = 5.0
"""The most replicates a `default` campaign with no gain to find may take on average, at every spread."""
POWER = {(0.02, 1.05): 0.90, (0.05, 1.10): 0.80}
"""The least share of `default` campaigns that export a real gain, by (spread, true ratio), under `plain` noise, where
the spread is what it says."""
MACHINE_POWER = {(0.02, 1.05): 0.85}
"""The same under `machine` noise, whose candidate with the gain scatters 1.3 times as much, whose processes jump
between levels and whose runs time out (a replicate measured again, once a subject) or meet a busy neighbour."""


def check(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The bounds the engine must meet, and which rows break them."""
    broken = []
    for r in rows:
        name = (
            f"{r.get('objective', 'throughput')} {r['noise']} {r['design']} spread {r['spread']} true {r['true_ratio']}"
        )
        if r["true_ratio"] <= 1.0 and max(r["claimed_gain"], r["exported"]) > FALSE_GAINS:
            broken.append(f"{name}: false gain {max(r['claimed_gain'], r['exported']):.1%} > {FALSE_GAINS:.1%}")
        if r["true_ratio"] < 1.0 and r["exported"] > SLOWER_EXPORTS:
            broken.append(f"{name}: a slower candidate was exported in {r['exported']:.2%} > {SLOWER_EXPORTS:.1%}")
        if r["covered"] < COVERAGE:
            broken.append(f"{name}: the interval covered the true ratio in {r['covered']:.1%} < {COVERAGE:.0%}")
        if r["design"] != "default":
            continue
        # A front's confirmation keeps every subject's figures to its last replicate: it has no stop to bound.
        front = r.get("objective") == "pareto"
        if r["true_ratio"] <= 1.0 and not front and r["mean_replicates"] > NULL_REPLICATES:
            broken.append(f"{name}: {r['mean_replicates']:.1f} replicates with no gain to find > {NULL_REPLICATES:g}")
        need = (POWER if r["noise"] == "plain" else MACHINE_POWER).get((r["spread"], r["true_ratio"]))
        if need is not None and "objective" not in r and r["exported"] < need:
            broken.append(f"{name}: power {r['exported']:.1%} < {need:.0%}")
    return broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaigns", type=int, default=4000, help="campaigns a row (default 4000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the rows to this JSON file")
    parser.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    parser.add_argument("--spreads", nargs="+", type=float, default=list(SPREADS))
    parser.add_argument("--ratios", nargs="+", type=float, default=list(RATIOS))
    parser.add_argument("--noises", nargs="+", choices=NOISES, default=list(NOISES))
    parser.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="throughput",
        help="what the campaigns judge: throughput, or time-to:N with a cold compile of every configuration before "
        f"each replicate (N = {TIME_TO_STEPS}) (default: %(default)s)",
    )
    parser.add_argument(
        "--retune",
        action="store_true",
        help="simulate `autotune retune`'s rule instead: a tuning day and a later one, with and without a day-to-day "
        "component, at spreads of 0.02 and 0.05",
    )
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(), help="processes (default: cores)")
    parser.add_argument(
        "--margin",
        type=float,
        default=_statistics.GAIN_MARGIN,
        help="claim a gain only when the interval's lower end clears 1 + MARGIN: the trade-off of a margin against "
        "slower exports and power (default: the engine's, %(default)s)",
    )
    parser.add_argument(
        "--default-max-rounds",
        type=int,
        help="the most replicates of an `--effort default` confirmation, for the trade-off of a margin against power "
        f"(default: the engine's, {EFFORTS['default'].max_replicates})",
    )
    parser.add_argument(
        "--spread-rule",
        choices=_statistics.SPREAD_RULES,
        default=_statistics.SPREAD_RULE,
        help="how an interval takes a pair's spread between replicates: its own, floored (floor); pooled over the "
        "campaign's pairs against the same reference (pooled); or both (pooled-floor) (default: the engine's, "
        "%(default)s)",
    )
    parser.add_argument(
        "--floor-rule",
        choices=FLOOR_RULES,
        default="measured",
        help="where the floor under an interval's spread comes from: the campaign's own pairs on its device, at most "
        f"{_statistics.REPLICATE_SD_FLOOR} (measured), or that constant on every device (fixed) (default: the "
        "engine's, %(default)s)",
    )
    parser.add_argument(
        "--futility-rule",
        choices=_statistics.FUTILITY_RULES,
        default=_statistics.FUTILITY_RULE,
        help="when a campaign stops for want of a gain: every candidate's upper bound inside the band (band), or "
        "every candidate's chance of a gain at the last look, were it as fast as that bound, under "
        "--futility-chance (chance) (default: the engine's, %(default)s)",
    )
    parser.add_argument(
        "--futility-chance",
        type=float,
        default=_statistics.FUTILITY_CHANCE,
        help="the chance under which the `chance` rule stops (default: the engine's, %(default)s)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.futility_chance < 1:
        parser.error(f"--futility-chance {args.futility_chance}: must lie in (0, 1), e.g. 0.1")
    if args.default_max_rounds is not None and args.default_max_rounds < EFFORTS["default"].replicates:
        parser.error(
            f"--default-max-rounds {args.default_max_rounds}: must be at least the default effort's first look, "
            f"{EFFORTS['default'].replicates}"
        )
    if args.campaigns < 1:
        parser.error(f"--campaigns {args.campaigns}: must be >= 1")
    if not 0 <= args.margin < 0.5:
        parser.error(f"--margin {args.margin}: must lie in [0, 0.5), e.g. 0.005 for half a percent")
    _set_margin(*_settings(args))
    futility = (args.futility_rule, args.futility_chance, args.floor_rule)
    started = time.monotonic()
    if args.retune:
        retunes = [
            RetuneCase(scenario, spread, day, noise)
            for noise in args.noises
            for spread in RETUNE_SPREADS
            for day in DAY_SDS
            for scenario in RETUNE_SCENARIOS
        ]
        rows = _map(_retune_row, [(case, args.campaigns, args.seed, *futility) for case in retunes], args)
        print(retune_table(rows))
    else:
        cases = [
            Case(d, s, r, n, args.objective)
            for n in args.noises
            for d in args.designs
            for s in args.spreads
            for r in args.ratios
            if not (args.objective == "pareto" and d == "validate")
        ]
        rows = _map(_row, [(case, args.campaigns, args.seed, *futility) for case in cases], args)
        print(table(rows))
    print(f"\n{len(rows)} rows of {args.campaigns} campaigns in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    broken = check_retune(rows) if args.retune else check(rows)
    for line in broken:
        print(f"bound broken: {line}", file=sys.stderr)
    return 1 if broken else 0


def _settings(args: argparse.Namespace) -> tuple[float, int | None, str]:
    """What `_set_margin` sets in each process, from the command line."""
    return (args.margin, args.default_max_rounds, args.spread_rule)


def _map(function: Any, jobs: list[Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each job's row, in `args.jobs` processes."""
    if args.jobs <= 1:
        return [function(job) for job in jobs]
    with multiprocessing.Pool(args.jobs, initializer=_set_margin, initargs=_settings(args)) as pool:
        return pool.map(function, jobs, chunksize=1)


if __name__ == "__main__":
    raise SystemExit(main())
