"""The study loop: baselines, trials (ask → run a worker → tell), confirmation of the best, export.

Optuna is driven with explicit ask/tell so that every trial runs in its own process and
every outcome, failures included, is recorded in the study (`study.trials`). The best
trials are then confirmed in one measurement campaign with both baselines
(`autotune.measure.Campaign`), and the export ships the best of eager, plain torch.compile and the
confirmed trials (`autotune.measure.choose`).

Several hosts may share one study in a database server (`--storage postgresql://...`):
`--trials` is the study's total, a host whose trials end waits for those the others still
run, and the search that finished the study's last trial confirms and exports; the others
leave that to it (`autotune export` writes the same files anywhere afterwards).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import AutotuneError, SearchError, WorkloadError
from autotune.measure import (
    Campaign,
    CampaignRules,
    Objectives,
    Subject,
    confirmation_rules,
    measure,
    record_compile_cache,
)
from autotune.measure.engine import (
    CacheProof,
    ReplicateCallback,
    RunCallback,
    expected_replicate_seconds,
    run_text,
)
from autotune.measure.format import span, utc_now
from autotune.measure.tasks import LiveReference, measure_baselines
from autotune.runtime import compile_cache, environment
from autotune.runtime.config import CompileConfig
from autotune.study.doctor import diagnose
from autotune.study.report import (
    Plan,
    Progress,
    ProgressCallback,
    SearchResult,
    campaign_of,
    confirmation_guess,
    export_study,
    exported_choice,
    quiet,
)
from autotune.study.search._budget import SearchBudget, confirmation_seconds
from autotune.study.search._culprits import Culprits
from autotune.study.search._loop import ANCHOR_EVERY, DETERMINISTIC_FAILURES, TrialLoop
from autotune.study.search._opening import forget_new_study, open_search_study
from autotune.study.search._options import SearchOptions
from autotune.study.search._pool import TrialPool, worker_devices
from autotune.study.search._prepare import prepare
from autotune.study.search._seeds import recipes_pending, seed_study, stacked_recipes, study_seeds
from autotune.study.search._space_file import load_space
from autotune.study.storage import (
    REFERENCES,
    CompileCacheRecord,
    SearchSession,
    SessionBaselines,
    ValueScale,
    adopt_scale,
    read_study_record,
    record_of,
    storage_failures_named,
    study_scale,
    update_study_record,
)
from autotune.trial.run_record import RunRecord
from autotune.trial.runner import remove_abandoned_workdirs

__all__ = ["CACHES_FOLDER", "explore", "search"]

CACHES_FOLDER = "caches"
"""In the output folder during a search: each subject's compile-cache folder, for its warm runs; removed at the end."""


def search(options: SearchOptions, progress: ProgressCallback | None = None) -> SearchResult | None:
    """Run (or resume) the study described by `options`, confirm its best trials and export the winner.

    None when the study is shared and another host's search confirms and exports it.
    """
    with storage_failures_named(options.storage_url):
        return _Search(options, progress or quiet).run()


def explore(options: SearchOptions, progress: ProgressCallback | None = None) -> optuna.Study:
    """Baselines and trials up to `options.trials`; no confirmation, no export.

    `autotune retune` runs its short warm-started search this way and decides on its own measurements.
    """
    with storage_failures_named(options.storage_url):
        run = _Search(options, progress or quiet)
        run.explore()
        return run.study


class _Search:
    def __init__(self, options: SearchOptions, progress: ProgressCallback) -> None:
        self.options = options
        self.progress = progress
        self.objectives = Objectives.parse(options.objective)
        self.objective = self.objectives.primary
        self.started = time.monotonic()
        self.stages: dict[str, float] = {}
        """Seconds of each stage this session ran (`SESSION_STAGES`)."""
        self.reporting = threading.Lock()
        self.plan = Plan(
            confirmation=(options.confirm + 2) * options.replicates if options.confirm else 0,
            # Without a confirmation to prove it in its replicates (`CacheProof`): save, then load, a warm run and a
            # run from the file, about one trial.
            cache=1 if options.compile_cache and not options.confirm else 0,
        )
        self.cache_proof: CacheProof | None = None
        """What the confirmation's replicates saved and loaded of the compile cache, once it ran."""
        self.prepared = prepared = prepare(options)
        self.summary, self.harness = prepared.summary, prepared.harness
        self.model_fingerprint = prepared.model_fingerprint
        self.base_space = load_space(options.space)
        options.out_dir.mkdir(parents=True, exist_ok=True)
        self.study, self.new_study = open_search_study(
            options, self.objectives, self.summary, self.model_fingerprint, self.base_space.name
        )
        self.loop = TrialLoop(
            self.study, self.harness, options, self.objective, self._report, objectives=self.objectives
        )
        self.loop.caches = options.out_dir / CACHES_FOLDER
        self.loop.culprits = Culprits(
            self.study,
            options.out_dir,
            explain=options.explain_failures,
            budget=options.explain_budget,
            note=self._note,
        )
        self.budget = SearchBudget(options, self.loop, self._note, started=self.started, plan=self.plan)

    def run(self) -> SearchResult | None:
        try:
            return self._run()
        finally:
            # The subjects' warm caches served the confirmation; compile_cache.bin holds the winner's.
            shutil.rmtree(self.loop.caches, ignore_errors=True)

    def _run(self) -> SearchResult | None:
        # What an earlier session cost is not this one's: a session that ends before its export records none.
        update_study_record(self.study, search_stages={})
        if self.options.doctor and read_study_record(self.study).doctor is None:
            with self._stage("doctor"):
                self._diagnose()
        self.explore()
        if self.loop.ledger.shared and not self.budget.confirms():
            return None
        with self._stage("confirmation"):
            campaign = _confirm(self)
        if campaign is not None and not any(campaign.complete_runs(name) for name in campaign.subjects):
            failures = "; ".join(
                f"{name}: {failure.reason}" for name in campaign.subjects if (failure := campaign.failure(name))
            )
            raise SearchError(
                f"every confirmation run failed ({failures}), so nothing was measured to choose from; nothing was "
                f"exported and the files in {self.options.out_dir} are as they were. The trials are kept in the study."
            )
        if self.options.compile_cache:
            with self._stage("compile cache"):
                self._save_compile_cache(campaign_of(self.study)[0], campaign)
        update_study_record(
            self.study,
            search_wall_seconds=round(time.monotonic() - self.started, 1),
            search_stages={name: round(s, 1) for name, s in self.stages.items()},
            search_session=SearchSession(host=socket.gethostname(), pid=os.getpid(), workers=self.plan.workers),
        )
        return export_study(self.study, self.options.out_dir)

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        """Time a stage of this session (`SESSION_STAGES`) into `stages`, for the search's cost."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + time.monotonic() - started

    def _diagnose(self) -> None:
        """The doctor's findings, as the search's first phase: a break or recompile no setting can fix is worth knowing
        before spending an hour on trials."""
        options = self.options
        self._report(None, "doctor: graph breaks and recompiles")
        try:
            found = diagnose(
                options.model,
                str(options.device),
                seed=options.seed,
                protocol=options.protocol,
                timeout=options.trial_timeout,
            )
        except WorkloadError:
            # The workload does not build or run with nothing compiled: no trial, and no baseline, could run it.
            if self.new_study:
                forget_new_study(options, self.study)
            raise
        except AutotuneError as exc:
            self._note(f"doctor: could not analyse the workload ({exc}); searching anyway")
            return
        update_study_record(self.study, doctor=found.to_dict())
        self._note(f"doctor: {found.verdict()}{'' if found.clean else ' (`autotune doctor` for details)'}")

    def explore(self) -> None:
        """Baselines, then trials until --trials, --timeout, too many failures or an exhausted space."""
        try:
            self._explore()
        finally:
            self.loop.close()  # the live plain-compile reference ends with the trials

    def _explore(self) -> None:
        self.budget.start()
        if not self.new_study:
            held = len(self.study.get_trials(deepcopy=False))
            self._note(f"resuming study {self.study.study_name!r}: {held} trial(s) so far (--new starts it afresh)")
        removed = remove_abandoned_workdirs()
        if removed:
            self._note(f"removed {removed} trial folder(s) left behind by a search that was killed")
        try:
            with self._stage("baselines"):
                self.loop.baselines = _baselines(self)
        except SearchError:
            if self.new_study:
                shutil.rmtree(self.loop.caches, ignore_errors=True)  # the baselines' cache folders
                forget_new_study(self.options, self.study)
            raise
        with self._stage("trials"):
            self._trials()

    def _trials(self) -> None:
        """The space adapted and seeded, then trials until the budget ends them."""
        graph_breaks = int(self.loop.baselines["compile"].get("graph_breaks", 0) or 0)
        space = self.prepared.space(
            self.base_space, graph_breaks, allow_precision_changes=self.options.allow_precision_changes
        )
        self.loop.space = space
        dropped = "".join(f"; dropped {d}" for d in space.dropped)
        self._note(f"space '{space.name}': {len(space.dimensions())} dimensions{dropped}")
        if self.options.recipes and not self.options.brute_force and not self.study.get_trials(deepcopy=False):
            # A new study only: on resume the seeds are trials already, run or waiting in the queue.
            seeds, limit = study_seeds(space, self.summary, self.options.trials)
            for note in seed_study(self.study, space, seeds, limit=limit):
                self._note(note)
        self.plan.trials = max(self.options.trials - self.loop.ledger.started(), 0)
        self._count_anchors()
        waiting = False
        workers = worker_devices(self.options.devices, self.options.workers or 1)
        if len(workers) > 1:
            shared = ", ".join(f"{workers.count(d)} on {d}" for d in dict.fromkeys(workers))
            chosen = self.options.workers_chosen  # no --workers: chosen for the host (`default_workers`)
            self._note(
                chosen or f"{len(workers)} workers ({shared}): compiles run side by side, measurements one at a time"
            )
            self.plan.workers = len(workers)
        while True:
            if len(workers) > 1:
                TrialPool(self.loop, workers, more=self.budget.more, finished_one=self._finished_one).run()
            while self.budget.more():
                self._stack_recipes()
                self.plan.run_started = time.monotonic()
                self.loop.one_trial()
                self._finished_one()
            if not self.budget.others_finish_it():
                break
            if not waiting:
                self._note(
                    f"all {self.options.trials} trials of the study have started: waiting for other searches' last"
                )
                waiting = True
            time.sleep(self.options.heartbeat_interval)
        self.plan.trials = self.plan.anchors = 0

    def _stack_recipes(self) -> None:
        """Once every recipe has run, queue the ones that ran faster than plain compile together (once a study).

        They take at most half the trials left, so the sampler keeps the rest.
        """
        stacking = self.options.recipes and not self.options.brute_force
        if not stacking or read_study_record(self.study).stacked is not None or recipes_pending(self.study):
            return
        assert self.loop.space is not None
        seeds, _ = study_seeds(self.loop.space, self.summary, self.options.trials)
        stacked = stacked_recipes(self.study, seeds, self.objective)
        left = max(self.options.trials - self.loop.ledger.started(), 0)
        notes = seed_study(self.study, self.loop.space, stacked, limit=left // 2)
        update_study_record(self.study, stacked=[seed.name for seed in stacked])
        for note in notes:
            self._note(note.replace("recipe ", "stacked recipe ", 1))

    def _finished_one(self) -> None:
        self.plan.run_started = None
        self.plan.trials = max(self.options.trials - self.loop.ledger.started(), 0)
        self.plan.typical_run = self.loop.ledger.typical_seconds() or self.plan.typical_run
        self._count_anchors()

    def _count_anchors(self) -> None:
        """The anchors the trials ahead will start on the search's device, and what one has taken so far."""
        reference = self.loop.references.get(self.harness.device)
        if reference is None or self.loop.reference_name != "compile":
            self.plan.anchors = 0
            return
        self.plan.anchors = reference.anchors_ahead(self.plan.trials, ANCHOR_EVERY)
        if reference.anchor_seconds:
            self.plan.anchor_seconds = statistics.fmean(reference.anchor_seconds)

    def _save_compile_cache(self, campaign: Campaign, measured: Campaign | None) -> None:
        """Save the exported configuration's compile artifacts beside best.yaml, and time compiling with them.

        `measured` is this session's confirmation, whose subjects know their cache folders (the
        stored campaign does not keep paths that are gone once the search ends).
        """
        choice = exported_choice(self.study, campaign)
        if choice.config.scope == "none":
            return
        subject = campaign.subjects[choice.subject]
        ran = subject.same_as or choice.subject
        # The proof holds this session's confirmation's subjects: it serves only the subject that ran there.
        same = measured is not None and ran in measured.subjects and measured.subjects[ran].config == subject.config
        proven = same and self.cache_proof is not None and ran in self.cache_proof.loaded
        self.plan.run_started = time.monotonic()
        self._report(
            choice.trial, "compile cache: " + ("from the confirmation's replicates" if proven else "save, then load")
        )
        section, staged = record_compile_cache(
            self.harness,
            choice.config,
            subject.created,
            self.options.out_dir,
            warm_from=_cache_folder(measured, ran),
            cold_seconds=campaign.compile_seconds(choice.subject),
            proof=self.cache_proof if same else None,
            subject=ran,
        )
        if staged is not None:
            os.replace(staged, self.options.out_dir / "compile_cache.bin")
        update_study_record(self.study, compile_cache=CompileCacheRecord(subject=choice.subject, section=dict(section)))
        self._note(compile_cache.describe(section))

    # -- display -----------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        self._report(None, "", message)

    def _report(self, trial: int | None, phase: str, message: str = "") -> None:
        with self.reporting:  # a pool's workers report from their threads
            done = len(self.loop.ledger.finished())
            eta = self.plan.eta(time.monotonic())
            self.progress(Progress(done, self.options.trials, trial, phase, eta, message))


def _cache_folder(campaign: Campaign | None, name: str) -> str | None:
    """The cache folder a subject of this session's confirmation ran in, if any."""
    subject = campaign.subjects.get(name) if campaign is not None else None
    return subject.cache_dir if subject is not None else None


def _baselines(search: _Search) -> dict[str, dict[str, Any]]:
    """Eager and plain torch.compile, cold and then warm and paired, once per search session; plain compile stays alive.

    Trials are paired with that live plain compile (the reference), so their figures compare
    with it at the same moments; its cold compile time is the compile budget's yardstick.
    """
    loop = search.loop
    search.plan.run_started = time.monotonic()
    search._report(None, "baselines: eager, then plain torch.compile, each cold; then both warm, in turn")
    created = utc_now()
    measured = measure_baselines(
        search.harness, loop.caches, windows=search.options.protocol.windows, seed=search.options.seed, created=created
    )
    search.plan.baselines, search.plan.run_started = 0, None
    if search.plan.typical_run is None:
        search.plan.typical_run = measured.compile_run.wall_seconds
    options = search.options
    search.plan.confirmation_seconds_guess = confirmation_guess(
        measured.eager,
        measured.compile,
        confirm=options.confirm,
        replicates=options.replicates,
        protocol=options.protocol,
        cold_compiles=search.objectives.compile_decides,
    )
    if not measured.eager.complete:
        measured.close()
        tail = measured.eager.stderr_tail.strip()
        raise SearchError(
            f"the workload does not run eagerly, so there is nothing to compare with: {measured.eager.reason}: "
            f"{measured.eager.message}" + (f"\n{tail}" if tail else "")
        )
    baselines = {"eager": measured.eager.to_dict(), "compile": measured.compile.to_dict()}
    if measured.reference is not None and measured.reference.over_eager:
        baselines["compile"]["speedup_vs_eager"] = round(measured.reference.over_eager, 4)
    loop.closing.append(measured.close)
    if measured.reference is not None:
        loop.references[search.harness.device] = measured.reference
        loop.reference_name = measured.reference_name
        # Before any anchor ran: one costs about what plain compile's warm restart and its paired windows did.
        phases = measured.compile_run.phase_seconds
        search.plan.anchor_seconds = (phases.get("restart", 0.0) + phases.get("measure", 0.0)) or None
        _on_study_scale(search, measured.reference, measured.reference_name)
    if measured.compile.complete or measured.compile.reason in DETERMINISTIC_FAILURES:
        # A plain trial would compile the same code again: its outcome is this run's (see `TrialLoop.plain_run`).
        loop.plain_run = (measured.compile_run, created)
    seen = measured.compile_run.environment or {}
    if seen:
        loop.host = environment.host_key(seen)
    session = SessionBaselines(
        eager=measured.eager,
        compile=measured.compile,
        compile_over_eager=baselines["compile"].get("speedup_vs_eager"),
        host=socket.gethostname(),
        environment=dict(seen),
        measured=utc_now(),
    )
    # Each host's own baselines too, under its key: a study several hosts share compares every
    # trial with the baselines of the host that ran it (the trial's `baselines_of`).
    update_study_record(
        search.study, baselines=session, host_baselines={loop.host: session}, **({"environment": seen} if seen else {})
    )
    ratio = measured.reference.over_eager if measured.reference is not None else None
    if ratio:
        search._note(f"baselines: plain torch.compile ran {ratio:.2f}x eager, both warm, paired window by window")
    if measured.compile.shared_build_seconds:
        search._note(
            f"baselines: plain torch.compile's cold compile built Inductor's precompiled C++ header "
            f"({measured.compile.shared_build_seconds:.1f} s), which every later compile in this environment reuses: "
            "left out of its compile time"
        )
    return baselines


def _on_study_scale(search: _Search, reference: LiveReference, name: str) -> None:
    """Put this session's search-time rates on the study's scale (`adopt_scale`): the reference's rates become it."""
    own = ValueScale(
        reference=name,
        samples_per_second=reference.samples_per_second,
        batches_per_second=reference.batches_per_second,
        host=socket.gethostname(),
        measured=utc_now(),
    )
    scale, mine = adopt_scale(search.study, own)
    label = "plain torch.compile" if name == "compile" else name
    if not mine:
        search._note(
            f"baselines: trials' search-time figures are their ratio to the live {label} times its rate when the "
            f"study began ({scale.samples_per_second:.4g} samples/s on {scale.host or 'a host'}, {scale.measured}), "
            f"as every trial of the study; this session measured {own.samples_per_second:.4g}"
        )
    search.loop.follow_scale()  # the live references take the recorded scale: the one the study keeps
    others = [r for r in REFERENCES if r != name and study_scale(search.study, r) is not None]
    if others:
        search._note(
            f"baselines: the study's earlier trials were paired with {others[0]}, this session's with {label}: their "
            "search-time figures are on different scales; the confirmation measures them side by side alike"
        )


def _confirm(search: _Search) -> Campaign | None:
    """Measure the best trials with both baselines in replicates of paired windows; store the campaign in the study."""
    count = search.options.confirm
    ledger = search.loop.ledger
    top = ledger.front_distinct(count) if search.objectives.multi else ledger.best_distinct(count)
    complete = [t for t in ledger.finished() if t.state == optuna.trial.TrialState.COMPLETE]
    if not top and (not count or not complete):
        return None
    which = "Pareto-front" if search.objectives.multi else "best"
    what = (
        f"the {which} {len(top)} trial(s) against eager and plain torch.compile"
        if top
        else "eager against plain torch.compile (every complete trial compiled plain torch.compile itself)"
    )
    options = search.options
    cold = search.objectives.compile_decides
    if options.compile_cache:
        # The replicates save the compile cache and start the leader from it: no runs of its own after them.
        search.cache_proof = CacheProof(search.loop.caches / "compile-cache-proof")
    search._note(
        f"confirming {what}: {options.replicates} to {options.max_replicates} replicates of paired windows, "
        "each subject warm from its own cache"
        + (
            "; compile time decides here, so before each replicate every configuration compiles again, cold"
            if cold
            else ""
        )
    )
    campaign = measure(
        search.harness,
        _subjects(search, top),
        objective=search.objective,
        rules=replace(
            confirmation_rules(
                options.protocol, min_replicates=options.replicates, max_replicates=options.max_replicates
            ),
            cold_compiles=cold,
            # A Pareto front reads compile times too, and keeps every subject's figures: a stop on speed, decided or
            # for want of a gain, would cut them short, and a subject left out of the race would be judged between
            # looks.
            stop_decided=not search.objectives.multi,
            futility=not search.objectives.multi,
            # A front reads a point as fast as plain compile when its speed interval lies inside the band: with the
            # floor measured on a quiet device a point 1% slower lies there, and a compile time decided shorter by
            # the chance the campaign's error allows then has it dominate plain compile. A front keeps the fixed
            # floor (outputs/benchmarks/decision-error.md, *Picked from a Pareto front*).
            floor_rule="fixed" if search.objectives.multi else "measured",
            race=not search.objectives.multi,
            seconds=confirmation_seconds(
                options, search.started, time.monotonic(), reserve=search.plan.cache * (search.plan.typical_run or 0.0)
            ),
        ),
        on_run=_shown(search),
        on_replicate=_planned(search),
        cache_root=search.loop.caches,
        seed=options.seed,
        cache_proof=search.cache_proof,
    )
    search.plan.confirmation_seconds, search.plan.run_started = 0.0, None
    update_study_record(search.study, confirmation=campaign)
    search._note(f"confirmation: {campaign.stopped}")
    noise = campaign.noise()
    if noise["noisy_runs"]:
        search._note(
            f"the machine was busy during {noise['noisy_runs']} of {noise['runs']} confirmation runs "
            f"(load {span(noise.get('load'), missing='not reported')}); pairing cancels what it did to both sides"
        )
    for why in campaign.spoiled:
        search._note(f"confirmation: {why}; measured again, not counted")
    return campaign


def _subjects(search: _Search, top: list[optuna.trial.FrozenTrial]) -> list[Subject]:
    """Both baselines and the trials to confirm, each with its first run and its own cache folder."""
    caches = search.loop.caches
    measured = read_study_record(search.study).baselines
    baselines = [
        Subject(
            name=name,
            config=config,
            cache_dir=str(caches / name),
            cold=measured.of(name),
            reproduce=True,
        )
        for name, config in (("eager", None), ("compile", CompileConfig()))
    ]
    return baselines + [_trial_subject(t, caches) for t in top]


def _trial_subject(trial: optuna.trial.FrozenTrial, caches: Path) -> Subject:
    """A trial to confirm, with its search-time run as its cold one."""
    record = record_of(trial)
    return Subject(
        name=f"trial {trial.number}",
        config=CompileConfig.from_dict(record.config or {}),
        created=record.created,
        trial=trial.number,
        cache_dir=str(caches / f"trial-{trial.number}"),
        cold=replace(record.told(), state="complete"),
    )


def _shown(search: _Search) -> RunCallback:
    def shown(name: str, index: int, record: RunRecord) -> None:
        search._note(f"confirm {run_text(name, index, record)}")

    return shown


def _planned(search: _Search) -> ReplicateCallback:
    """Keep the ETA on the measurement: the replicates still needed at least, at the pace of those so far."""

    told: set[str] = set()

    def planned(campaign: Campaign, rules: CampaignRules) -> None:
        for name, why in campaign.retired.items():
            if name not in told:
                told.add(name)
                search._note(f"confirm: {name} left out of later replicates, {why}")
        done = campaign.replicates
        if done:
            pace = sum(r.seconds + r.cold_seconds for r in done) / len(done)
        else:  # before the first: a guess from the subjects' first runs, so the ETA counts down from the start
            firsts = {n: campaign.cold.get(n) for n in campaign.racing()}
            pace = expected_replicate_seconds(
                firsts, rules.windows, search.options.protocol.window_seconds, starts_together=True
            )
            if rules.cold_compiles:
                pace += sum(r.compile_seconds or 0.0 for r in firsts.values() if r is not None)
        looks = campaign.looks.planned if campaign.looks is not None else ()
        next_look = next((n for n in looks if n > len(done)), rules.min_replicates)
        left = max(next_look - len(done), 1)  # the replicates until it may stop next
        running = len(done) < rules.max_replicates and not campaign.stopped
        search.plan.confirmation_seconds = left * pace if running else 0.0
        search.plan.run_started = time.monotonic()
        search._report(
            None, f"confirmation: replicate {len(done) + 1} of {rules.min_replicates} to {rules.max_replicates}"
        )

    return planned
