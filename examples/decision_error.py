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

The cases: true ratios 0.98, 0.99, 1.00, 1.05 and 1.10; spreads 0.005 to 0.04; the designs
`quick`, `default` and `thorough` (a search's confirmation of its best `confirm` trials) and
`validate` (one configuration, its precision stop and seconds budget). Where the true ratio is
1.00 or less, every candidate has it: the worst case for a false gain, since the leader is the
best of them all. Where it is above 1, one candidate has it and the others run as fast as plain
compile. Eager runs at 0.8x plain compile.
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
    Budget,
    Harness,
    Objective,
    Subject,
    choose,
    confirmation_budget,
    measure,
    outcome,
)
from autotune.measure.engine import Replicate, ReplicatePlan, validation_budget
from autotune.measure.stats import _statistics
from autotune.runtime.config import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search._effort import EFFORTS
from autotune.trial.request import RunProtocol, RunRecord, TrialRequest, TrialRun

RATIOS = (0.98, 0.99, 1.00, 1.05, 1.10)
SPREADS = (0.005, 0.01, 0.02, 0.04)
"""Standard deviations of a replicate's paired log-ratio: 0.005 is the stand-ins' on a quiet machine,
0.015 to 0.076 were seen between real processes here before the steady allocator (outputs/benchmarks/noise.md)."""
DESIGNS = ("quick", "default", "thorough", "validate")
START_SECONDS = 5.0
"""What starting one subject of a replicate costs: a forked process, a warm compile, a settle window (the toy's three
took 12.7 to 15.2 s in all: outputs/benchmarks/noise.md, *Forked workers*)."""
EAGER = 0.8
"""Eager's speed against plain compile."""
CANDIDATES = (
    CompileConfig(mode="max-autotune-no-cudagraphs"),
    CompileConfig(dynamic=True),
    CompileConfig(fullgraph=True),
    CompileConfig(mode="max-autotune-no-cudagraphs", dynamic=True),
    CompileConfig(mode="max-autotune-no-cudagraphs", fullgraph=True),
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
    """A `Lab` whose subjects run at known speeds, with process-to-process and window-to-window noise."""

    truth: Mapping[str | None, float]
    """Each subject's speed against plain compile, by its generated source (None: eager)."""
    spread: float
    first_blocks: int
    rng: random.Random
    now: float = 0.0

    def clock(self) -> float:
        return self.now

    def first(self, request: TrialRequest) -> TrialRun:
        rate = 100.0 * self.truth[request.source]
        return StandInRun(
            RunRecord(state="complete", samples_per_second=rate, batches_per_second=rate, compile_seconds=30.0)
        )

    def replicate(
        self, requests: Mapping[str, TrialRequest], plan: ReplicatePlan, rng: random.Random
    ) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
        process = self.spread / 2  # each subject's own: the pair's log-ratio varies by spread / sqrt(2) from it
        window = self.spread * math.sqrt(self.first_blocks) / 2  # the mean of first_blocks windows: the other half
        runs: dict[str, TrialRun] = {}
        for name, request in requests.items():
            level = math.log(100.0 * self.truth[request.source]) + self.rng.gauss(0.0, process)
            logs = [level + self.rng.gauss(0.0, window) for _ in range(plan.blocks)]
            rate = math.exp(statistics.fmean(logs))
            windows = [math.exp(v) for v in logs]
            runs[name] = StandInRun(
                RunRecord(state="complete", samples_per_second=rate, batches_per_second=rate, windows=windows)
            )
        ready = START_SECONDS * len(requests)
        seconds = ready + plan.blocks * len(requests) * plan.window_seconds
        self.now += seconds
        replicate = Replicate(
            design=plan.design, blocks=plan.blocks, batches_per_window=4, ready_seconds=ready, seconds=seconds
        )
        return replicate, runs, {}


@dataclass(frozen=True)
class Case:
    design: str
    spread: float
    true_ratio: float

    @property
    def candidates(self) -> int:
        return 1 if self.design == "validate" else EFFORTS[self.design].confirm


def budget_of(design: str, protocol: RunProtocol) -> Budget:
    """The budget the real command gives this design."""
    if design == "validate":
        return validation_budget(protocol)
    effort = EFFORTS[design]
    return confirmation_budget(protocol, min_rounds=effort.rounds, max_rounds=effort.max_rounds)


def run_case(case: Case, campaigns: int, seed: int) -> dict[str, Any]:
    """One row: `campaigns` campaigns of the real engine on stand-ins."""
    harness = Harness(spec="stand-in", summary=WorkloadSummary(spec="stand-in", task="train"))
    protocol = harness.protocol
    budget = budget_of(case.design, protocol)
    names = ["config"] if case.design == "validate" else [f"trial {i}" for i in range(case.candidates)]
    subjects = [*Subject.baselines()] + [
        Subject(name=name, config=CANDIDATES[i], created="stand-in") for i, name in enumerate(names)
    ]
    subjects = [Subject(name=s.name, config=s.config, created="stand-in") for s in subjects]
    speeds = {"eager": EAGER, "compile": 1.0}
    for index, name in enumerate(names):
        speeds[name] = case.true_ratio if case.true_ratio <= 1.0 or index == 0 else 1.0
    truth = {None if s.config is None else harness.source(s.config, s.created): speeds[s.name] for s in subjects}
    rng = random.Random(f"{seed}:{case}")
    claimed = exported = covered = 0
    replicates: list[int] = []
    seconds: list[float] = []
    folders = Path(tempfile.mkdtemp(prefix="autotune-decision-error-"))  # stand-ins fill no cache: one for all
    for number in range(campaigns):
        lab = StandIns(truth=truth, spread=case.spread, first_blocks=budget.blocks, rng=rng)
        campaign = measure(
            harness, subjects, objective=Objective(), budget=budget, lab=lab, seed=number, cache_root=folders
        )
        choice = choose(campaign)
        judged = "config" if case.design == "validate" else campaign.leader("compile")
        versus = campaign.ratio(judged, "compile") if judged else None
        said = choice.decision if case.design != "validate" else outcome(versus)
        claimed += said == "gain"
        exported += choice.subject not in BASELINES
        covered += versus is not None and versus.low <= speeds[judged or ""] <= versus.high
        replicates.append(campaign.rounds)
        seconds.append(sum(r.seconds for r in campaign.replicates))
    shutil.rmtree(folders, ignore_errors=True)
    return {
        "design": case.design,
        "candidates": case.candidates,
        "spread": case.spread,
        "true_ratio": case.true_ratio,
        "campaigns": campaigns,
        "claimed_gain": claimed / campaigns,
        "exported": exported / campaigns,
        "covered": covered / campaigns,
        "mean_replicates": statistics.fmean(replicates),
        "mean_seconds": statistics.fmean(seconds),
    }


def _set_margin(margin: float, default_max_rounds: int | None = None) -> None:
    """The margin the engine's gains must clear, and the `default` effort's most replicates, in this process (each of
    the pool's too)."""
    _statistics.GAIN_MARGIN = margin
    if default_max_rounds is not None:
        EFFORTS["default"] = dataclasses.replace(EFFORTS["default"], max_rounds=default_max_rounds)


def _row(job: tuple[Case, int, int]) -> dict[str, Any]:
    return run_case(*job)


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as the Markdown table outputs/benchmarks/decision-error.md holds."""
    lines = [
        "| design | candidates | spread | true ratio | gain claimed | exported | interval covers | replicates | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['design']} | {r['candidates']} | {r['spread']} | {r['true_ratio']:.2f} | {r['claimed_gain']:.1%} | "
            f"{r['exported']:.1%} | {r['covered']:.1%} | {r['mean_replicates']:.1f} | {r['mean_seconds']:.0f} |"
        )
    return "\n".join(lines)


def check(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The bounds the engine must meet, and which rows break them."""
    broken = []
    for r in rows:
        name = f"{r['design']} spread {r['spread']} true {r['true_ratio']}"
        if r["true_ratio"] <= 1.0 and max(r["claimed_gain"], r["exported"]) > 0.05:
            broken.append(f"{name}: false gain {max(r['claimed_gain'], r['exported']):.1%} > 5%")
        if r["true_ratio"] < 1.0 and r["exported"] > 0:
            broken.append(f"{name}: a slower candidate was exported in {r['exported']:.2%}")
        if r["covered"] < 0.94:
            broken.append(f"{name}: the interval covered the true ratio in {r['covered']:.1%} < 94%")
        if r["design"] == "default" and r["spread"] == 0.02:
            need = {1.05: 0.80, 1.10: 0.95}.get(r["true_ratio"])
            if need is not None and r["exported"] < need:
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
        f"(default: the engine's, {EFFORTS['default'].max_rounds})",
    )
    args = parser.parse_args(argv)
    if args.default_max_rounds is not None and args.default_max_rounds < EFFORTS["default"].rounds:
        parser.error(
            f"--default-max-rounds {args.default_max_rounds}: must be at least the default effort's first look, "
            f"{EFFORTS['default'].rounds}"
        )
    if args.campaigns < 1:
        parser.error(f"--campaigns {args.campaigns}: must be >= 1")
    if not 0 <= args.margin < 0.5:
        parser.error(f"--margin {args.margin}: must lie in [0, 0.5), e.g. 0.005 for half a percent")
    _set_margin(args.margin, args.default_max_rounds)
    cases = [Case(d, s, r) for d in args.designs for s in args.spreads for r in args.ratios]
    started = time.monotonic()
    jobs = [(case, args.campaigns, args.seed) for case in cases]
    if args.jobs > 1:
        with multiprocessing.Pool(
            args.jobs, initializer=_set_margin, initargs=(args.margin, args.default_max_rounds)
        ) as pool:
            rows = pool.map(_row, jobs, chunksize=1)
    else:
        rows = [_row(job) for job in jobs]
    print(table(rows))
    print(f"\n{len(rows)} rows of {args.campaigns} campaigns in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    broken = check(rows)
    for line in broken:
        print(f"bound broken: {line}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
