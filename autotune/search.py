"""The study loop: baselines, ask → run a worker → tell, pruning, confirmation of the best, export.

Optuna is driven with explicit ask/tell so that every trial runs in its own process
(`runner.run_trial`) and every outcome, failures included, is recorded in the study.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import socket
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from autotune import codegen, compile_cache, environment
from autotune.config import CompileConfig, InputKey
from autotune.errors import AutotuneError, ConfigError, SpaceError
from autotune.measure import Protocol
from autotune.runner import TrialRequest, TrialRun, check_device, record_of, run_trial
from autotune.space import SearchSpace, load_space
from autotune.workload import WorkloadSummary, input_of, resolve

__all__ = [
    "Objective",
    "Progress",
    "SearchError",
    "SearchOptions",
    "SearchResult",
    "default_study_name",
    "explore",
    "search",
]

SAMPLERS = ("tpe", "random", "bruteforce")
PRUNERS = ("median", "hyperband", "none")
BASELINES = ("eager", "compile")


class SearchError(AutotuneError):
    """The search cannot start or cannot go on (bad options, too many failures, nothing measured)."""


@dataclass(frozen=True)
class Objective:
    """What the study optimises: steady-state throughput, or compile time plus N steps."""

    kind: str = "throughput"
    steps: int = 0

    @classmethod
    def parse(cls, text: str) -> Objective:
        """'throughput' or 'time-to:N' (N steps)."""
        if text == "throughput":
            return cls()
        match = re.fullmatch(r"time-to:(\d+)", text)
        if not match or int(match.group(1)) < 1:
            raise SearchError(
                f"--objective {text!r} is not allowed; use 'throughput' or 'time-to:N' with N >= 1 steps."
            )
        return cls("time-to", int(match.group(1)))

    @property
    def direction(self) -> str:
        return "maximize" if self.kind == "throughput" else "minimize"

    @property
    def unit(self) -> str:
        return "samples/s" if self.kind == "throughput" else f"s (compile + {self.steps} steps)"

    def __str__(self) -> str:
        return self.kind if self.kind == "throughput" else f"time-to:{self.steps}"

    def value(self, samples_per_second: float, batches_per_second: float, compile_seconds: float) -> float:
        """The objective for one measurement."""
        if self.kind == "throughput":
            return samples_per_second
        return compile_seconds + self.steps / max(batches_per_second, 1e-9)

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "maximize" else a < b


@dataclass(kw_only=True)
class SearchOptions:
    """Everything `autotune search` takes; the CLI flags map one to one."""

    model: str
    space: str = "default"
    trials: int = 20
    timeout: float | None = None
    trial_timeout: float = 900.0
    device: str | None = None
    out: str | None = None
    study_name: str | None = None
    storage: str | None = None
    sampler: str = "tpe"
    pruner: str = "median"
    seed: int = 0
    objective: str = "throughput"
    max_compile_seconds: float | None = None
    max_failure_rate: float = 0.8
    slow_ratio: float = 0.5
    """Prune a trial whose windows run below this fraction of eager's throughput."""
    confirm: int = 3
    """Re-measure this many of the best trials, interleaved with the baselines, before choosing."""
    protocol: Protocol = field(default_factory=Protocol)
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
        if not 0 <= self.slow_ratio < 1:
            raise SearchError(f"--slow-ratio {self.slow_ratio}: must be in [0, 1); 0 never prunes for slowness.")
        if self.confirm < 0:
            raise SearchError(f"--confirm {self.confirm}: must be >= 0.")
        self.device = check_device(self.device)
        Objective.parse(self.objective)

    @property
    def name(self) -> str:
        return self.study_name or default_study_name(self.model)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path("outputs") / self.name

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{(self.out_dir / 'study.db').resolve()}"


@dataclass
class Progress:
    """What the search is doing, for a live display."""

    done: int
    total: int
    trial: int | None
    phase: str
    best_value: float | None
    best_speedup: float | None
    eta_seconds: float | None
    message: str = ""


@dataclass(kw_only=True)
class SearchResult:
    """Where the exported files are, and the numbers behind the choice."""

    out_dir: Path
    best_number: int | None
    tuned_path: Path | None
    table: list[dict[str, Any]]
    baselines: dict[str, dict[str, Any]]
    summary: dict[str, Any]


ProgressCallback = Callable[[Progress], None]


def default_study_name(model: str) -> str:
    """A file-system friendly name from a model target: 'examples.toy:model' -> 'examples.toy-model'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-") or "study"


def search(options: SearchOptions, progress: ProgressCallback | None = None) -> SearchResult:
    """Run (or resume) the study described by `options` and export its winner."""
    return _Search(options, progress or (lambda p: None)).run()


def explore(options: SearchOptions, progress: ProgressCallback | None = None) -> optuna.Study:
    """Baselines (unless the study records them) and trials up to `options.trials`; no confirmation, no export.

    `autotune retune` runs its short warm-started search this way and decides on its own measurements.
    """
    run = _Search(options, progress or (lambda p: None))
    run.explore()
    return run.study


class _Search:
    def __init__(self, options: SearchOptions, progress: ProgressCallback) -> None:
        self.options = options
        self.progress = progress
        self.objective = Objective.parse(options.objective)
        self.started = time.monotonic()
        self.workload = resolve(options.model)
        batches = self.workload.draw_batches(seed=options.seed)
        self.summary: WorkloadSummary = self.workload.summary(options.model, batches)
        self.model_fingerprint = environment.model_fingerprint(self.workload.model, environment.batch_shapes(batches))
        self.shared_lengths = shared_length_groups(self.summary, batches)
        self.base_space = load_space(options.space)
        self.options.out_dir.mkdir(parents=True, exist_ok=True)
        self.study = self._open_study()
        self.space: SearchSpace | None = None
        self.exhausted = False

    # -- the study -------------------------------------------------------------------------

    def _open_study(self) -> optuna.Study:
        options = self.options
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler: optuna.samplers.BaseSampler = {
            "tpe": lambda: optuna.samplers.TPESampler(
                seed=options.seed, n_startup_trials=min(10, max(3, options.trials // 3))
            ),
            "random": lambda: optuna.samplers.RandomSampler(seed=options.seed),
            "bruteforce": lambda: _quietly(optuna.samplers.BruteForceSampler, seed=options.seed),
        }[options.sampler]()
        pruner: optuna.pruners.BasePruner = {
            "median": lambda: optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1),
            "hyperband": lambda: optuna.pruners.HyperbandPruner(min_resource=1, max_resource=options.protocol.windows),
            "none": lambda: optuna.pruners.NopPruner(),
        }[options.pruner]()
        study = optuna.create_study(
            study_name=options.name,
            storage=options.storage_url,
            sampler=sampler,
            pruner=pruner,
            direction=self.objective.direction,
            load_if_exists=True,
        )
        recorded = study.user_attrs.get("objective")
        if recorded and recorded != str(self.objective):
            raise SearchError(
                f"study {options.name!r} was started with --objective {recorded}, not {self.objective}; "
                "use another --study-name or the same objective."
            )
        if recorded and study.user_attrs.get("model") != options.model:
            raise SearchError(f"study {options.name!r} tunes {study.user_attrs.get('model')!r}, not {options.model!r}.")
        study.set_user_attr("objective", str(self.objective))
        study.set_user_attr("model", options.model)
        study.set_user_attr("workload", self.summary.to_dict())
        study.set_user_attr("model_fingerprint", self.model_fingerprint)
        study.set_user_attr(
            "settings",
            {
                "sampler": options.sampler,
                "pruner": options.pruner,
                "seed": options.seed,
                "protocol": options.protocol.to_dict(),
                "storage": options.storage_url if options.storage else "study.db",
            },
        )
        study.set_user_attr("space", self.base_space.name)
        study.set_user_attr("device", options.device)
        self._fail_abandoned(study)
        return study

    def _fail_abandoned(self, study: optuna.Study) -> None:
        """Trials left RUNNING by a search of this host that was killed are recorded as failed."""
        host = socket.gethostname()
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            owner = trial.user_attrs.get("host"), trial.user_attrs.get("pid")
            if owner[0] == host and not _alive(owner[1]):
                study.tell(trial.number, state=optuna.trial.TrialState.FAIL)

    def run(self) -> SearchResult:
        self.explore()
        from autotune.export import export_study

        self.study.set_user_attr("confirmation", self._confirm())
        self.study.set_user_attr("search_wall_seconds", round(time.monotonic() - self.started, 1))
        if self.options.compile_cache:
            self._save_compile_cache()
        return export_study(self.study, self.options.out_dir)

    def explore(self) -> None:
        """Baselines, then trials until --trials, --timeout or an exhausted space."""
        self.baselines = self._baselines()
        graph_breaks = int(self.baselines["compile"].get("graph_breaks", 0) or 0)
        self.space = self.base_space.adapt(
            self.summary, str(self.options.device), graph_breaks=graph_breaks, shared_lengths=self.shared_lengths
        )
        self._note(
            f"space '{self.space.name}': {len(self.space.dimensions())} dimensions"
            + "".join(f"; dropped {d}" for d in self.space.dropped)
        )
        while self._more_trials():
            self._one_trial()

    def _finished(self) -> list[optuna.trial.FrozenTrial]:
        states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
        return self.study.get_trials(deepcopy=False, states=states)

    def _more_trials(self) -> bool:
        finished = self._finished()
        if len(finished) >= self.options.trials:
            return False
        if self.exhausted:
            self._note(f"every configuration of the space was measured after {len(finished)} trials")
            return False
        if self.options.timeout is not None and time.monotonic() - self.started > self.options.timeout:
            self._note(f"--timeout {self.options.timeout:.0f} s reached after {len(finished)} trials")
            return False
        failed = [t for t in finished if t.state == optuna.trial.TrialState.FAIL]
        if len(finished) >= 5 and len(failed) / len(finished) > self.options.max_failure_rate:
            reasons = statistics.multimode(t.user_attrs.get("reason", "?") for t in failed)
            raise SearchError(
                f"{len(failed)} of {len(finished)} trials failed (more than --max-failure-rate "
                f"{self.options.max_failure_rate:.0%}); most common reason: {', '.join(reasons)}. "
                f"See {self.options.out_dir / 'trials.csv'} after `autotune export`, or fix the workload."
            )
        return True

    # -- baselines -------------------------------------------------------------------------

    def _baselines(self) -> dict[str, dict[str, Any]]:
        baselines: dict[str, dict[str, Any]] = {}
        for name in BASELINES:
            key = f"baseline.{name}"
            if key in self.study.user_attrs:
                baselines[name] = self.study.user_attrs[key]
                continue
            self._report(None, f"baseline {name}")
            run = self._measure(None if name == "eager" else CompileConfig(), label=f"baseline {name}")
            record = record_of(run)
            if run.state != "complete" and name == "eager":
                raise SearchError(
                    f"the workload does not run eagerly, so there is nothing to compare with: {run.reason}: "
                    f"{run.message}\n{run.stderr_tail}"
                )
            baselines[name] = record
            self.study.set_user_attr(key, record)
            if run.environment:
                self.study.set_user_attr("environment", run.environment)
        return baselines

    # -- trials ----------------------------------------------------------------------------

    def _one_trial(self) -> None:
        assert self.space is not None
        trial = self.study.ask()
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr("pid", os.getpid())
        try:
            config = self.space.suggest(trial)
        except SpaceError as exc:
            self._tell_failed(trial, "invalid_config", str(exc))
            return
        trial.set_user_attr("config", config.to_dict())
        trial.set_user_attr("description", config.describe())
        twin = self._same_config(config, trial.number)
        if twin is not None:
            # The sampler proposed a configuration already measured: reuse its outcome, not the machine's time.
            self._copy_outcome(trial, twin)
            return
        created = _now()
        try:
            source = codegen.generate(config, self.summary, created=created, version=environment.version())
        except ConfigError as exc:
            self._tell_failed(trial, "invalid_config", str(exc))
            return
        trial.set_user_attr("created", created)
        trial.set_user_attr("source_sha256", hashlib.sha256(source.encode()).hexdigest())
        self._report(trial.number, f"trial {trial.number}: starting")
        run = self._measure(config, label=f"trial {trial.number}", source=source, trial=trial)
        for key, value in record_of(run).items():
            trial.set_user_attr(key, value)
        if run.state == "complete":
            value = self.objective.value(
                run.result["samples_per_second"], run.result["batches_per_second"], run.result["compile_seconds"]
            )
            self._tell(trial, value)
            self._note(f"trial {trial.number}: {value:.4g} {self.objective.unit}  {config.describe()}")
        elif run.state == "pruned":
            self._tell(trial, state=optuna.trial.TrialState.PRUNED)
            self._note(f"trial {trial.number}: pruned ({run.message})  {config.describe()}")
        else:
            self._tell(trial, state=optuna.trial.TrialState.FAIL)
            self._note(f"trial {trial.number}: FAIL {run.reason}: {run.message}  {config.describe()}")

    def _tell(self, trial: optuna.Trial | int, *args: Any, **kwargs: Any) -> None:
        try:
            self.study.tell(trial, *args, **kwargs)
        except RuntimeError as exc:
            # The brute-force sampler asks the study to stop once every configuration was tried;
            # with ask/tell that request arrives as this error, after the trial was recorded.
            if "Study.stop" not in str(exc):
                raise
            self.exhausted = True

    def _tell_failed(self, trial: optuna.Trial, reason: str, message: str) -> None:
        trial.set_user_attr("reason", reason)
        trial.set_user_attr("message", message)
        self._tell(trial, state=optuna.trial.TrialState.FAIL)
        self._note(f"trial {trial.number}: FAIL {reason}: {message}")

    def _same_config(self, config: CompileConfig, number: int) -> optuna.trial.FrozenTrial | None:
        wanted = config.to_dict()
        for other in self._finished():
            if other.number < self.options.reuse_since:
                continue
            if (
                other.number != number
                and other.user_attrs.get("config") == wanted
                and "duplicate_of" not in other.user_attrs
            ):
                return other
        return None

    def _copy_outcome(self, trial: optuna.Trial, twin: optuna.trial.FrozenTrial) -> None:
        for key, value in twin.user_attrs.items():
            if key not in ("host", "pid"):
                trial.set_user_attr(key, value)
        trial.set_user_attr("duplicate_of", twin.number)
        if twin.state == optuna.trial.TrialState.COMPLETE:
            self._tell(trial, twin.value)
        else:
            self._tell(trial, state=twin.state)
        self._note(f"trial {trial.number}: same configuration as trial {twin.number}; its outcome is reused")

    def _measure(
        self,
        config: CompileConfig | None,
        *,
        label: str,
        source: str | None = None,
        trial: optuna.Trial | None = None,
    ) -> TrialRun:
        if config is not None and source is None:
            source = codegen.generate(config, self.summary, created=_now(), version=environment.version())
        return run_trial(self._request(config, source), _Monitor(self, trial, label))

    def _request(self, config: CompileConfig | None, source: str | None) -> TrialRequest:
        """A worker request for `source` (None: eager) under this search's device, seed and protocol."""
        return TrialRequest(
            spec=self.options.model,
            source=source,
            device=str(self.options.device),
            seed=self.options.seed,
            protocol=self.options.protocol.to_dict(),
            uses_cuda_graphs=bool(config and config.uses_cuda_graphs),
            timeout=self.options.trial_timeout,
        )

    # -- confirmation ------------------------------------------------------------------------

    def _confirm(self) -> dict[str, Any]:
        """Re-measure the best trials in fresh processes, between an eager and a plain-compile run."""
        complete = [
            t
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if "duplicate_of" not in t.user_attrs
        ]
        reverse = self.objective.direction == "maximize"
        top = sorted(complete, key=lambda t: t.value or 0.0, reverse=reverse)[: self.options.confirm]
        if not top:
            return {}
        self._note(f"confirming the best {len(top)} trial(s), interleaved with eager and plain torch.compile")
        self._report(None, "confirm: eager")
        confirmation: dict[str, Any] = {"eager": record_of(self._measure(None, label="confirm eager")), "trials": {}}
        for trial in top:
            self._report(trial.number, "confirm")
            config = CompileConfig.from_dict(trial.user_attrs["config"])
            source = codegen.generate(
                config, self.summary, created=trial.user_attrs["created"], version=environment.version()
            )
            record = record_of(self._measure(config, label=f"confirm trial {trial.number}", source=source))
            confirmation["trials"][str(trial.number)] = record
            outcome = (
                f"{record['samples_per_second']:.4g} samples/s" if record["state"] == "complete" else record["reason"]
            )
            self._note(f"confirm trial {trial.number}: {outcome}")
        self._report(None, "confirm: plain torch.compile")
        confirmation["compile"] = record_of(self._measure(CompileConfig(), label="confirm compile"))
        return confirmation

    def _save_compile_cache(self) -> None:
        """Save the winner's compile artifacts beside best.yaml, and time compiling with and without them."""
        from autotune.export import choose_winner

        winner = choose_winner(self.study)
        if winner is None:
            return
        self._report(winner.number, "compile cache: cold, then warm")
        config = CompileConfig.from_dict(winner.user_attrs["config"])
        source = codegen.generate(
            config, self.summary, created=winner.user_attrs["created"], version=environment.version()
        )
        section, staged = compile_cache.record_compile_cache(self._request(config, source), self.options.out_dir)
        if staged is not None:
            os.replace(staged, self.options.out_dir / compile_cache.CACHE_FILE)
        self.study.set_user_attr("compile_cache", {**section, "trial": winner.number})
        self._note(compile_cache.describe(section))

    # -- display -----------------------------------------------------------------------------

    def _note(self, message: str) -> None:
        self._report(None, "", message)

    def _report(self, trial: int | None, phase: str, message: str = "") -> None:
        finished = self._finished()
        best_value = best_speedup = None
        try:
            best = self.study.best_trial
        except ValueError:
            best = None
        if best is not None:
            best_value = best.value
            eager = getattr(self, "baselines", {}).get("eager", {}).get("samples_per_second")
            sps = best.user_attrs.get("samples_per_second")
            best_speedup = sps / eager if eager and sps else None
        durations = [t.user_attrs.get("wall_seconds", 0.0) for t in finished if "duplicate_of" not in t.user_attrs]
        remaining = self.options.trials - len(finished)
        eta = statistics.median(durations) * remaining if durations and remaining > 0 else None
        self.progress(
            Progress(len(finished), self.options.trials, trial, phase, best_value, best_speedup, eta, message)
        )


class _Monitor:
    """Watches one worker's events: phase changes for the display, windows for the pruner."""

    def __init__(self, search: _Search, trial: optuna.Trial | None, label: str) -> None:
        self.search = search
        self.trial = trial
        self.label = label
        self.phase = "start"
        self.phase_started = time.monotonic()
        self.compile_seconds = 0.0
        self.windows: list[float] = []

    def __call__(self, event: dict[str, Any] | None) -> str | None:
        limit = self.search.options.max_compile_seconds
        if event is None:
            if self.phase == "compile" and limit and time.monotonic() - self.phase_started > limit:
                return f"compile ran past --max-compile-seconds {limit:.0f}"
            return None
        kind = event["event"]
        if kind == "phase":
            self.phase, self.phase_started = event["phase"], time.monotonic()
            self.search._report(self.trial.number if self.trial else None, f"{self.label}: {self.phase}")
        elif kind == "compiled":
            self.compile_seconds = float(event["compile_seconds"])
            if limit and self.compile_seconds > limit:
                return f"compile took {self.compile_seconds:.0f} s > --max-compile-seconds {limit:.0f}"
        elif kind == "window" and self.trial is not None:
            return self._window(event)
        return None

    def _window(self, event: dict[str, Any]) -> str | None:
        assert self.trial is not None
        objective = self.search.objective
        value = objective.value(event["samples_per_second"], event["batches_per_second"], self.compile_seconds)
        step = int(event["index"])
        self.trial.report(value, step)
        self.windows.append(event["samples_per_second"])
        if self.trial.should_prune():
            return f"the {self.search.options.pruner} pruner stopped it at window {step} ({value:.4g} {objective.unit})"
        eager = self.search.baselines.get("eager", {}).get("samples_per_second")
        ratio = self.search.options.slow_ratio
        if eager and len(self.windows) >= 2 and statistics.median(self.windows) < ratio * eager:
            return f"{statistics.median(self.windows):.4g} samples/s is below {ratio:.0%} of eager's {eager:.4g}"
        return None


def shared_length_groups(summary: WorkloadSummary, batches: Sequence[Any]) -> list[list[tuple[InputKey, int]]]:
    """Declared (input, axis) pairs grouped by equal lengths in every batch (e.g. input_ids/labels/attention_mask)."""
    signature: dict[tuple[int, ...], list[tuple[InputKey, int]]] = {}
    for key, axes in summary.dynamic_dims.items():
        for axis in axes:
            lengths = tuple(int(input_of(b, key).shape[axis]) for b in batches)
            signature.setdefault(lengths, []).append((key, axis))
    return list(signature.values())


def _quietly(factory: Callable[..., Any], **kwargs: Any) -> Any:
    # Optuna marks some samplers experimental; the warning says nothing a user of autotune can act on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return factory(**kwargs)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
