"""What a search knows of its study's trials: finished, started and running ones, the abandoned, the best.

In a study several hosts share (a database server), each running trial beats
(`autotune.study.storage`) and a silent one is failed by whichever search notices; in a
SQLite study, on one host, a trial whose search's process is gone is failed instead.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import statistics
from collections.abc import Callable

import optuna

from autotune.errors import ConfigError
from autotune.measure import Objective, Objectives
from autotune.measure.choice import subjects_to_confirm
from autotune.runtime.config import CompileConfig, is_plain_compile
from autotune.study.storage import (
    beats,
    fail_stale,
    grace_period,
    record_of,
    retried_numbers,
    trial_value,
    update_study_record,
)
from autotune.trial.runner import process_alive

__all__ = ["FINISHED", "StudyLedger"]

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
"""The states of a trial that ended."""


class StudyLedger:
    """The study's trials as one search session sees them; `in_flight` are those this process runs now."""

    def __init__(
        self,
        study: optuna.Study,
        objectives: Objectives,
        *,
        timeout: float,
        note: Callable[[str], None],
    ) -> None:
        self.study = study
        self.objectives = objectives
        self.objective: Objective = objectives.primary
        self.timeout = timeout
        """A trial's hard time limit: a RUNNING trial older than this (and the grace period) cannot be running."""
        self.note = note
        self.shared = beats(study)
        """Whether the study's trials beat (a database server several hosts share), rather than a SQLite file."""
        self.in_flight: set[int] = set()
        """Numbers of the trials this process runs now."""

    def finished(self) -> list[optuna.trial.FrozenTrial]:
        return self.study.get_trials(deepcopy=False, states=FINISHED)

    def started(self) -> int:
        """Trials that count towards --trials: finished ones, and those live searches (this one included) run now.

        In a shared study an abandoned trial whose configuration was queued again does not
        count: its retry does, once a search runs it.
        """
        if self.shared:
            trials = self.study.get_trials(deepcopy=False)
            retried = retried_numbers(trials)
            return self.running() + sum(1 for t in trials if t.state in FINISHED and t.number not in retried)
        running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        mine = self.in_flight
        return len(self.finished()) + sum(1 for t in running if t.number in mine or _still_running(t, self.timeout))

    def running(self) -> int:
        """Trials running now that may still finish, in any search of the study."""
        running = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        if not self.shared:
            return len(running)
        # A search killed between asking for a trial and its first beat (after which it records
        # its host) leaves one that is never stale; past the hard trial timeout it cannot be
        # running, so no host waits for it.
        limit = self.timeout + (grace_period(self.study) or 0)
        now = datetime.datetime.now()
        return sum(
            1
            for t in running
            if record_of(t).host is not None
            or t.datetime_start is None
            or (now - t.datetime_start).total_seconds() < limit
        )

    def reap_abandoned(self) -> int:
        """Fail the trials that a killed search left RUNNING, saying so; returns how many.

        A shared study: those of any host whose heartbeat stopped for the grace period (each
        queued again once). A SQLite study: those of this host whose search's process is gone.
        """
        if self.shared:
            failed = fail_stale(self.study)
            for frozen in failed:
                self.note(f"trial {frozen.number}: FAIL {record_of(frozen).message}")
            return len(failed)
        host = socket.gethostname()
        reaped = 0
        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            record = record_of(frozen)
            pid = record.pid
            if record.host != host or not isinstance(pid, int) or process_alive(pid):
                continue
            message = f"abandoned: the search that ran it (pid {pid}) was killed before the trial finished"
            # Another process's trial: why it failed is the study's to say (`failure_of`), as for a stale one.
            update_study_record(self.study, abandoned={frozen.number: message})
            with contextlib.suppress(RuntimeError, ValueError):  # finished meanwhile by someone else
                self.study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
                reaped += 1
                self.note(f"trial {frozen.number}: FAIL {message}")
        return reaped

    def typical_seconds(self) -> float | None:
        """The median wall time of the trials measured so far (reused outcomes excluded), or None."""
        records = [record_of(t) for t in self.finished()]
        durations = [r.own.wall_seconds for r in records if r.duplicate_of is None and r.own.wall_seconds]
        return statistics.median(durations) if durations else None

    def best_distinct(self, count: int) -> list[optuna.trial.FrozenTrial]:
        """The `count` best complete trials, one per configuration, plain torch.compile (a baseline) left out."""
        complete = [
            t
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if record_of(t).duplicate_of is None and trial_value(t) is not None and not _plain(t)
        ]
        complete.sort(key=lambda t: trial_value(t) or 0.0, reverse=self.objective.direction == "maximize")
        return _one_per_configuration(complete, count)

    def front_distinct(self, count: int) -> list[optuna.trial.FrozenTrial]:
        """Up to `count` trials of a multi-objective study's Pareto front, one per configuration, spread along it."""
        front = [
            t
            for t in self.study.best_trials
            if record_of(t).duplicate_of is None and trial_value(t) is not None and not _plain(t)
        ]
        chosen = _one_per_configuration(front, len(front))
        chosen.sort(key=lambda t: trial_value(t) or 0.0, reverse=self.objective.direction == "maximize")
        keep = subjects_to_confirm([(t.number, trial_value(t) or 0.0) for t in chosen], count)
        return [t for t in chosen if t.number in keep]

    def best_total_seconds(self) -> float | None:
        """For a time-to:N study, the best complete trial's compile time plus N steps (seconds), else None."""
        if self.objective.horizon is None:
            return None
        values = [
            value
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if (value := trial_value(t)) is not None
        ]
        return min(values, default=None)


def _one_per_configuration(trials: list[optuna.trial.FrozenTrial], count: int) -> list[optuna.trial.FrozenTrial]:
    """The first `count` of `trials`, in their order, whose configuration no earlier one of them ran."""
    chosen: list[optuna.trial.FrozenTrial] = []
    seen: list[dict | None] = []
    for trial in trials:
        if len(chosen) >= count:
            break
        configuration = record_of(trial).configuration  # read once per trial, not once per comparison
        if configuration not in seen:
            seen.append(configuration)
            chosen.append(trial)
    return chosen


def _plain(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial compiled plain torch.compile (the plain recipe): the baseline measures that in every round."""
    recorded = record_of(trial).config
    if not isinstance(recorded, dict):
        return False
    try:
        return is_plain_compile(CompileConfig.from_dict(recorded))
    except ConfigError:
        return False  # a configuration this version cannot read is not the baseline


def _still_running(trial: optuna.trial.FrozenTrial, timeout: float) -> bool:
    """A RUNNING trial of another search that may still finish: its process lives, or (another host) it is recent."""
    record = record_of(trial)
    if record.host == socket.gethostname():
        pid = record.pid
        return isinstance(pid, int) and pid != os.getpid() and process_alive(pid)
    start = trial.datetime_start
    return start is not None and (datetime.datetime.now() - start).total_seconds() < timeout + 60
