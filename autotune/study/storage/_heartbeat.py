"""A shared study's liveness: each running trial beats, and the trials of a search that stopped beating are failed.

Several hosts share a study in a database server, so no host can ask whether another
host's process is alive. Optuna's RDB storage keeps a heartbeat per running trial and names
the stale ones (no beat within the grace period, by the database server's clock, so the
hosts' clocks need not agree). Optuna beats only inside `study.optimize`; a search drives
the study with ask/tell, so `Heartbeat` beats for its trial from a thread.

Any live search fails the stale trials (`fail_stale`) with the reason a killed search's
trial gets on SQLite (`abandoned`), and queues each configuration again, once, with
Optuna's retry callback: a host that died is no fault of the configuration, but one that
took its host down twice is not tried a third time. A SQLite study lives on one host,
where the search's process id says more, sooner: `TrialLoop.reap_abandoned` uses that.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import warnings
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import optuna

__all__ = ["MAX_RETRIES", "Heartbeat", "Liveness", "beats", "fail_stale", "grace_period", "retried_numbers"]

MAX_RETRIES = 1
"""How many times an abandoned trial's configuration is queued again."""
_KEPT = ("recipe",)
"""User attributes a retry keeps: what chose the configuration, not what measuring it found."""


@dataclass(frozen=True, kw_only=True)
class Liveness:
    """How often a running trial beats, and how long a silent one is left before any search fails it."""

    interval: int = 10
    """Seconds between two beats of a running trial: each is one small write to the database."""
    grace: int = 60
    """Seconds without a beat after which a trial is failed; longer than `interval`, with room for a busy server."""

    def storage_kwargs(self) -> dict[str, Any]:
        """RDBStorage's arguments that turn its heartbeat on."""
        return {"heartbeat_interval": self.interval, "grace_period": self.grace}


def fail_stale(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Fail the study's trials whose search stopped beating, and queue each again; returns those failed here.

    `optuna.storages.fail_stale_trials` does the same but runs its callback once the trial
    is finished, when its user attributes can no longer be written; here the reason is
    written first, so the report and `autotune show` explain the failure like any other.
    """
    storage = study._storage
    grace = grace_period(study)
    if grace is None:
        return []
    failed = []
    for trial_id in storage._get_stale_trial_ids(study._study_id):  # type: ignore[attr-defined]
        frozen = storage.get_trial(trial_id)
        retry = len(frozen.system_attrs.get("retry_history", [])) < MAX_RETRIES
        message = (
            f"abandoned: the search that ran it (pid {frozen.user_attrs.get('pid')} on "
            f"{frozen.user_attrs.get('host')}) sent no heartbeat for {grace} s"
            + ("; its configuration is queued again" if retry else "; not queued again: it was a retry already")
        )
        # Finished meanwhile, by its own search after all or by another search failing it first.
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            for key, value in (("state", "failed"), ("reason", "abandoned"), ("message", message)):
                storage.set_trial_user_attr(trial_id, key, value)
            if not storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL):
                continue
            frozen = storage.get_trial(trial_id)
            failed.append(frozen)
            if retry:
                _queue_again(study, frozen)
    return failed


def retried_numbers(trials: list[optuna.trial.FrozenTrial]) -> set[int]:
    """The numbers of trials whose configuration was queued again: their retry counts towards --trials instead."""
    return {number for t in trials for number in t.system_attrs.get("retry_history", [])}


def _queue_again(study: optuna.Study, frozen: optuna.trial.FrozenTrial) -> None:
    frozen = copy.deepcopy(frozen)  # the caller's copy keeps what this trial found
    kept = {key: frozen.user_attrs[key] for key in _KEPT if key in frozen.user_attrs}
    frozen.user_attrs = {**kept, "retry_of": frozen.number}
    # Optuna's own retry callback: the same parameters as a waiting trial, which the next `ask` of any host takes.
    retry = (
        getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry(max_retry=MAX_RETRIES)(study, frozen)


def grace_period(study: optuna.Study) -> int | None:
    """Seconds without a beat after which the study's trials are stale; None when its storage keeps no heartbeats."""
    interval = _interval(study._storage)
    if interval is None:
        return None
    return getattr(getattr(study._storage, "_backend", study._storage), "grace_period", None) or 2 * interval


def beats(study: optuna.Study) -> bool:
    """Whether the study's storage keeps heartbeats (opened with `Liveness.storage_kwargs`)."""
    return _interval(study._storage) is not None


def _interval(storage: Any) -> int | None:
    getter = getattr(storage, "get_heartbeat_interval", None)
    return getter() if getter is not None else None


class Heartbeat:
    """Beats for one running trial of a shared study from a thread, failing other searches' stale trials meanwhile.

    The first beat is written before the trial runs: a trial with no beat is never stale.
    A beat that fails (the server is briefly unreachable) is tried again at the next one.
    """

    def __init__(self, study: optuna.Study, trial_id: int) -> None:
        self.study = study
        self.trial_id = trial_id
        self.interval = _interval(study._storage)
        self.failed: list[optuna.trial.FrozenTrial] = []
        """Other searches' trials this heartbeat's thread failed as stale."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        if self.interval is None:
            return self
        self.study._storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.trial_id}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        assert self.interval is not None
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # the next beat tries again; the grace period allows for it
                self.study._storage.record_heartbeat(self.trial_id)  # type: ignore[attr-defined]
                self.failed += fail_stale(self.study)
