"""One trial of a search: ask the study, sample a configuration, run it in a worker with pruning, tell the outcome.

A configuration the study already measured is not measured again when its outcome does
not depend on the machine's mood (complete, or failed for a reason such as an accuracy
mismatch or a graph break); a pruned, timed-out or crashed twin is measured again, since
noise may have caused that outcome. A running trial beats while it runs (`Heartbeat`), so
that a search on another host can tell a dead one from a slow one (`StudyLedger`).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import random
import shutil
import socket
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import ConfigError, SearchError, SpaceError
from autotune.measure import Harness, Objective, Objectives, Paired
from autotune.measure.format import utc_now
from autotune.measure.tasks import (
    LiveReference,
    anchor_reference,
    measure_trial,
    restart_reference,
    start_reference,
)
from autotune.runtime.config import CompileConfig, is_plain_compile
from autotune.study.search._culprits import Culprits
from autotune.study.search._ledger import StudyLedger
from autotune.study.search._monitor import LoopOptions, Monitor
from autotune.study.search._space import SearchSpace
from autotune.study.storage import (
    Heartbeat,
    ReferenceLevels,
    record_of,
    study_scale,
    update_record,
    update_study_record,
    write_record,
)
from autotune.trial.gate import GateClosed, MeasurementGate
from autotune.trial.request import TrialRequest, TrialRun
from autotune.trial.run_record import RunRecord

__all__ = ["DETERMINISTIC_FAILURES", "TrialLoop", "crowded_out"]

DETERMINISTIC_FAILURES = ("invalid_config", "accuracy", "graph_break", "compile_error", "recompile_limit", "unsettled")
"""Failure reasons that measuring again would repeat, so a twin may reuse them."""

ANCHOR_EVERY = 4
"""A fresh warm plain-compile restart is paired with the reference before the first trial, then after each 4 more."""

CONTENDER_WINDOWS = 3
"""A contender's and an anchor's paired windows at most, as a multiple of the protocol's windows (`worth_more_pairs`)."""


Report = Callable[..., None]
"""(trial number or None, phase, message="") -> None: the search's display."""


def crowded_out(run: TrialRun, workers_per_device: int) -> bool:
    """Whether `run` ran out of memory where other workers shared its device: not yet the configuration's own fault."""
    return workers_per_device > 1 and run.state == "failed" and run.reason == "oom"


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
        self.references: dict[str, LiveReference] = {}
        """Per device, the live plain-compile worker trials are paired with (`autotune.measure.tasks.LiveReference`)."""
        self.reference_name = "compile"
        """Which baseline the references are: plain compile, or eager when plain compile failed."""
        self.caches = Path(tempfile.gettempdir()) / f"autotune-caches-{os.getpid()}"
        """Where each trial's compile-cache folder is kept, for its warm runs in the confirmation (the session sets it)."""
        self.closing: list[Callable[[], None]] = []
        """What `close` ends: the baselines' live workers."""
        self.rng = random.Random(0)
        self.ledger = StudyLedger(study, self.objectives, timeout=harness.timeout, note=self._note)
        """What this session knows of the study's trials."""
        self.lock = threading.RLock()
        """Held to ask and tell: the workers of a pool share the study and its sampler."""
        self.workers_per_device = 1
        """Workers that share one device: their compiles run side by side, each slower than alone."""
        self.host = f"{socket.gethostname()}-unmeasured"
        """Whose baselines `baselines` are: this host and its environment (`environment.host_key`)."""
        self.stopping = threading.Event()
        """Set when the search stops (Ctrl-C in a pool): a running trial ends as interrupted."""
        self.culprits: Culprits | None = None
        """The study's explained failures: their culprit settings are not run again (the session sets it)."""

    def ask(self) -> optuna.Trial:
        """A new trial from the study (under the lock: a pool's workers share the sampler)."""
        with self.lock, warnings.catch_warnings():
            # Optuna expects heartbeats only inside `study.optimize`; `Heartbeat` records them with ask/tell.
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            trial = self.study.ask()
            self.ledger.in_flight.add(trial.number)
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
        heartbeat = Heartbeat(self.study, trial.number)
        try:
            with heartbeat:  # at once: a trial that never beat is never failed as stale
                update_record(trial, host=socket.gethostname(), pid=os.getpid())
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
            self.ledger.in_flight.discard(trial.number)
            for frozen in heartbeat.failed:
                self._note(f"trial {frozen.number}: FAIL {record_of(frozen).message}")

    def follow_scale(self) -> None:
        """Put the live references' rates on the study's recorded scale again (`adopt_scale`): a host that began a
        shared study at the same moment may have recorded its own over the one this session adopted."""
        scale = study_scale(self.study, self.reference_name)
        if scale is None:
            return
        with self.lock:
            for reference in self.references.values():
                reference.samples_per_second = scale.samples_per_second
                reference.batches_per_second = scale.batches_per_second

    def _run(self, trial: optuna.Trial, harness: Harness, gate: MeasurementGate | None) -> None:
        assert self.space is not None
        try:
            with self.lock:  # the sampler answers each question here: a pool's workers must not ask it at once
                config = suggest_in(self.space, trial)
        except SpaceError as exc:
            self._tell_failed(trial, "invalid_config", str(exc))
            return
        self.follow_scale()
        update_record(trial, config=config.to_dict(), description=config.describe())
        held = self.culprits.held_by(config) if self.culprits is not None else None
        if held is not None:
            update_record(trial, holds_culprit_of=held.trial)
            settings = ", ".join(held.described)
            self._tell_failed(trial, held.reason, f"not run: it holds {settings}, which made trial {held.trial} fail")
            return
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
        recipe = update_record(trial, created=created, source_sha256=hashlib.sha256(source.encode()).hexdigest()).recipe
        self.report(trial.number, f"trial {trial.number}: starting" + (f" (recipe {recipe})" if recipe else ""))
        monitor = Monitor(self, trial, f"trial {trial.number}")
        cache = str(self.caches / f"trial-{trial.number}")
        request = harness.request(config, source=source, cache_dir=cache)

        def measure(request: TrialRequest) -> tuple[TrialRun, Paired | None]:
            return measure_trial(
                request,
                monitor=monitor,
                on_window=monitor.window,
                gate=gate,
                reference=self.reference_for(harness),
                windows=harness.protocol.windows,
                rng=self.rng,
                restart_monitor=monitor.restart(),
                more_windows=_more_windows(harness),
            )

        self._anchor(harness, gate)
        run, paired = measure(request)
        if gate is not None and crowded_out(run, self.workers_per_device):
            # Other workers held memory on the device: run alone, the trial says whether it fits by itself.
            self._note(f"trial {trial.number}: out of memory beside other workers on {harness.device}; again alone")
            shutil.rmtree(cache, ignore_errors=True)  # its second run is a first run too: cold
            with gate.alone(harness.device):
                run, paired = measure(replace(request, memory_share=None))
            update_record(trial, ran_alone="out of memory beside other workers of its device")
        if paired is not None:
            with self.lock:
                paired.reference.paired_trials += 1
        if self.stopping.is_set():
            raise KeyboardInterrupt  # the pool stopped: its worker was killed, whatever the run says
        if harness.device != self.harness.device:
            update_record(trial, device=harness.device)
        self._tell_run(trial, config, run, created, paired=paired)

    def close(self) -> None:
        """End the live references (after the last trial, or when the search stops)."""
        while self.closing:
            self.closing.pop()()
        for reference in self.references.values():
            if reference.worker.alive:
                reference.worker.end()
        self.references.clear()

    def reference_for(self, harness: Harness) -> LiveReference | None:
        """The live reference of `harness`'s device: the baselines' on the first device, one started on others."""
        with self.lock:
            if harness.device not in self.references and self.references:
                first = next(iter(self.references.values()))
                cache = str(self.caches / f"compile-{harness.device.replace(':', '-')}")
                self.references[harness.device] = start_reference(harness, first, cache)
            current = self.references.get(harness.device)
            if current is not None and not current.worker.alive:
                # It ended (out of memory, a crash): every trial paired with it would stop as "the reference
                # stopped" and be recorded pruned. A new warm restart takes its place, or the search stops, saying so.
                self._note(
                    f"the live {self.reference_name} reference on {harness.device} ended "
                    f"({current.worker.run.reason or 'exit ' + str(current.worker.process.poll())}); starting it again"
                )
                again = restart_reference(current)
                if again is None:
                    raise SearchError(
                        f"the live {self.reference_name} reference on {harness.device} ended and could not start "
                        "again, so no trial can be paired with it; the study keeps what was measured: run the "
                        "same command to resume it"
                    )
                self.references[harness.device] = current = again
            return current

    def _anchor(self, harness: Harness, gate: MeasurementGate | None) -> None:
        """Pair a fresh warm restart of plain compile with the device's reference when one is due (`ANCHOR_EVERY`).

        The reference is one process, and a process can settle at a level of its own: every trial
        paired with it would read that level as its own. The anchors measure it, and where they
        tell it from 1, a trial's ratio to plain compile is told divided by it
        (`LiveReference.level`); Optuna's value stays the raw pairing, which every trial shares,
        so the order the sampler sees is the same whatever the anchors say.
        """
        reference = self.reference_for(harness)
        if reference is None or self.reference_name != "compile":
            return
        with self.lock:
            if not reference.anchor_due(ANCHOR_EVERY):
                return
        ratio = anchor_reference(
            reference, windows=harness.protocol.windows, rng=self.rng, gate=gate, more_windows=_more_windows(harness)
        )
        where = f" on {harness.device}" if harness.device != self.harness.device else ""
        if ratio is None:
            self._note(f"reference{where}: a fresh plain-compile restart did not finish its windows; not anchored")
            return
        self._note(
            f"reference{where}: a fresh plain-compile restart ran {ratio:.3f}x the live one; {_level_text(reference)}"
        )
        levels = ReferenceLevels(
            levels=[round(x, 4) for x in reference.levels],
            errors=[round(e, 4) if e is not None else None for e in reference.level_errors],
        )
        update_study_record(self.study, reference_levels={harness.device: levels})

    def _tell_run(
        self,
        trial: optuna.Trial,
        config: CompileConfig,
        run: TrialRun,
        created: str,
        *,
        reused: str = "",
        paired: Paired | None = None,
    ) -> None:
        """Record `run` as the trial's and tell its outcome; `reused` names the run it was when not its own."""
        record = run.record()
        also = f" (the run of {reused}, reused)" if reused else ""
        changes: dict[str, Any] = {"run": record}
        told = record
        if reused:
            told = self._on_scale(record)
            self._reused(trial, config, told, created, reused)
            changes["reused_run"] = reused
        if run.fresh is not None and not reused:
            # The cold run's pass over the stream: what the trial's own process ran right after compiling.
            changes["first_run_samples_per_second"] = round(run.fresh.samples_per_second, 4)
        if run.measured_between:
            changes["measured_between"] = [round(t, 3) for t in run.measured_between]
        if told is not record:
            changes.update(
                scaled_samples_per_second=told.samples_per_second, scaled_batches_per_second=told.batches_per_second
            )
        if record.complete:
            figures, told = self._paired_figures(told, paired, reused=bool(reused))
            changes.update(figures)
        update_record(trial, **changes)
        if record.complete:
            values = self.objectives.values(told)
            self._tell(trial, values)
            shown = ", ".join(f"{v:.4g} {o.unit}" for v, o in zip(values, self.objectives, strict=True))
            self._note(f"trial {trial.number}: {shown}  {config.describe()}{also}")
            for note in record.notes:
                self._note(f"trial {trial.number}: note: {note}")
        elif record.state == "pruned":
            self._tell(trial, state=optuna.trial.TrialState.PRUNED)
            self._note(f"trial {trial.number}: pruned ({record.message})  {config.describe()}")
        else:
            self._tell(trial, state=optuna.trial.TrialState.FAIL)
            self._note(f"trial {trial.number}: FAIL {record.reason}: {record.message}  {config.describe()}{also}")
            if self.culprits is not None and not reused:
                self.culprits.after_failure(self.harness, trial.number, config, record)

    def _on_scale(self, record: RunRecord) -> RunRecord:
        """Plain compile's reused run on the study's scale: the live reference's rates, which are that scale
        (`adopt_scale`), as a trial that ran level with the reference would read; its own rates stay in its run."""
        reference = self.references.get(self.harness.device)
        if not record.complete or reference is None or self.reference_name != "compile":
            return record
        if not reference.samples_per_second or not reference.batches_per_second:
            return record
        return replace(
            record, samples_per_second=reference.samples_per_second, batches_per_second=reference.batches_per_second
        )

    def _reused(self, trial: optuna.Trial, config: CompileConfig, record: RunRecord, created: str, what: str) -> None:
        """A trial that takes the plain compile baseline's run: the same code, protocol and device, minutes ago."""
        digest = hashlib.sha256(self.harness.source(config, created).encode()).hexdigest()
        update_record(trial, created=created, source_sha256=digest)
        if record.complete and not self.objectives.multi:
            # Plain compile against itself: a ratio of 1 at every paired window, as the pruner would have seen it.
            value = self.objective.speed_value(
                record.samples_per_second or 0.0, record.batches_per_second or 0.0, record.compile_seconds or 0.0
            )
            for step in range(self.harness.protocol.windows):
                trial.report(value, step)

    def _paired_figures(
        self, record: RunRecord, paired: Paired | None, *, reused: bool
    ) -> tuple[dict[str, Any], RunRecord]:
        """The trial's figures against the baselines of this session, and the record whose objective is told.

        A paired trial's rate is its ratio to the reference, measured at the same moments on the
        same batches, times the study's scale (the reference's rate when the study began): load on
        the machine moves both sides of the ratio alike, and another night's or host's rate none.
        """
        figures: dict[str, Any] = {"baselines_of": self.host}
        if reused:
            figures["speedup_vs_compile"] = 1.0
            over_eager = self.baselines.get("compile", {}).get("speedup_vs_eager")
            if over_eager:
                figures["speedup_vs_eager"] = over_eager
            return figures, record
        if paired is None or paired.samples_per_second is None:
            return figures, record
        figures.update(paired.figures())
        if self.reference_name == "compile" and paired.anchored_ratio is not None:
            # Against plain compile as a fresh process runs it: the reference's own level taken out.
            figures["speedup_vs_compile"] = round(paired.anchored_ratio, 4)
        if paired.over_eager is not None:
            figures["speedup_vs_eager"] = round(paired.over_eager, 4)
        # The figure every table and plot of the search shows is the paired one; the trial's own stays in its run.
        told = replace(
            record,
            samples_per_second=paired.samples_per_second,
            batches_per_second=paired.batches_per_second or record.batches_per_second,
        )
        figures["scaled_samples_per_second"] = round(paired.samples_per_second, 4)
        figures["scaled_batches_per_second"] = told.batches_per_second
        return figures, told

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
        update_record(trial, run=RunRecord(state="failed", reason=reason, message=message))
        self._tell(trial, state=optuna.trial.TrialState.FAIL)
        self._note(f"trial {trial.number}: FAIL {reason}: {message}")

    def _reusable_twin(self, wanted: dict[str, Any], number: int) -> optuna.trial.FrozenTrial | None:
        for other in self.ledger.finished():
            if other.number < self.options.reuse_since or other.number == number:
                continue
            record = record_of(other)
            if record.duplicate_of is not None or record.configuration != wanted:
                continue
            complete = other.state == optuna.trial.TrialState.COMPLETE
            if complete or record.reason in DETERMINISTIC_FAILURES:
                return other
        return None

    def _copy_outcome(self, trial: optuna.Trial, twin: optuna.trial.FrozenTrial) -> None:
        write_record(trial, record_of(trial).copied_from(record_of(twin), twin.number))
        if twin.state == optuna.trial.TrialState.COMPLETE:
            self._tell(trial, twin.values)
        else:
            self._tell(trial, state=twin.state)
        self._note(f"trial {trial.number}: same configuration as trial {twin.number}; its outcome is reused")


def _level_text(reference: LiveReference) -> str:
    """What the anchors so far say of the reference's level, and what trials' ratios are read against."""
    restarts = f"{len(reference.levels)} restart(s)"
    half = reference.level_band
    if half is None:
        return (
            f"trials' ratios are read as paired ({restarts}, no error to judge their {reference.measured_level:.3f} by)"
        )
    noise = f"the anchors' own noise, +/-{math.exp(half) - 1:.0%}"
    if reference.level_decided:
        return f"trials' ratios are read against {reference.level:.3f} ({restarts}; off 1 by more than {noise})"
    return f"trials' ratios are read as paired ({restarts} at {reference.measured_level:.3f}, within {noise})"


def suggest_in(space: SearchSpace, trial: optuna.Trial) -> CompileConfig:
    """The configuration `space` asks of `trial`; SearchError where the study asked one of its questions with other
    choices before (it was searched with another space or effort: Optuna keeps a question's choices for good)."""
    try:
        return space.suggest(trial)
    except ValueError as exc:
        if "dynamic value space" not in str(exc):
            raise
        asked = {
            name: distribution
            for frozen in trial.study.get_trials(deepcopy=False)
            if frozen.number != trial.number
            for name, distribution in frozen.distributions.items()
        }
        changed = [
            f"{name} {list(getattr(asked[name], 'choices', []))} there, {list(choices)} here"
            for name, choices in space.dimensions().items()
            if name in asked and tuple(getattr(asked[name], "choices", ())) != tuple(choices)
        ]
        raise SearchError(
            f"study {trial.study.study_name!r} was searched with other choices for its questions "
            f"({'; '.join(changed) or exc}), and a study keeps each question's choices: resume it with the "
            f"--space (or --effort) it was searched with, or start another study with --study-name (or --out)."
        ) from None


def _more_windows(harness: Harness) -> int:
    """The paired windows a contender or an anchor may add to the protocol's (`CONTENDER_WINDOWS`)."""
    return (CONTENDER_WINDOWS - 1) * harness.protocol.windows
