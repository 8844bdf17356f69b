"""One trial of a search: ask the study, sample a configuration, run it in a worker with pruning, tell the outcome.

A configuration the study already measured is not measured again when its outcome does
not depend on the machine's mood (complete, or failed for a reason such as an accuracy
mismatch or a graph break); a pruned, timed-out or crashed twin is measured again, since
noise may have caused that outcome.

In a study several hosts share (a database server), each running trial beats
(`autotune.study.heartbeat`) and a silent one is failed by whichever search notices; in a
SQLite study, on one host, a trial whose search's process is gone is failed instead.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import socket
import statistics
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import optuna

from autotune.errors import ConfigError, SpaceError
from autotune.runtime.config import CompileConfig, is_plain_compile
from autotune.study.campaign import PROBE_SLOWDOWN, Harness
from autotune.study.format import utc_now
from autotune.study.heartbeat import Heartbeat, beats, fail_stale, grace_period, retried_numbers
from autotune.study.objective import Objective, Objectives, trial_value
from autotune.study.pareto import subjects_to_confirm
from autotune.study.space import SearchSpace
from autotune.trial.gate import GateClosed, MeasurementGate
from autotune.trial.request import TrialRun
from autotune.trial.runner import process_alive, run_trial

__all__ = ["DETERMINISTIC_FAILURES", "LoopOptions", "Monitor", "TrialLoop", "compile_limit"]

MIN_COMPILE_BUDGET = 60.0
"""Seconds the compile budget never goes below: a model that compiles in seconds is not stopped by a busy moment."""
DETERMINISTIC_FAILURES = ("invalid_config", "accuracy", "graph_break", "compile_error", "recompile_limit", "unsettled")
"""Failure reasons that measuring again would repeat, so a twin may reuse them."""


class LoopOptions(Protocol):
    """What a trial loop reads of the search's options (`SearchOptions` has them all)."""

    trials: int
    reuse_since: int
    max_compile_seconds: float | None
    compile_budget: float
    pruner: str
    slow_ratio: float


Report = Callable[..., None]
"""(trial number or None, phase, message="") -> None: the search's display."""
_STATES = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)


class TrialLoop:
    """Runs the trials of one search session against its study."""

    def __init__(
        self,
        study: optuna.Study,
        harness: Harness,
        options: LoopOptions,
        objective: Objective,
        report: Report,
        *,
        objectives: Objectives | None = None,
    ) -> None:
        self.study = study
        self.harness = harness
        self.options = options
        self.objective = objective
        self.objectives = objectives or Objectives((objective,))
        """Every objective of the study; `objective` is the first, the speed objective."""
        self.report = report
        self.space: SearchSpace | None = None
        self.baselines: dict[str, dict[str, Any]] = {}
        self.plain_run: tuple[TrialRun, str] | None = None
        """This session's plain torch.compile baseline and the `created` stamp of its code, when it completed or failed
        for a reason a second run would repeat: a trial of that configuration on the same device takes its outcome
        rather than compiling the same code again."""
        self.exhausted = False
        self.shared = beats(study)
        """Whether the study's trials beat (a database server several hosts share), rather than a SQLite file."""
        self.lock = threading.RLock()
        """Held to ask and tell: the workers of a pool share the study and its sampler."""
        self.in_flight: set[int] = set()
        """Numbers of the trials this process runs now."""
        self.workers_per_device = 1
        """Workers that share one device: their compiles run side by side, each slower than alone."""
        self.host = f"{socket.gethostname()}-unmeasured"
        """Whose baselines `baselines` are: this host and its environment (`environment.host_key`)."""
        self.stopping = threading.Event()
        """Set when the search stops (Ctrl-C in a pool): a running trial ends as interrupted."""

    def finished(self) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=_STATES)

    def started(self) -> int:
        """Trials that count towards --trials: finished ones, and those live searches (this one included) run now.

        In a shared study an abandoned trial whose configuration was queued again does not
        count: its retry does, once a search runs it.
        """
        if self.shared:
            trials = self.study.get_trials(deepcopy=False)
            retried = retried_numbers(trials)
            return self.running() + sum(1 for t in trials if t.state in _STATES and t.number not in retried)
        running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        mine = self.in_flight
        return len(self.finished()) + sum(
            1 for t in running if t.number in mine or _still_running(t, self.harness.timeout)
        )

    def running(self) -> int:
        """Trials running now that may still finish, in any search of the study."""
        running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        if not self.shared:
            return len(running)
        # A search killed between asking for a trial and its first beat (after which it records
        # its host) leaves one that is never stale; past the hard trial timeout it cannot be
        # running, so no host waits for it.
        limit = self.harness.timeout + (grace_period(self.study) or 0)
        now = datetime.datetime.now()
        return sum(
            1
            for t in running
            if "host" in t.user_attrs or t.datetime_start is None or (now - t.datetime_start).total_seconds() < limit
        )

    def reap_abandoned(self) -> int:
        """Fail the trials that a killed search left RUNNING, saying so; returns how many.

        A shared study: those of any host whose heartbeat stopped for the grace period (each
        queued again once). A SQLite study: those of this host whose search's process is gone.
        """
        if self.shared:
            failed = fail_stale(self.study)
            for frozen in failed:
                self._note(f"trial {frozen.number}: FAIL {frozen.user_attrs.get('message')}")
            return len(failed)
        host = socket.gethostname()
        reaped = 0
        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            pid = frozen.user_attrs.get("pid")
            if frozen.user_attrs.get("host") != host or not isinstance(pid, int) or process_alive(pid):
                continue
            message = f"abandoned: the search that ran it (pid {pid}) was killed before the trial finished"
            # Another process's trial: its attributes are set through the storage, as `Trial` would.
            storage = self.study._storage
            for key, value in (("state", "failed"), ("reason", "abandoned"), ("message", message)):
                storage.set_trial_user_attr(frozen._trial_id, key, value)
            with contextlib.suppress(RuntimeError, ValueError):  # finished meanwhile by someone else
                self.study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
                reaped += 1
                self._note(f"trial {frozen.number}: FAIL {message}")
        return reaped

    def typical_seconds(self) -> float | None:
        """The median wall time of the trials measured so far (reused outcomes excluded), or None."""
        durations = [
            t.user_attrs["wall_seconds"]
            for t in self.finished()
            if "duplicate_of" not in t.user_attrs and t.user_attrs.get("wall_seconds")
        ]
        return statistics.median(durations) if durations else None

    def best_distinct(self, count: int) -> list[optuna.trial.FrozenTrial]:
        """The `count` best complete trials, one per configuration, plain torch.compile (a baseline) left out."""
        complete = [
            t
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if "duplicate_of" not in t.user_attrs and trial_value(t) is not None and not _plain(t)
        ]
        complete.sort(key=lambda t: trial_value(t) or 0.0, reverse=self.objective.direction == "maximize")
        chosen: list[optuna.trial.FrozenTrial] = []
        for trial in complete:
            if len(chosen) >= count:
                break
            if all(other.user_attrs.get("config") != trial.user_attrs.get("config") for other in chosen):
                chosen.append(trial)
        return chosen

    def front_distinct(self, count: int) -> list[optuna.trial.FrozenTrial]:
        """Up to `count` trials of a multi-objective study's Pareto front, one per configuration, spread along it."""
        chosen: list[optuna.trial.FrozenTrial] = []
        for trial in self.study.best_trials:
            if "duplicate_of" in trial.user_attrs or trial_value(trial) is None or _plain(trial):
                continue
            if all(other.user_attrs.get("config") != trial.user_attrs.get("config") for other in chosen):
                chosen.append(trial)
        chosen.sort(key=lambda t: trial_value(t) or 0.0, reverse=self.objective.direction == "maximize")
        keep = subjects_to_confirm([(t.number, trial_value(t) or 0.0) for t in chosen], count)
        return [t for t in chosen if t.number in keep]

    def best_total_seconds(self) -> float | None:
        """For a time-to:N study, the best complete trial's compile time plus N steps (seconds), else None."""
        if self.objective.kind != "time-to":
            return None
        values = [
            value
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if (value := trial_value(t)) is not None
        ]
        return min(values, default=None)

    def ask(self) -> optuna.Trial:
        """A new trial from the study (under the lock: a pool's workers share the sampler)."""
        with self.lock, warnings.catch_warnings():
            # Optuna expects heartbeats only inside `study.optimize`; `Heartbeat` records them with ask/tell.
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            trial = self.study.ask()
            self.in_flight.add(trial.number)
            return trial

    def one_trial(
        self,
        trial: optuna.Trial | None = None,
        *,
        harness: Harness | None = None,
        gate: MeasurementGate | None = None,
    ) -> None:
        """Run one trial (`trial`, or a new one asked of the study) on `harness`'s device and tell its outcome.

        A pool passes each worker's own harness (its device) and the gate its device's workers share.
        """
        assert self.space is not None
        trial = trial or self.ask()
        heartbeat = Heartbeat(self.study, trial._trial_id)
        try:
            with heartbeat:  # at once: a trial that never beat is never failed as stale
                trial.set_user_attr("host", socket.gethostname())
                trial.set_user_attr("pid", os.getpid())
                self._run(trial, harness or self.harness, gate)
        except optuna.exceptions.UpdateFinishedTrialError:
            # Its beats did not reach the study for the grace period (a server or network outage),
            # so another search failed it as abandoned, and may be running its retry now.
            self._note(
                f"trial {trial.number}: another search failed it as abandoned while it ran; its outcome is dropped"
            )
        except BaseException as exc:
            # Ctrl-C, or an error of ours: the trial must not stay RUNNING in the study for ever.
            if self.study.get_trials(deepcopy=False)[trial.number].state == optuna.trial.TrialState.RUNNING:
                interrupted = isinstance(exc, (KeyboardInterrupt, GateClosed))
                reason = "interrupted" if interrupted else "search_error"
                name = "KeyboardInterrupt" if interrupted else type(exc).__name__
                with contextlib.suppress(Exception):
                    self._tell_failed(trial, reason, f"the search stopped during this trial: {name}")
            raise
        finally:
            self.in_flight.discard(trial.number)
            for frozen in heartbeat.failed:
                self._note(f"trial {frozen.number}: FAIL {frozen.user_attrs.get('message')}")

    def _run(self, trial: optuna.Trial, harness: Harness, gate: MeasurementGate | None) -> None:
        assert self.space is not None
        try:
            config = self.space.suggest(trial)
        except SpaceError as exc:
            self._tell_failed(trial, "invalid_config", str(exc))
            return
        trial.set_user_attr("config", config.to_dict())
        trial.set_user_attr("description", config.describe())
        twin = self._reusable_twin(config.to_dict(), trial.number)
        if twin is not None:
            self._copy_outcome(trial, twin)
            return
        if is_plain_compile(config) and self.plain_run is not None and harness.device == self.harness.device:
            self._tell_run(trial, config, *self.plain_run, reused="the plain torch.compile baseline")
            return
        created = utc_now()
        try:
            source = harness.source(config, created)
        except ConfigError as exc:
            self._tell_failed(trial, "invalid_config", str(exc))
            return
        trial.set_user_attr("created", created)
        trial.set_user_attr("source_sha256", hashlib.sha256(source.encode()).hexdigest())
        recipe = trial.user_attrs.get("recipe")
        self.report(trial.number, f"trial {trial.number}: starting" + (f" (recipe {recipe})" if recipe else ""))
        monitor = Monitor(self, trial, f"trial {trial.number}")
        run = run_trial(harness.request(config, source=source), monitor, gate)
        if self.stopping.is_set():
            raise KeyboardInterrupt  # the pool stopped: its worker was killed, whatever the run says
        if harness.device != self.harness.device:
            trial.set_user_attr("device", harness.device)
        self._tell_run(trial, config, run, created)

    def _tell_run(
        self, trial: optuna.Trial, config: CompileConfig, run: TrialRun, created: str, *, reused: str = ""
    ) -> None:
        """Record `run`'s figures on the trial and tell its outcome; `reused` names the run it was when not its own."""
        record = run.record()
        also = f" (the run of {reused}, reused)" if reused else ""
        if reused:
            # Same configuration, same code, same protocol and device, measured minutes ago in this session.
            trial.set_user_attr("created", created)
            trial.set_user_attr(
                "source_sha256", hashlib.sha256(self.harness.source(config, created).encode()).hexdigest()
            )
            trial.set_user_attr("reused_run", reused)
            if record.complete and not self.objectives.multi:
                # Its windows, as the pruner would have seen them: later trials are judged against them.
                for window in run.windows:
                    value = self.objective.value(
                        window["samples_per_second"], window["batches_per_second"], record.compile_seconds or 0.0
                    )
                    trial.report(value, int(window["index"]))
        if run.measured_between:
            trial.set_user_attr("measured_between", [round(t, 3) for t in run.measured_between])
        for key, value in record.to_dict().items():
            trial.set_user_attr(key, value)
        for name in ("eager", "compile"):
            base = self.baselines.get(name, {}).get("samples_per_second")
            if record.complete and base:
                trial.set_user_attr(f"speedup_vs_{name}", round((record.samples_per_second or 0.0) / base, 4))
                trial.set_user_attr("baselines_of", self.host)
        if record.complete:
            values = self.objectives.values(record)
            self._tell(trial, values)
            shown = ", ".join(f"{v:.4g} {o.unit}" for v, o in zip(values, self.objectives, strict=True))
            self._note(f"trial {trial.number}: {shown}  {config.describe()}{also}")
        elif record.state == "pruned":
            self._tell(trial, state=optuna.trial.TrialState.PRUNED)
            self._note(f"trial {trial.number}: pruned ({record.message})  {config.describe()}")
        else:
            self._tell(trial, state=optuna.trial.TrialState.FAIL)
            self._note(f"trial {trial.number}: FAIL {record.reason}: {record.message}  {config.describe()}{also}")

    def _note(self, message: str) -> None:
        self.report(None, "", message)

    def _tell(self, trial: optuna.Trial, *args: Any, **kwargs: Any) -> None:
        try:
            with self.lock:
                self.study.tell(trial, *args, **kwargs)
        except RuntimeError as exc:
            # The brute-force sampler asks the study to stop once every configuration was tried;
            # with ask/tell that request arrives as this error, after the trial was recorded.
            if "Study.stop" not in str(exc):
                raise
            self.exhausted = True

    def _tell_failed(self, trial: optuna.Trial, reason: str, message: str) -> None:
        trial.set_user_attr("state", "failed")
        trial.set_user_attr("reason", reason)
        trial.set_user_attr("message", message)
        self._tell(trial, state=optuna.trial.TrialState.FAIL)
        self._note(f"trial {trial.number}: FAIL {reason}: {message}")

    def _reusable_twin(self, wanted: dict[str, Any], number: int) -> optuna.trial.FrozenTrial | None:
        for other in self.finished():
            if other.number < self.options.reuse_since or other.number == number or "duplicate_of" in other.user_attrs:
                continue
            if other.user_attrs.get("config") != wanted:
                continue
            complete = other.state == optuna.trial.TrialState.COMPLETE
            if complete or other.user_attrs.get("reason") in DETERMINISTIC_FAILURES:
                return other
        return None

    def _copy_outcome(self, trial: optuna.Trial, twin: optuna.trial.FrozenTrial) -> None:
        for key, value in twin.user_attrs.items():
            if key not in ("host", "pid", "retry_of"):  # who ran it, and which trial it ran again, are its own
                trial.set_user_attr(key, value)
        trial.set_user_attr("duplicate_of", twin.number)
        if twin.state == optuna.trial.TrialState.COMPLETE:
            self._tell(trial, twin.values)
        else:
            self._tell(trial, state=twin.state)
        self._note(f"trial {trial.number}: same configuration as trial {twin.number}; its outcome is reused")


def _plain(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial compiled plain torch.compile (the plain recipe): the baseline measures that in every round."""
    recorded = trial.user_attrs.get("config")
    if not isinstance(recorded, dict):
        return False
    try:
        return is_plain_compile(CompileConfig.from_dict(recorded))
    except ConfigError:
        return False  # a configuration this version cannot read is not the baseline


def _still_running(trial: optuna.trial.FrozenTrial, timeout: float) -> bool:
    """A RUNNING trial of another search that may still finish: its process lives, or (another host) it is recent."""
    if trial.user_attrs.get("host") == socket.gethostname():
        pid = trial.user_attrs.get("pid")
        return isinstance(pid, int) and pid != os.getpid() and process_alive(pid)
    start = trial.datetime_start
    return start is not None and (datetime.datetime.now() - start).total_seconds() < timeout + 60


def compile_limit(loop: TrialLoop) -> tuple[float | None, str]:
    """How long a trial may compile before it is stopped, and why; (None, "") when there is no limit.

    `--max-compile-seconds` when given; otherwise the smaller of the compile budget (a multiple
    of plain torch.compile's compile time, as this session measured it, and at least
    MIN_COMPILE_BUDGET) and, for time-to:N,
    the best complete trial's whole time: a trial still compiling past that cannot win.
    """
    options = loop.options
    if options.max_compile_seconds:
        return options.max_compile_seconds, f"--max-compile-seconds {options.max_compile_seconds:g}"
    limits: list[tuple[float, str]] = []
    plain = loop.baselines.get("compile", {}).get("compile_seconds")
    if options.compile_budget and plain:
        # Workers that share a device compile side by side, each up to that many times slower than alone.
        sharing = loop.workers_per_device
        budget = options.compile_budget * plain * sharing
        why = f"{options.compile_budget:g}x plain torch.compile's {plain:.1f} s (--compile-budget)"
        if sharing > 1:
            why += f", times the {sharing} workers that compile side by side on the device"
        if budget < MIN_COMPILE_BUDGET:
            budget, why = MIN_COMPILE_BUDGET, f"{why}, but never less than {MIN_COMPILE_BUDGET:.0f} s"
        limits.append((budget, why))
    best = loop.best_total_seconds()
    if best is not None:
        limits.append((best, f"the best complete trial's whole {loop.objective} took {best:.1f} s, so it cannot win"))
    return min(limits) if limits else (None, "")


class Monitor:
    """Watches one worker's events: phase changes for the display, windows for the pruner, the compile budget."""

    def __init__(self, loop: TrialLoop, trial: optuna.Trial, label: str) -> None:
        self.loop = loop
        self.trial = trial
        self.label = label
        self.phase = "start"
        self.phase_started = time.monotonic()
        self.compile_seconds = 0.0
        self.windows: list[float] = []
        self.limit, self.why = compile_limit(loop)
        self.busy = ""
        """Why this trial's windows are not judged: the calibration probe said the machine was busy."""

    def __call__(self, event: dict[str, Any] | None) -> str | None:
        if self.loop.stopping.is_set():
            raise KeyboardInterrupt  # the pool stops: the runner kills the worker, the trial ends as interrupted
        limit = self.limit
        if event is None:
            if self.phase == "compile" and limit and time.monotonic() - self.phase_started > limit:
                return f"compile ran past {limit:.0f} s: {self.why}"
            return None
        kind = event["event"]
        if kind == "paused":
            # Stopped while another worker measured: not this trial's compile time.
            self.phase_started += float(event["seconds"])
        elif kind == "phase":
            self.phase, self.phase_started = event["phase"], time.monotonic()
            self.loop.report(self.trial.number, f"{self.label}: {self.phase}")
        elif kind == "compiled":
            self.compile_seconds = float(event["compile_seconds"])
            if limit and self.compile_seconds > limit:
                return f"compile took {self.compile_seconds:.0f} s, more than {limit:.0f} s: {self.why}"
        elif kind == "probe":
            self.busy = self._busy(float(event["seconds"]))
            if self.busy:
                self.trial.set_user_attr("not_pruned_because", self.busy)
        elif kind == "window":
            return self._window(event)
        return None

    def _busy(self, probe: float) -> str:
        """Why the machine looks busy now, from the calibration probe against the baselines' fastest; '' when it does not."""
        probes = [
            seconds
            for record in self.loop.baselines.values()
            for seconds in record.get("probe_seconds") or []
            if seconds
        ]
        if probes and probe > PROBE_SLOWDOWN * min(probes):
            return (
                f"the calibration probe took {probe * 1e3:.1f} ms, over {PROBE_SLOWDOWN:g}x the baselines' "
                f"{min(probes) * 1e3:.1f} ms: the machine was busy, so its windows were not judged"
            )
        return ""

    def _window(self, event: dict[str, Any]) -> str | None:
        if self.busy:
            return None  # slow windows of a busy machine say nothing about the configuration
        objective = self.loop.objective
        value = objective.value(event["samples_per_second"], event["batches_per_second"], self.compile_seconds)
        step = int(event["index"])
        self.windows.append(event["samples_per_second"])
        # Optuna's pruners judge one objective; a multi-objective study is pruned for slowness only.
        if not self.loop.objectives.multi:
            self.trial.report(value, step)
        if not self.loop.objectives.multi and self.trial.should_prune():
            return f"the {self.loop.options.pruner} pruner stopped it at window {step} ({value:.4g} {objective.unit})"
        eager = self.loop.baselines.get("eager", {}).get("steady_samples_per_second")
        ratio = self.loop.options.slow_ratio
        if eager and len(self.windows) >= 2 and statistics.median(self.windows) < ratio * eager:
            return f"{statistics.median(self.windows):.4g} samples/s is below {ratio:.0%} of eager's {eager:.4g}"
        return None
