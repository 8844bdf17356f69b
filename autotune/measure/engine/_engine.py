"""The measurement engine: first runs, then replicates of paired windows until the question is decided.

`measure` is what search confirmation, `autotune validate`, `autotune retune` and the
benchmark call. It

1. runs every subject that has no first run yet alone and cold, one after another, in a
   cache folder of its own (`Campaign.cold`); a subject that fails there is not measured again;
2. chooses who lives together from the first runs' memory (`co_residence`);
3. runs replicates (`run_replicate`): new processes from the warm folders, turns window by
   window; the first `PROBE_REPLICATES` hold `CampaignRules.windows` windows each, later ones as many as
   the variance components and the costs of a window and of a replicate say
   (`windows_per_replicate`);
4. with `race`, leaves out of later replicates the subjects that no longer bear on the question
   (`retire`): a configuration decided slower than the leader or than `reference`, eager
   decided slower than `reference`. The leader and `reference` always run;
5. looks after the replicates it planned (`CampaignRules.looks`; by default, and in a search's
   confirmation, after every one from `min_rounds`), and stops
   at a look where the leading configuration's ratio to `reference` is decided (a gain, a loss,
   or equivalent within +/- `decide_within`) and, with `precision`, its interval is that narrow;
   with `futility`, also where no subject can be shown faster than `reference` any more; or when
   `max_rounds` replicates or `seconds` of measurement are spent, and says which
   (`Campaign.stopped`).

Every planned look and every configuration compared counts against the campaign's error
(`Campaign.looks`, `autotune.measure.stats.Looks`): the intervals it judges and prints are
simultaneous over them, so stopping at whichever look decided first does not make a false gain
likelier. The stop for want of a gain claims nothing and spends no error.

Where runs happen is a `Lab`: worker processes (`Processes`), or stand-ins that draw figures
from a known distribution (`examples.decision_error`), which run this very engine.
"""

from __future__ import annotations

import contextlib
import math
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from autotune.measure.engine._campaign import Campaign, Harness, Subject, start
from autotune.measure.engine._proof import CacheProof, path_name
from autotune.measure.engine._replicate import (
    Replicate,
    ReplicatePlan,
    batches_for,
    co_residence,
    expected_replicate_seconds,
    run_replicate,
)
from autotune.measure.stats import (
    BAND,
    FUTILITY_ERROR,
    Looks,
    Objective,
    claim_chance,
    futility_rule,
    outcome,
    replicate_interval,
    spaced_looks,
    upper_bound,
    windows_per_replicate,
)
from autotune.trial.request import RunProtocol, RunRecord, TrialRequest, TrialRun
from autotune.trial.runner import run_trial

__all__ = [
    "COLD_COMPILE",
    "CampaignRules",
    "Lab",
    "Processes",
    "ReplicateCallback",
    "RunCallback",
    "confirmation_rules",
    "first_windows",
    "measure",
    "plan_looks",
    "run_label",
    "run_text",
    "retire",
    "validation_rules",
]

RunCallback = Callable[[str, int, RunRecord], None]
"""Called after each run with the subject's name, the replicate (from 0; -1 for a first, cold run; `COLD_COMPILE - k`
for a cold compile before replicate k, from 0) and its record."""
COLD_COMPILE = -2
"""The replicate number a `RunCallback` hears for the cold compile before the first replicate (-3 the second's...)."""


def run_label(index: int) -> str:
    """What a `RunCallback`'s replicate number names: 'first run (cold)', 'cold compile before replicate 2',
    'replicate 3'."""
    if index <= COLD_COMPILE:
        return f"cold compile before replicate {COLD_COMPILE - index + 1}"
    return "first run (cold)" if index < 0 else f"replicate {index + 1}"


def run_text(name: str, index: int, record: RunRecord) -> str:
    """A `RunCallback`'s run in words: 'replicate 3: compile: 402 samples/s', 'cold compile before replicate 1:
    config: compiled in 64.8 s', or the state and reason of a run that did not complete."""
    if not record.complete:
        outcome = f"{record.state} ({record.reason})"
    elif index <= COLD_COMPILE:
        outcome = f"compiled in {record.compile_seconds or 0.0:.1f} s"
    else:
        outcome = f"{record.samples_per_second or 0.0:.4g} samples/s"
    return f"{run_label(index)}: {name}: {outcome}"


ReplicateCallback = Callable[[Campaign, "CampaignRules"], None]
"""Called before each replicate starts, with the campaign so far and its rules."""
PROBE_REPLICATES = 2
"""Replicates run with the initial number of windows, before the variance components say how many pay."""
MOST_WINDOWS = 40
"""Windows per replicate at most: past this, a replicate is long enough for the machine's state to change."""


@dataclass(kw_only=True)
class CampaignRules:
    """The rules a campaign measures by: how many replicates and seconds it may spend (its budget: `min_rounds`,
    `max_rounds`, `seconds`), how it sizes them, and when it stops (decided, precise, or no gain left)."""

    min_rounds: int = 3
    """Replicates before the campaign may stop."""
    max_rounds: int = 8
    """Replicates at most."""
    windows: int = 12
    """Windows per subject in each of the first replicates (`first_windows` gives it from the protocol)."""
    most_windows: int = MOST_WINDOWS
    """Windows per subject in a replicate at most, whatever the variance components say."""
    decide_within: float = BAND
    """The band around 1 inside which a ratio counts as no difference (equivalence)."""
    precision: float | None = None
    """Also measure until the leader's interval is at most this wide each way (0.03: +/-3%)."""
    seconds: float | None = None
    """Wall seconds of replicates (after the first runs) at most."""
    reference: str = "compile"
    race: bool = False
    """Leave out of later replicates the subjects that no longer bear on the question (see `retire`)."""
    looks: int | None = None
    """Looks to plan from `min_rounds` to `max_rounds`, evenly spaced (None: one after every replicate): a campaign
    decides, or stops for want of a gain, only at them."""
    last_share: float = 0.5
    """The share of each candidate's error its last look spends (`Looks.last_share`)."""
    futility: bool = False
    """Stop at a look once no subject can be shown faster than `reference` any more: every one's upper bound
    (`upper_bound`) lies inside the band. It claims nothing: the campaign exports what it would have without a gain."""
    cold_compiles: bool = False
    """Before each replicate, compile every configuration it runs again, alone and cold in an empty folder, in a new
    random order: compile time then has one measurement per replicate, paired like the throughput, and an interval
    (`Campaign.compile_ratio`, `Campaign.extra_compile`). For campaigns in which compile time decides (`time-to:N`, a
    Pareto front: `Objectives.compile_decides`) and `autotune validate --cold-compiles`. Without it, compile time is
    each subject's one first run: shown, with no interval, and deciding nothing."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(
                f"rounds: 1 <= min_rounds <= max_rounds must hold, got ({self.min_rounds=}, {self.max_rounds=})"
            )
        if self.windows < 2:
            raise ValueError(f"windows: {self.windows} must be >= 2: a replicate's variance needs two windows")
        if self.looks is not None and self.looks < 1:
            raise ValueError(f"looks: {self.looks} must be >= 1 (None: a look after every replicate)")


class Lab(Protocol):
    """Where a campaign's runs happen: a subject's first run, a replicate, and the clock the budget reads."""

    def first(self, request: TrialRequest) -> TrialRun:
        """A subject's first run: alone, cold, in its empty cache folder."""
        ...

    def replicate(
        self, requests: Mapping[str, TrialRequest], plan: ReplicatePlan, rng: random.Random
    ) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
        """One replicate as `plan` says (see `autotune.measure.engine._replicate.run_replicate`)."""
        ...

    def clock(self) -> float:
        """Seconds, monotonic: what the seconds budget is spent in."""
        ...


class Processes:
    """The lab of worker processes: each run in fresh processes, on the wall clock."""

    def first(self, request: TrialRequest) -> TrialRun:
        return run_trial(request)

    def replicate(
        self, requests: Mapping[str, TrialRequest], plan: ReplicatePlan, rng: random.Random
    ) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
        return run_replicate(
            requests,
            plan.groups,
            design=plan.design,
            windows=plan.windows,
            batches_per_window=plan.batches_per_window,
            window_seconds=plan.window_seconds,
            rng=rng,
        )

    def clock(self) -> float:
        return time.monotonic()


def first_windows(protocol: RunProtocol) -> int:
    """Windows per subject in a campaign's first replicates: a search trial's paired windows, at least 4.

    Few, since a replicate's start-up costs more than its windows, and the variation between
    replicates outweighs what more windows in each would average out: on the toy (2-core CPU),
    a start-up of 16 s against 1.5 s a block, and a replicate's own spread of 0.049 beside a
    window's 0.046, make 4 windows the best use of the time (`windows_per_replicate`), and 10
    as many cost a quarter more per replicate for a replicate 4% more precise. From the third
    replicate on, the campaign's own variance components choose.
    """
    return max(4, protocol.windows)


CONFIRMATION_LOOKS: int | None = None
"""Looks a search's confirmation plans, from its first replicate that may stop to its last (None: after every one)."""
CONFIRMATION_LAST_SHARE = 0.75
"""The share of each candidate's error a confirmation spends at its last look."""


def confirmation_rules(protocol: RunProtocol, *, min_rounds: int, max_rounds: int) -> CampaignRules:
    """How a search confirms its best trials: `min_rounds` to `max_rounds` replicates, racing, looking
    after every one (`CONFIRMATION_LOOKS`), until decided or no gain is left to find.

    Its looks and the share of the error its last look spends were chosen on the simulation of the engine
    (outputs/benchmarks/decision-error.md): half the error at the last look found a real 5% gain at a spread of
    0.02 in 87% of `--effort default` campaigns, three quarters in 91%. Three looks (after 3, 6 and 8) were
    chosen before a campaign could stop for want of a gain; with that stop every look is also a chance to end
    a campaign with nothing to find, and a look after every replicate decides a real 10% gain half a replicate
    to a replicate sooner and stops a null campaign sooner at wide spreads, with the same bounds and power."""
    return CampaignRules(
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        windows=first_windows(protocol),
        race=True,
        looks=CONFIRMATION_LOOKS,
        last_share=CONFIRMATION_LAST_SHARE,
        futility=True,
    )


VALIDATION_REPEATS = 3
VALIDATION_MAX_ROUNDS = 20
VALIDATION_PRECISION = 0.03
VALIDATION_SECONDS = 180.0


def validation_rules(
    protocol: RunProtocol,
    *,
    repeats: int = VALIDATION_REPEATS,
    max_rounds: int = VALIDATION_MAX_ROUNDS,
    precision: float | None = VALIDATION_PRECISION,
    seconds: float | None = VALIDATION_SECONDS,
) -> CampaignRules:
    """How `autotune validate` measures: from `repeats` replicates until +/-`precision` (None: until decided),
    `max_rounds` replicates, or `seconds` of replicates, racing."""
    return CampaignRules(
        windows=first_windows(protocol),
        min_rounds=repeats,
        max_rounds=max(max_rounds, repeats),
        precision=precision,
        seconds=seconds,
        race=True,
    )


def measure(
    harness: Harness,
    subjects: Sequence[Subject],
    *,
    objective: Objective,
    rules: CampaignRules | None = None,
    on_run: RunCallback | None = None,
    on_replicate: ReplicateCallback | None = None,
    campaign: Campaign | None = None,
    cache_root: str | Path | None = None,
    seed: int = 0,
    lab: Lab | None = None,
    cache_proof: CacheProof | None = None,
) -> Campaign:
    """Measure `subjects` against each other; see the module docstring.

    Given an earlier `campaign` of the same subjects, its replicates count and more are added,
    and its looks stay those it was planned with. `cache_root` holds the cache folders of
    subjects that have none (default: a temporary folder, removed at the end). With
    `cache_proof`, the first two replicates also save each configuration's compile artifacts and
    start the leader from its saved file (`CacheProof`), which the proof records.
    """
    rules = rules or CampaignRules()
    lab = lab or Processes()
    campaign = campaign if campaign is not None else start(harness, subjects, objective)
    rng = random.Random(seed + 7919 * campaign.rounds)
    with _cache_root(cache_root) as root:
        folders = {
            name: s.cache_dir or str(root / path_name(name))
            for name, s in campaign.subjects.items()
            if s.same_as is None
        }
        if cache_root is not None:
            # A campaign continued later (a retune making sure of a regression) finds its subjects' folders again.
            for name, folder in folders.items():
                campaign.subjects[name] = replace(campaign.subjects[name], cache_dir=folder)
        _first_runs(harness, campaign, folders, on_run, lab)
        held, asked = False, rules
        planning = campaign.looks is None
        if planning:
            # Planned once the first runs say what a replicate costs, before any replicate is seen.
            firsts = {name: campaign.cold.get(name) for name in campaign.racing()}
            expected = expected_replicate_seconds(firsts, rules.windows, harness.protocol.window_seconds)
            if rules.cold_compiles:
                expected += sum(r.compile_seconds or 0.0 for r in firsts.values() if r is not None)
            campaign.looks = plan_looks(campaign, asked, expected)
            held = campaign.looks.last < asked.max_rounds  # the seconds, not --max-replicates, set the last look
            rules = replace(asked, max_rounds=campaign.looks.last)
        elif campaign.looks is not None and rules.max_rounds > campaign.looks.last:
            # A campaign continued (a retune making sure of a regression) stops at the last look it planned: past it,
            # no error is left to spend.
            last = campaign.looks.last
            rules = replace(rules, min_rounds=min(rules.min_rounds, last), max_rounds=last)
        requests = _warm_requests(harness, campaign, folders)
        started = lab.clock()
        while campaign.rounds < rules.max_rounds and _measurable(campaign):
            if rules.race:
                retire(
                    campaign, rules.reference, rules.decide_within
                )  # before a replicate: only one that runs can leave anyone out
            if on_replicate:
                on_replicate(campaign, rules)
            cold = _cold_compiles(harness, campaign, root, rng, lab, on_run) if rules.cold_compiles else 0.0
            _one_replicate(harness, campaign, requests, rules, rng, on_run, lab, cold, cache_proof)
            if planning and campaign.rounds == 1 and asked.seconds is not None and campaign.replicates:
                # Planned again from what the first replicate cost, not the first runs' guess at it: no look has been
                # taken yet (one replicate decides nothing), so the error is still all to spend.
                campaign.looks = plan_looks(campaign, asked, _next_seconds(campaign, campaign.replicates[-1].windows))
                held = campaign.looks.last < asked.max_rounds
                rules = replace(rules, max_rounds=campaign.looks.last)
            ahead = _next_seconds(campaign, _windows(campaign, rules, harness))
            why = _stop(campaign, rules, lab.clock() - started, ahead)
            if why:
                campaign.stopped = why
                break
        else:
            campaign.stopped = campaign.stopped or _spent(campaign, rules, held)
    return campaign


def plan_looks(campaign: Campaign, rules: CampaignRules, replicate_seconds: float | None = None) -> Looks:
    """The looks a campaign takes and the candidates it compares, over which it spends its error.

    The candidates are the configurations measured against `rules.reference` (not eager, not
    a subject that is the reference itself); the looks, after replicates `min_rounds` to
    `max_rounds`, and no earlier than the second (one replicate decides nothing). With a
    seconds budget and a replicate's cost (a guess from the first runs,
    `expected_replicate_seconds`, then what the first replicate took, before any look), the
    last look is the last replicate the budget can hold: error planned for looks that never
    come is power lost (`autotune validate` planned 18 looks and had time for four or five),
    and looks not planned leave the budget unspent (the first runs' guess at the toy's
    replicate was over twice what one took).
    """
    candidates = [
        n
        for n, s in campaign.subjects.items()
        if s.config is not None and n != rules.reference and s.same_as != rules.reference and n != "eager"
    ]
    first = min(max(2, rules.min_rounds), rules.max_rounds)
    last = rules.max_rounds
    if rules.seconds is not None and replicate_seconds:
        last = min(last, max(first, math.floor(rules.seconds / replicate_seconds)))
    at = spaced_looks(first, last, rules.looks) if rules.looks is not None else ()
    return Looks(
        candidates=max(1, len(candidates)),
        first=at[0] if at else first,
        last=last,
        at=at,
        last_share=rules.last_share,
    )


@contextlib.contextmanager
def _cache_root(given: str | Path | None) -> Iterator[Path]:
    if given is not None:
        Path(given).mkdir(parents=True, exist_ok=True)
        yield Path(given)
        return
    folder = Path(tempfile.mkdtemp(prefix="autotune-caches-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _first_runs(
    harness: Harness, campaign: Campaign, folders: dict[str, str], on_run: RunCallback | None, lab: Lab
) -> None:
    """Each subject without a first run: alone, cold, in its empty folder; compile time, accuracy, one stream pass."""
    for name in campaign.measured():
        subject = campaign.subjects[name]
        if name in campaign.cold and (subject.config is None or has_warm_cache(folders[name])):
            continue  # its first run was made, and filled the folder its replicates start from
        request = harness.request(subject.config, created=subject.created, cache_dir=folders[name])
        run = lab.first(request)
        campaign.environment = campaign.environment or dict(run.environment)
        record = run.record()
        campaign.cold[name] = record
        if on_run:
            on_run(name, -1, record)


def _cold_compiles(
    harness: Harness, campaign: Campaign, root: Path, rng: random.Random, lab: Lab, on_run: RunCallback | None
) -> float:
    """Each configuration the next replicate runs, compiled once more alone and cold in an empty folder, in a random
    order (drift over the minutes lands on no subject in particular): its compile time for that replicate.

    The run compiles, warms up on the fixed batches and stops after one window: no accuracy check (the first run
    made it, and its time is never part of the compile time) and no fresh stream. Eager compiles nothing and is not
    run. A compile that fails leaves no figure for that replicate (None). Returns the seconds they took.
    """
    index = campaign.rounds
    names = [n for n in campaign.racing() if campaign.subjects[n].config is not None]
    rng.shuffle(names)
    started = lab.clock()
    for name in names:
        subject = campaign.subjects[name]
        folder = Path(tempfile.mkdtemp(prefix=f"cold-{path_name(name)}-", dir=root))
        try:
            request = harness.request(subject.config, created=subject.created, cache_dir=str(folder))
            protocol = {**request.protocol, "check_accuracy": False, "windows": 1, "settle_windows": 1}
            record = lab.first(replace(request, protocol={**protocol, "fresh_batches": 0})).record()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        column = campaign.compiles.setdefault(name, [])
        column.extend([None] * (index - len(column)))
        column.append(record.compile_seconds if record.complete else None)
        if on_run:
            on_run(name, COLD_COMPILE - index, record)
    return lab.clock() - started


def has_warm_cache(folder: str) -> bool:
    """Whether a subject's cache folder holds what a first run leaves (Inductor's caches)."""
    return any((Path(folder) / "inductor").glob("*"))


def _measurable(campaign: Campaign) -> bool:
    """Whether two subjects are left to compare: one alone has no partner for a ratio."""
    return len(campaign.racing()) >= 2


def retire(campaign: Campaign, reference: str = "compile", within: float = BAND) -> dict[str, str]:
    """Racing: leave out of later replicates each subject that no longer bears on the question; the ones retired now.

    The question is the leader against `reference`, and what is exported: the best configuration
    decided a gain. So, once its interval (over the replicates so far, at least two) says so:

    * a configuration slower than the leader, or slower than `reference`, cannot be exported;
    * eager slower than `reference` cannot make a configuration need to beat eager too;
    * nor can eager that every configuration still racing is decided faster than (a gain, as `outcome` says): each
      already beats it, whichever leads at the end (`choose` asks that of a configuration only where eager is
      decided faster than plain compile, and a configuration decided faster than eager is then faster than both).

    The leader and `reference` always run. A retired subject keeps its figures, over the
    replicates it ran in, and `Campaign.retired` says after which replicate and why.

    Leaving a configuration out claims nothing, so it reads the plain 95% interval of this
    look, not the campaign's simultaneous one: it can only take a candidate out of the running
    (and cost power where it errs), never make a gain likelier to be claimed. Leaving eager out
    is a claim: that no configuration need beat eager too. So eager leaves only on the
    campaign's own intervals (`Campaign.ratio`: simultaneous over the looks, with the floor), the
    ones its table prints; with the looks' plain intervals, an eager as fast as plain compile could
    be left out wrongly at any of them.
    """
    if campaign.rounds < 2:
        return {}
    leader = campaign.leader(reference)
    now: dict[str, str] = {}
    for name in campaign.racing():
        if name in (reference, leader):
            continue
        subject = campaign.subjects[name]
        if subject.config is None and campaign.looks is not None and not campaign.looks.judges(campaign.rounds):
            continue  # a claim about eager: only where the campaign looks, on the error it planned there
        rivals = [reference] if subject.config is None else [r for r in (leader, reference) if r is not None]
        for rival in rivals:
            if subject.config is None:
                versus, which = campaign.ratio(name, rival), "simultaneous"
            else:
                logs = campaign.log_ratios(name, rival)
                versus, which = (replicate_interval(logs) if logs else None), "95% at this look"
            if versus is not None and versus.rounds >= 2 and versus.high < 1.0:
                now[name] = (
                    f"after replicate {campaign.rounds}: slower than {rival}, {versus.median:.2f}x "
                    f"[{versus.low:.2f}, {versus.high:.2f}] ({which})"
                )
                break
        if subject.config is None and name not in now and (why := _eager_beaten(campaign, name, reference, within)):
            now[name] = why
    campaign.retired.update(now)
    return now


def _eager_beaten(campaign: Campaign, eager: str, reference: str, within: float) -> str:
    """Why eager no longer bears on the question ('' while it may): every configuration still racing but `reference`
    is a decided gain over it, on the campaign's own interval."""
    versus = {
        name: campaign.ratio(name, eager)
        for name in campaign.racing()
        if name not in (eager, reference) and campaign.subjects[name].config is not None
    }
    if not versus or any(v is None or outcome(v, within) != "gain" for v in versus.values()):
        return ""
    name, slowest = min(((n, v) for n, v in versus.items() if v is not None), key=lambda item: item[1].low)
    return (
        f"after replicate {campaign.rounds}: every configuration racing is decided faster than it, the least of them "
        f"{name} at {slowest.median:.2f}x [{slowest.low:.2f}, {slowest.high:.2f}] (simultaneous)"
    )


def _warm_requests(harness: Harness, campaign: Campaign, folders: dict[str, str]) -> dict[str, TrialRequest]:
    """Each measured subject's request for its replicates: the same code, started from its warm folder."""
    requests: dict[str, TrialRequest] = {}
    for name in campaign.measured():
        subject = campaign.subjects[name]
        request = harness.request(subject.config, created=subject.created, cache_dir=folders[name])
        # The first run checked the configuration against eager; the same code needs no second check. A warm run
        # settles in one window that compiles nothing: its windows are measured beside the others, paired, and a
        # second settle window (half a second a subject, every replicate) would tell the pairing nothing.
        protocol = {**request.protocol, "check_accuracy": False, "settle_windows": 1}
        requests[name] = replace(request, protocol=protocol)
    return requests


def _one_replicate(
    harness: Harness,
    campaign: Campaign,
    every: Mapping[str, TrialRequest],
    rules: CampaignRules,
    rng: random.Random,
    on_run: RunCallback | None,
    lab: Lab,
    cold_seconds: float = 0.0,
    proof: CacheProof | None = None,
) -> None:
    names = campaign.racing()
    requests = {name: every[name] for name in names}
    if proof is not None:
        configured = {n for n in names if campaign.subjects[n].config is not None}
        # The leader's file is the likeliest to ship; with no configuration but the reference, the reference's.
        leader = campaign.leader(rules.reference)
        requests = proof.requests(requests, leader if leader in configured else rules.reference, configured)
    memory = {n: _peak(campaign.cold.get(n)) for n in names}
    design, groups = co_residence(names, memory, _free_mb(campaign), rules.reference)
    batches: int | Callable[..., int] = (
        campaign.replicates[0].batches_per_window
        if campaign.replicates
        else batches_for(harness.protocol.window_seconds)
    )
    plan = ReplicatePlan(
        groups=groups,
        design=design,
        windows=_windows(campaign, rules, harness),
        batches_per_window=batches,
        window_seconds=harness.protocol.window_seconds,
    )
    replicate, runs, partners = lab.replicate(requests, plan, rng)
    index = campaign.rounds
    loaded = any(r.load_cache_path for r in requests.values())
    campaign.replicates.append(replace(replicate, cold_seconds=cold_seconds, loaded_cache=loaded))
    if proof is not None:
        proof.take(requests, runs, campaign.rounds)
    for name in campaign.measured():
        run = runs.get(name)
        record = run.record() if run is not None else None
        campaign.runs[name].append(record)
        if partners or rules.reference in campaign.partners:
            # Where the reference ran in each subject's group (the 'pairs' design), the subject's ratio pairs with
            # that run of the reference, not with the reference's run in another group.
            column = campaign.partners.setdefault(rules.reference, {}).setdefault(name, [])
            column.extend([None] * (index - len(column)))
            partner = partners.get(name)
            column.append(partner.record() if partner is not None else None)
        if run is not None:
            campaign.environment = campaign.environment or dict(run.environment)
        if record is not None and on_run:
            on_run(name, index, record)


def _peak(record: RunRecord | None) -> float | None:
    """The most memory a subject's first run needed: its steady peak, or its compile-time peak where that is more
    (a replicate's processes start together and compile, or load, side by side), and on a GPU what its allocator
    reserved, where that is more: a subject stopped for another's turn keeps its cached blocks."""
    if record is None:
        return None
    figures = (
        record.peak_memory_mb,
        record.compile_peak_memory_mb,
        record.peak_reserved_mb,
        record.compile_peak_reserved_mb,
    )
    peaks = [p for p in figures if p is not None]
    return max(peaks) if peaks else None


def _free_mb(campaign: Campaign) -> float | None:
    """What the device had free for the subjects: the most any first run saw beside its own use."""
    seen = [
        (r.device_free_mb or 0.0) + (r.peak_memory_mb or 0.0)
        for r in campaign.cold.values()
        if r.device_free_mb is not None
    ]
    return max(seen) if seen else None


def _windows(campaign: Campaign, rules: CampaignRules, harness: Harness) -> int:
    """Windows per subject in the next replicate: the initial number, then what the variance components say."""
    if campaign.rounds < PROBE_REPLICATES:
        return rules.windows
    leader = campaign.leader(rules.reference)
    parts = campaign.components(leader, rules.reference) if leader else None
    if parts is None or parts.replicates < 2:
        return rules.windows
    subjects = max(len(campaign.racing()), 1)
    window = harness.protocol.window_seconds * subjects  # a block: one window of every subject
    return windows_per_replicate(
        parts,
        window_seconds=window,
        replicate_seconds=_start_up(campaign),
        least=4,
        most=max(rules.most_windows, rules.windows),
    )


def _start_up(campaign: Campaign) -> float:
    """What a later replicate's start-up will take: the mean of those so far that started from warm folders only.

    The compile-cache proof's replicate (`Replicate.loaded_cache`) started a subject from a saved file, which on a
    CPU holds no compiled kernels: its start-up took 20 to 27 s against 7 to 9 s for the toy's others, and counted
    in, it made the next replicates' windows about 40% more than the rule asks for (21 instead of 15)."""
    warm = [r.ready_seconds for r in campaign.replicates if not r.loaded_cache] or [
        r.ready_seconds for r in campaign.replicates
    ]
    return sum(warm) / len(warm) if warm else 0.0


def _next_seconds(campaign: Campaign, windows: int) -> float:
    """What the next replicate will take, from the last one: its start-up, and its windows scaled to `windows`."""
    last = campaign.replicates[-1]
    measuring = max(last.seconds - last.ready_seconds, 0.0)
    ready = _start_up(campaign) if last.loaded_cache else last.ready_seconds
    return last.cold_seconds + ready + measuring * windows / max(last.windows, 1)


def _stop(campaign: Campaign, rules: CampaignRules, spent: float, ahead: float = 0.0) -> str:
    """Why to stop now ('' to go on); `ahead` is what the next replicate would take, which the budget must hold."""
    looking = campaign.looks is None or campaign.looks.judges(campaign.rounds)
    if campaign.rounds >= rules.min_rounds and looking:
        leader = campaign.leader(rules.reference)
        versus = campaign.ratio(leader, rules.reference) if leader else None
        said = outcome(versus, rules.decide_within)
        if leader is None:
            return "nothing left to compare"
        if rules.precision is not None:
            if versus is not None and versus.rounds >= 2 and versus.half_width <= rules.precision:
                return (
                    f"precise after {campaign.rounds} replicates: {leader} against {rules.reference} within "
                    f"+/-{versus.half_width:.1%} ({said})"
                )
        elif said != "undecided":
            return f"decided after {campaign.rounds} replicates: {leader} against {rules.reference}: {said}"
        if rules.futility and rules.precision is None and (why := _no_gain_left(campaign, rules)):
            return why
    if rules.seconds is not None and campaign.rounds >= rules.min_rounds and spent + ahead > rules.seconds:
        return (
            f"budget spent: {spent:.0f} s of measurement, and another replicate (about {ahead:.0f} s) would pass "
            f"--measure-seconds {rules.seconds:g}; " + _state(campaign, rules)
        )
    return ""


def _no_gain_left(campaign: Campaign, rules: CampaignRules) -> str:
    """Why no subject still measured can be shown faster than the reference any more ('' while one can): under the
    `chance` rule (`FUTILITY_RULE`), each one's `claim_chance` at the last look is under `FUTILITY_CHANCE`; under
    `band`, or where the campaign plans no looks, each one's upper bound (`upper_bound`, one-sided at
    `FUTILITY_ERROR`) lies inside the band."""
    if campaign.rounds >= rules.max_rounds:
        return ""  # the campaign ends here anyway, its replicates spent: the stop is the budget's, not this one
    reference = rules.reference
    rule, least = futility_rule()
    looks = campaign.looks if rule == "chance" else None  # the chance needs the looks' last one
    found: list[tuple[float, float, str]] = []
    for name in campaign.racing():
        subject = campaign.subjects[name]
        if name == reference or subject.same_as == reference:
            continue
        logs = campaign.log_ratios(name, reference)
        if len(logs) < 2 or not all(math.isfinite(v) for v in logs):
            return ""
        windows = sum(len(r.windows) for r in campaign.complete_runs(name))
        parts = campaign.components(name, reference)
        bound = upper_bound(logs, windows, parts)
        if looks is not None:
            odds = claim_chance(logs, looks, windows, parts, rules.decide_within)
            if odds >= least:
                return ""
        elif bound > 1.0 + rules.decide_within:
            return ""
        else:
            odds = 0.0
        found.append((bound, odds, name))
    if not found:
        return ""
    bound, odds, name = max(found)
    said = (
        f"even that fast, it would show a gain at the last look in {'under 1%' if odds < 0.01 else f'{odds:.0%}'} "
        f"of campaigns (the stop asks under {least:.0%})"
        if looks is not None
        else f"inside the +/-{rules.decide_within:.0%} band"
    )
    return (
        f"no gain left to find after {campaign.rounds} replicates: the fastest, {name}, runs at most {bound:.3f}x "
        f"{reference} (one-sided {1 - FUTILITY_ERROR:.0%}); {said}"
    )


def _spent(campaign: Campaign, rules: CampaignRules, held: bool = False) -> str:
    """Why a campaign that ran its last replicate stopped; `held`: its seconds budget set that last replicate."""
    if not _measurable(campaign):
        return "nothing left to compare: every configuration but one failed"
    if held and rules.seconds is not None:
        most = f"the most that {rules.seconds:g} s of replicates hold, as planned from the first replicate"
    else:
        most = "the most allowed"
    return f"budget spent: {campaign.rounds} replicates ({most}); " + _state(campaign, rules)


def _state(campaign: Campaign, rules: CampaignRules) -> str:
    leader = campaign.leader(rules.reference)
    versus = campaign.ratio(leader, rules.reference) if leader else None
    return f"{leader} against {rules.reference}: {outcome(versus, rules.decide_within)}"
