"""The study loop: baselines, trials (ask → run a worker → tell), confirmation of the best, export.

Optuna is driven with explicit ask/tell so that every trial runs in its own process and
every outcome, failures included, is recorded in the study (`study.trials`). The best
trials are then confirmed in one measurement campaign with both baselines
(`study.campaign`), and the export ships the best of eager, plain torch.compile and the
confirmed trials (`study.choice`).

Several hosts may share one study in a database server (`--storage postgresql://...`):
`--trials` is the study's total, a host whose trials end waits for those the others still
run, and the search that finished the study's last trial confirms and exports; the others
leave that to it (`autotune export` writes the same files anywhere afterwards).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import AutotuneError, SearchError
from autotune.runtime import compile_cache, environment
from autotune.runtime.config import CompileConfig
from autotune.study import campaign as measurement
from autotune.study.cache import record_compile_cache
from autotune.study.campaign import Harness, Subject
from autotune.study.doctor import diagnose
from autotune.study.export import SearchResult, campaign_of, export_study, exported_choice
from autotune.study.format import utc_now
from autotune.study.heartbeat import Liveness
from autotune.study.objective import Objectives
from autotune.study.pareto import DEFAULT_PICK, parse_pick
from autotune.study.pool import TrialPool, worker_devices
from autotune.study.progress import Plan, Progress, ProgressCallback, quiet
from autotune.study.seeds import expert_recipes, seed_study
from autotune.study.space import SearchSpace, load_space, shared_length_groups
from autotune.study.storage import create_study, open_storage, shown
from autotune.study.trials import DETERMINISTIC_FAILURES, TrialLoop
from autotune.trial.request import Protocol, check_device
from autotune.trial.runner import remove_abandoned_workdirs, run_trial
from autotune.workload import resolve

__all__ = ["SearchOptions", "SearchResult", "default_study_name", "explore", "search"]

SAMPLERS = ("tpe", "random", "bruteforce")
PRUNERS = ("median", "hyperband", "none")


@dataclass(kw_only=True)
class SearchOptions:
    """Everything `autotune search` takes; the CLI flags map one to one."""

    model: str
    """The workload target, "pkg.mod:attr"."""
    space: str = "default"
    """A bundled search space's name, or a YAML file."""
    trials: int = 20
    """Trials in the study, resumed ones included."""
    timeout: float | None = None
    """Stop starting new trials after this many seconds."""
    trial_timeout: float = 900.0
    """Kill a run's whole process group after this many seconds."""
    device: str | None = None
    """cpu, cuda or cuda:N (default: cuda when available); several CUDA devices as 'cuda:0,cuda:1', one worker each.
    After validation, the first device: the baselines, the confirmation and the doctor run there."""
    workers: int | None = None
    """Trials run at once (default: one per device); more workers than devices share a device, compiling side by
    side and measuring one at a time."""
    devices: list[str] = field(default_factory=list)
    """Every device trials run on (filled from `device`)."""
    out: str | None = None
    """The output folder (default: outputs/<study-name>)."""
    study_name: str | None = None
    """The study's name (default: derived from `model`)."""
    storage: str | None = None
    """An Optuna storage URL (default: SQLite in the output folder); a database server lets several hosts share it."""
    heartbeat_interval: int = 10
    """A shared storage's trials beat every this many seconds."""
    grace_period: int = 60
    """A shared storage's trial without a beat for this many seconds is failed as abandoned and queued again."""
    sampler: str = "tpe"
    """tpe, random or bruteforce."""
    pruner: str = "median"
    """median, hyperband or none."""
    seed: int = 0
    """Seeds the sampler and the batches drawn."""
    objective: str = "throughput"
    """'throughput', 'time-to:N', or a list with trade-offs: 'throughput,compile-time,peak-memory'."""
    pick: str = DEFAULT_PICK
    """Which point of a multi-objective study's Pareto front best.yaml gets (see `autotune.study.pareto`)."""
    max_compile_seconds: float | None = None
    """Stop a trial whose compile and warm-up take longer (replaces the compile budget)."""
    compile_budget: float = 4.0
    """Stop a trial whose compile and warm-up take longer than this many times plain torch.compile's; 0: no budget."""
    max_failure_rate: float = 0.8
    """Stop searching (and confirm what completed) when more than this share of at least 5 trials failed."""
    slow_ratio: float = 0.5
    """Prune a trial whose windows run below this fraction of eager's throughput."""
    confirm: int = 3
    """Re-measure this many of the best trials with both baselines, in rotated rounds, before choosing."""
    rounds: int = 3
    """Rounds of the confirmation campaign before it may stop."""
    max_rounds: int = 6
    """Rounds of the confirmation campaign at most, while the leader's interval does not decide."""
    protocol: Protocol = field(default_factory=Protocol)
    """How every run is measured."""
    allow_precision_changes: bool = False
    """Also search settings that change numerics (float32 matmul precision, unsafe math), judged at a looser tolerance."""
    recipes: bool = True
    """Start a new study with plain torch.compile and the generic expert recipes (`autotune.study.seeds`)."""
    doctor: bool = True
    """First find the workload's graph breaks and recompiles (`autotune doctor`); kept in best.yaml and the report."""
    compile_cache: bool = True
    """Save the winner's compile artifacts to compile_cache.bin and measure its cold and cached compile time."""
    reuse_since: int = 0
    """Trials numbered from here on may reuse an identical configuration's outcome instead of being measured;
    a retune sets it to its first trial, since earlier ones may have run in another environment."""

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise SearchError(f"--trials {self.trials}: must be >= 1.")
        if self.sampler not in SAMPLERS:
            raise SearchError(f"--sampler {self.sampler!r} is not allowed; use one of {SAMPLERS}.")
        if self.pruner not in PRUNERS:
            raise SearchError(f"--pruner {self.pruner!r} is not allowed; use one of {PRUNERS}.")
        if not 0 < self.max_failure_rate <= 1:
            raise SearchError(f"--max-failure-rate {self.max_failure_rate}: must be in (0, 1].")
        if self.trial_timeout <= 0 or (self.timeout is not None and self.timeout <= 0):
            raise SearchError("--trial-timeout and --timeout must be positive numbers of seconds.")
        if self.compile_budget < 0 or (self.compile_budget and self.compile_budget < 1):
            raise SearchError(
                f"--compile-budget {self.compile_budget}: must be 0 (no budget) or >= 1 (times plain torch.compile's "
                "compile time)."
            )
        if not 0 <= self.slow_ratio < 1:
            raise SearchError(f"--slow-ratio {self.slow_ratio}: must be in [0, 1); 0 never prunes for slowness.")
        if self.confirm < 0:
            raise SearchError(f"--confirm {self.confirm}: must be >= 0.")
        if not 1 <= self.heartbeat_interval < self.grace_period:
            raise SearchError(
                f"--heartbeat-interval {self.heartbeat_interval} and --grace-period {self.grace_period}: "
                "1 <= heartbeat-interval < grace-period must hold."
            )
        if not 1 <= self.rounds <= self.max_rounds:
            raise SearchError(
                f"--rounds {self.rounds} and --max-rounds {self.max_rounds}: 1 <= rounds <= max-rounds must hold."
            )
        self.devices = _devices(self.device, self.devices)
        self.device = self.devices[0]
        if self.workers is None:
            self.workers = len(self.devices)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < len(self.devices):
            raise SearchError(
                f"--workers {self.workers}: must be an integer >= the {len(self.devices)} device(s) of --device "
                f"{','.join(self.devices)} (each device needs a worker)."
            )
        Objectives.parse(self.objective)
        parse_pick(self.pick)

    @property
    def name(self) -> str:
        return self.study_name or default_study_name(self.model)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("outputs") / self.name

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{(self.out_dir / 'study.db').resolve()}"

    @property
    def shared(self) -> bool:
        """Whether the study is in a database server that several hosts may share: any storage but SQLite."""
        return not self.storage_url.startswith("sqlite")

    @property
    def liveness(self) -> Liveness:
        return Liveness(interval=self.heartbeat_interval, grace=self.grace_period)


def _devices(device: str | None, devices: list[str]) -> list[str]:
    """The validated devices of `--device`: one, or several distinct CUDA devices separated by commas."""
    if devices:
        return [check_device(d) for d in devices]
    if device is None or "," not in device:
        return [check_device(device)]
    names = [part.strip() for part in device.split(",")]
    if any(not name.startswith("cuda:") for name in names) or len(set(names)) != len(names):
        raise SearchError(
            f"--device {device!r}: several devices must be distinct CUDA devices such as 'cuda:0,cuda:1'; for "
            "several workers on one device use --workers N."
        )
    return [check_device(name) for name in names]


def default_study_name(model: str) -> str:
    """A file-system friendly name from a model target: 'examples.toy:model' -> 'examples.toy-model'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-") or "study"


def search(options: SearchOptions, progress: ProgressCallback | None = None) -> SearchResult | None:
    """Run (or resume) the study described by `options`, confirm its best trials and export the winner.

    None when the study is shared and another host's search confirms and exports it.
    """
    return _Search(options, progress or quiet).run()


def explore(options: SearchOptions, progress: ProgressCallback | None = None) -> optuna.Study:
    """Baselines and trials up to `options.trials`; no confirmation, no export.

    `autotune retune` runs its short warm-started search this way and decides on its own measurements.
    """
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
        self.reporting = threading.Lock()
        self.plan = Plan(
            confirmation=(options.confirm + 2) * options.rounds if options.confirm else 0,
            cache=2 if options.compile_cache else 0,
        )
        workload = resolve(options.model, isolated=True)
        batches = workload.draw_batches(seed=options.seed)
        self.summary = workload.summary(options.model, batches)
        self.model_fingerprint = environment.model_fingerprint(workload.model, environment.batch_shapes(batches))
        self.shared_lengths = shared_length_groups(self.summary, batches)
        self.base_space = load_space(options.space)
        self.harness = Harness(
            spec=options.model,
            summary=self.summary,
            device=str(options.device),
            seed=options.seed,
            protocol=options.protocol,
            timeout=options.trial_timeout,
        )
        options.out_dir.mkdir(parents=True, exist_ok=True)
        self.study = self._open_study()
        self.loop = TrialLoop(
            self.study, self.harness, options, self.objective, self._report, objectives=self.objectives
        )

    def _forget_new_study(self) -> None:
        """Remove a study this session created when it failed before its first trial: no empty study is left."""
        if not self.new_study or self.study.get_trials(deepcopy=False):
            return
        storage = open_storage(self.options.storage_url)
        optuna.delete_study(study_name=self.study.study_name, storage=storage)
        if self.options.storage is None and not optuna.get_all_study_summaries(storage):
            (self.options.out_dir / "study.db").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.options.out_dir.rmdir()  # only when empty

    def _open_study(self) -> optuna.Study:
        options = self.options
        created = not (options.out_dir / "study.db").exists() if options.storage is None else False
        if self.objectives.multi:
            # Optuna's pruners judge one objective: a multi-objective study prunes for slowness only.
            directions: dict[str, Any] = {"directions": self.objectives.directions}
            pruner: optuna.pruners.BasePruner = optuna.pruners.NopPruner()
        else:
            directions, pruner = {"direction": self.objective.direction}, _pruner(options)
        heartbeat = options.liveness.storage_kwargs() if options.shared else None
        study = create_study(
            options.name,
            options.storage_url,
            heartbeat=heartbeat,
            sampler=_sampler(options),
            pruner=pruner,
            **directions,
        )
        attrs = study.user_attrs
        self.new_study = created or not attrs
        for key, wanted, flag in (
            ("objective", str(self.objectives), "--objective"),
            ("model", options.model, "--model"),
            ("device", options.device, "--device"),
        ):
            if attrs.get(key) is not None and attrs.get(key) != wanted:
                raise SearchError(
                    f"study {options.name!r} was started with {flag} {attrs[key]}, not {wanted}: its trials would not "
                    "compare with new ones; use another --study-name (or --out), or the same setting."
                )
        recorded = attrs.get("environment") or {}
        compared = [key for key in ("torch", "cuda", "python") if key in recorded]
        changed = environment.differences(recorded, environment.fingerprint("cpu"), compared)
        if changed and not options.reuse_since:
            what = ", ".join(f"{key} {old} there, {new} here" for key, (old, new) in changed.items())
            raise SearchError(
                f"study {options.name!r} was measured in another environment ({what}): its trials would not compare "
                "with new ones. Use another --study-name (or --out) for a new search, or `autotune retune` on its "
                "best.yaml to re-measure it here."
            )
        study.set_user_attr("objective", str(self.objectives))
        study.set_user_attr("pick", str(parse_pick(options.pick)))
        study.set_user_attr("model", options.model)
        study.set_user_attr("device", options.device)
        study.set_user_attr("workload", self.summary.to_dict())
        study.set_user_attr("model_fingerprint", self.model_fingerprint)
        settings = {"sampler": options.sampler, "pruner": options.pruner, "seed": options.seed}
        settings["protocol"] = options.protocol.to_dict()
        settings["allow_precision_changes"] = options.allow_precision_changes
        settings["storage"] = options.storage_url if options.storage else "study.db"
        study.set_user_attr("settings", settings)
        study.set_user_attr("space", self.base_space.name)
        return study

    def run(self) -> SearchResult | None:
        if self.options.doctor and "doctor" not in self.study.user_attrs:
            self._diagnose()
        self.explore()
        if self.loop.shared and not self._confirms():
            return None
        campaign = _confirm(self)
        if campaign is not None and not any(campaign.complete_runs(name) for name in campaign.subjects):
            failures = "; ".join(
                f"{name}: {failure.reason}" for name in campaign.subjects if (failure := campaign.failure(name))
            )
            raise SearchError(
                f"every confirmation run failed ({failures}), so nothing was measured to choose from; nothing was "
                f"exported and the files in {self.options.out_dir} are as they were. The trials are kept in the study."
            )
        self.study.set_user_attr("search_wall_seconds", round(time.monotonic() - self.started, 1))
        if self.options.compile_cache:
            self._save_compile_cache(campaign_of(self.study)[0])
        return export_study(self.study, self.options.out_dir)

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
        except AutotuneError as exc:
            self._note(f"doctor: could not analyse the workload ({exc}); searching anyway")
            return
        self.study.set_user_attr("doctor", found.to_dict())
        self._note(f"doctor: {found.verdict()}{'' if found.clean else ' (`autotune doctor` for details)'}")

    def explore(self) -> None:
        """Baselines, then trials until --trials, --timeout, too many failures or an exhausted space."""
        self.loop.reap_abandoned()
        self.completed_before = self.loop.started() >= self.options.trials and not self.loop.running()
        removed = remove_abandoned_workdirs()
        if removed:
            self._note(f"removed {removed} trial folder(s) left behind by a search that was killed")
        try:
            self.loop.baselines = _baselines(self)
        except SearchError:
            self._forget_new_study()
            raise
        graph_breaks = int(self.loop.baselines["compile"].get("graph_breaks", 0) or 0)
        space: SearchSpace = self.base_space.adapt(
            self.summary,
            str(self.options.device),
            graph_breaks=graph_breaks,
            shared_lengths=self.shared_lengths,
            allow_precision_changes=self.options.allow_precision_changes,
        )
        self.loop.space = space
        dropped = "".join(f"; dropped {d}" for d in space.dropped)
        self._note(f"space '{space.name}': {len(space.dimensions())} dimensions{dropped}")
        if self.options.recipes and self.options.sampler != "bruteforce" and not self.study.get_trials(deepcopy=False):
            # A new study only: on resume the seeds are trials already, run or waiting in the queue.
            seeds = expert_recipes(self.summary)
            for note in seed_study(self.study, space, seeds, limit=max(1, self.options.trials // 2)):
                self._note(note)
        self.plan.trials = max(self.options.trials - self.loop.started(), 0)
        waiting = False
        workers = worker_devices(self.options.devices, self.options.workers or 1)
        if len(workers) > 1:
            shared = ", ".join(f"{workers.count(d)} on {d}" for d in dict.fromkeys(workers))
            self._note(f"{len(workers)} workers ({shared}): compiles run side by side, measurements one at a time")
            self.plan.workers = len(workers)
        while True:
            if len(workers) > 1:
                TrialPool(self.loop, workers, more=self._more_trials, finished_one=self._finished_one).run()
            while self._more_trials():
                self.plan.run_started = time.monotonic()
                self.loop.one_trial()
                self._finished_one()
            if not self._others_finish_the_budget():
                break
            if not waiting:
                self._note(
                    f"all {self.options.trials} trials of the study have started: waiting for other searches' last"
                )
                waiting = True
            time.sleep(self.options.heartbeat_interval)
        self.plan.trials = 0

    def _finished_one(self) -> None:
        self.plan.run_started = None
        self.plan.trials = max(self.options.trials - self.loop.started(), 0)
        self.plan.typical_run = self.loop.typical_seconds() or self.plan.typical_run

    def _others_finish_the_budget(self) -> bool:
        """Whether other searches of a shared study run the trials that complete its budget: the confirmation waits."""
        return self.loop.shared and self.loop.started() >= self.options.trials and self.loop.running() > 0

    def _confirms(self) -> bool:
        """Whether this search confirms and exports the shared study it searched; says why not.

        The search that finished the study's last trial does, so that one host confirms,
        after every trial; so does a search started once the budget was complete (how a
        confirmation lost with its host is done again).
        """
        if self.completed_before:
            return True
        export = f"`autotune export --storage {shown(self.options.storage_url)} --study-name {self.options.name}`"
        if self.loop.running():
            self._note(f"other searches still run trials of the study: the last to finish confirms; then {export}")
            return False
        done = [t for t in self.loop.finished() if t.datetime_complete and t.user_attrs.get("reason") != "abandoned"]
        last = max(done, key=lambda t: (t.datetime_complete, t.number), default=None)
        mine = (socket.gethostname(), os.getpid())
        if last is None or (last.user_attrs.get("host"), last.user_attrs.get("pid")) == mine:
            return True
        self._note(
            f"the study's trials are done; the search that finished the last one (trial {last.number}: pid "
            f"{last.user_attrs.get('pid')} on {last.user_attrs.get('host')}) confirms and exports; then {export} "
            "writes the files here"
        )
        return False

    def _more_trials(self) -> bool:
        # A dead search's trials first: each frees its place in the budget, or queues its retry.
        self.loop.reap_abandoned()
        finished = self.loop.finished()
        if self.loop.started() >= self.options.trials:
            return False
        if self.loop.exhausted:
            self._note(f"every configuration of the space was measured after {len(finished)} trials")
            return False
        if self.options.timeout is not None and time.monotonic() - self.started > self.options.timeout:
            self._note(f"--timeout {self.options.timeout:.0f} s reached after {len(finished)} trials")
            return False
        failed = [t for t in finished if t.state == optuna.trial.TrialState.FAIL]
        if len(finished) >= 5 and len(failed) / len(finished) > self.options.max_failure_rate:
            reasons = sorted({t.user_attrs.get("reason", "?") for t in failed})
            note = (
                f"stopped searching: {len(failed)} of {len(finished)} trials failed, more than --max-failure-rate "
                f"{self.options.max_failure_rate:.0%} (reasons: {', '.join(reasons)}); what completed is still confirmed"
            )
            self.study.set_user_attr("stopped", note)
            self._note(note)
            return False
        return True

    def _save_compile_cache(self, campaign: measurement.Campaign) -> None:
        """Save the exported configuration's compile artifacts beside best.yaml, and time compiling with them."""
        choice = exported_choice(self.study, campaign)
        if choice.config.scope == "none":
            return
        self.plan.run_started = time.monotonic()
        self._report(choice.trial, "compile cache: cold, then warm")
        created = campaign.subjects[choice.subject].created
        section, staged = record_compile_cache(self.harness, choice.config, created, self.options.out_dir)
        if staged is not None:
            os.replace(staged, self.options.out_dir / "compile_cache.bin")
        self.study.set_user_attr("compile_cache", {**section, "subject": choice.subject})
        self._note(compile_cache.describe(section))

    # -- display -----------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        self._report(None, "", message)

    def _report(self, trial: int | None, phase: str, message: str = "") -> None:
        with self.reporting:  # a pool's workers report from their threads
            done = len(self.loop.finished())
            eta = self.plan.eta(time.monotonic())
            self.progress(Progress(done, self.options.trials, trial, phase, eta, message))


def _baselines(search: _Search) -> dict[str, dict[str, Any]]:
    """Eager and plain torch.compile, measured once per search session for pruning and the trials' speedups."""
    baselines: dict[str, dict[str, Any]] = {}
    for subject in Subject.baselines():
        search.plan.run_started = time.monotonic()
        search._report(None, f"baseline: {subject.description}")
        created = utc_now()
        run = run_trial(search.harness.request(subject.config, created=created))
        search.plan.baselines -= 1
        search.plan.run_started = None
        if subject.name == "compile" and search.plan.typical_run is None:
            search.plan.typical_run = run.wall_seconds
        record = run.record()
        if not record.complete and subject.name == "eager":
            raise SearchError(
                f"the workload does not run eagerly, so there is nothing to compare with: {record.reason}: "
                f"{record.message}\n{record.stderr_tail}"
            )
        baselines[subject.name] = record.to_dict()
        if subject.name == "compile" and (record.complete or record.reason in DETERMINISTIC_FAILURES):
            # A plain trial would compile the same code again: its outcome is this run's (see `TrialLoop.plain_run`).
            search.loop.plain_run = (run, created)
        search.study.set_user_attr(f"baseline.{subject.name}", baselines[subject.name])
        if run.environment:
            search.study.set_user_attr("environment", run.environment)
            search.loop.host = environment.host_key(run.environment)
    # Each host's own baselines, under its key: a study several hosts share compares every
    # trial with the baselines of the host that ran it (the trial's `baselines_of`).
    search.study.set_user_attr(
        f"baselines.{search.loop.host}",
        {"host": socket.gethostname(), "environment": run.environment, "measured": utc_now(), **baselines},
    )
    return baselines


def _confirm(search: _Search) -> measurement.Campaign | None:
    """Re-measure the best trials with both baselines in rotated rounds; store the campaign in the study."""
    count = search.options.confirm
    top = search.loop.front_distinct(count) if search.objectives.multi else search.loop.best_distinct(count)
    complete = [t for t in search.loop.finished() if t.state == optuna.trial.TrialState.COMPLETE]
    if not top and (not count or not complete):
        return None
    which = "Pareto-front" if search.objectives.multi else "best"
    what = (
        f"the {which} {len(top)} trial(s) against eager and plain torch.compile"
        if top
        else "eager against plain torch.compile (every complete trial compiled plain torch.compile itself)"
    )
    search._note(f"confirming {what}: {search.options.rounds} to {search.options.max_rounds} rotated rounds")
    subjects = Subject.baselines() + [
        Subject(
            name=f"trial {t.number}",
            config=CompileConfig.from_dict(t.user_attrs["config"]),
            created=t.user_attrs.get("created"),
            trial=t.number,
        )
        for t in top
    ]

    search.plan.confirmation = len(subjects) * search.options.rounds
    search.plan.run_started = time.monotonic()
    search._report(None, "confirmation")

    def shown(name: str, index: int, record: Any) -> None:
        search.plan.confirmation = max(search.plan.confirmation - 1, 0)
        search.plan.run_started = time.monotonic()
        search._report(None, "confirmation")  # the same phase: only the ETA moves
        outcome = (
            f"{record.samples_per_second:.4g} samples/s" if record.complete else f"{record.state} ({record.reason})"
        )
        noisy = f"  [noisy: {record.noisy}]" if record.noisy else ""
        search._note(f"confirm round {index + 1}: {name}: {outcome}{noisy}")

    campaign = measurement.measure(
        search.harness,
        subjects,
        objective=search.objective,
        min_rounds=search.options.rounds,
        max_rounds=search.options.max_rounds,
        on_run=shown,
    )
    search.plan.confirmation, search.plan.run_started = 0, None
    search.study.set_user_attr("confirmation", campaign.to_dict())
    noise = campaign.noise()
    if noise["noisy_runs"]:
        search._note(
            f"the machine was busy during {noise['noisy_runs']} of {noise['runs']} confirmation runs "
            f"(load {noise.get('load')}); those were measured again"
        )
    return campaign


def _sampler(options: SearchOptions) -> optuna.samplers.BaseSampler:
    seed = _sampler_seed(options)
    if options.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if options.sampler == "bruteforce":
        # Optuna marks the brute-force sampler experimental; the warning says nothing a user can act on.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.BruteForceSampler(seed=seed)
    # The constant liar scores trials still running (a pool's other workers, other hosts) as bad ones, so that
    # trials asked together do not all land on the same promising region.
    return optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=min(10, max(3, options.trials // 3)), constant_liar=True
    )


def _sampler_seed(options: SearchOptions) -> int:
    """--seed; in a shared study mixed with the host and process, or every host would propose the same trials.

    Samplers draw from their own seeded generator, so two hosts with one seed ask for the same
    configurations in the same order: half the budget would go to twins.
    """
    if not options.shared:
        return options.seed
    mixed = hashlib.sha256(f"{options.seed}:{socket.gethostname()}:{os.getpid()}".encode()).digest()
    return int.from_bytes(mixed[:4], "little")


def _pruner(options: SearchOptions) -> optuna.pruners.BasePruner:
    if options.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=2, max_resource=options.protocol.windows)
    if options.pruner == "none":
        return optuna.pruners.NopPruner()
    # Half the windows of warm-up and three trials to compare with: early windows, and a median of
    # two trials, stopped good trials on a busy machine. A trial measured while the calibration
    # probe said the machine was busy is not judged at all (`Monitor`).
    return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=max(2, options.protocol.windows // 2))
