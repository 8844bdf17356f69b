"""A shared study's liveness: each running trial beats, and the trials of a search that stopped beating are failed.

Several hosts share a study in a database server, so no host can ask whether another
host's process is alive. Optuna's RDB storage keeps a heartbeat per running trial and names
the stale ones (no beat within the grace period, by the database server's clock, so the
hosts' clocks need not agree). Optuna beats only inside `study.optimize`; a search drives
the study with ask/tell, so `Heartbeat` beats for its trial from a thread.

Any live search fails the stale trials (`fail_stale`, through Optuna's `fail_stale_trials`),
and the storage's stale-trial callback (`Liveness.storage_kwargs`) records why, as a killed
search's trial on SQLite is recorded (`abandoned`), and queues each configuration again,
once, with Optuna's retry callback: a host that died is no fault of the configuration, but
one that took its host down twice is not tried a third time. Optuna fails the trial before
calling back, so its attributes can no longer be written: the reason is kept in the study's
record (`StudyRecord.abandoned`) under the trial's number (`failure_of` reads either). A SQLite study lives on
one host, where the search's process id says more, sooner: `TrialLoop.reap_abandoned` uses
that, and records why in the study record the same way.

A journal file (`journal:///PATH`) has no server and no heartbeat of Optuna's, and the hosts
that share it need not agree on the time. There a running trial's beat is a counter in its
system attributes, raised at each beat; every search notes, by its own monotonic clock, when
it last saw each running trial's counter change, and fails a trial whose counter it has seen
still for the grace period. The journal orders the writes: of two searches that fail the
same trial at once, only the first one's write applies, and only that search queues it again.

Everything goes through Optuna's public API: the storage the study was opened in
(`opened_in`), its heartbeat methods, and trial ids looked up by study name and number.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import threading
import time
import warnings
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import optuna

from autotune.study.storage._storage import journal_liveness, opened_in
from autotune.study.storage._study_record import StudyRecord, update_study_record
from autotune.study.storage._trial_record import TRIAL_KEY, queued_attrs, record_of
from autotune.trial.run_record import RunRecord

__all__ = [
    "BEAT_KEY",
    "MAX_RETRIES",
    "Heartbeat",
    "Liveness",
    "beats",
    "fail_stale",
    "failure_of",
    "grace_period",
    "retried_numbers",
    "trial_id",
]

MAX_RETRIES = 1
"""How many times an abandoned trial's configuration is queued again."""
BEAT_KEY = "autotune:beat"
"""A running trial's system attribute in a journal storage: its beats so far."""


@dataclass(frozen=True, kw_only=True)
class Liveness:
    """How often a running trial beats, and how long a silent one is left before any search fails it."""

    interval: int = 10
    """Seconds between two beats of a running trial: each is one small write to the database."""
    grace: int = 60
    """Seconds without a beat after which a trial is failed; longer than `interval`, with room for a busy server."""

    def storage_kwargs(self) -> dict[str, Any]:
        """RDBStorage's arguments that turn its heartbeat on, with the callback that says why a stale trial failed."""
        # Optuna 4.x names the callback `failed_trial_callback`; 5 renamed it and warns on the old name.
        named = "heartbeat_stale_trial_callback"
        callback = (
            named if named in inspect.signature(optuna.storages.RDBStorage).parameters else "failed_trial_callback"
        )
        return {"heartbeat_interval": self.interval, "grace_period": self.grace, callback: _stale}


_failed_here = threading.local()
"""The trials `fail_stale` failed in this thread: Optuna's callback collects them (each thread its own list)."""


def fail_stale(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Fail the study's trials whose search stopped beating, each recorded and queued again by the storage's
    callback; returns those failed here, with the reason in their attributes as `failure_of` gives it."""
    grace = grace_period(study)
    if grace is None:
        return []
    _failed_here.trials = []
    storage = opened_in(study)
    if journal_liveness(storage) is not None:
        _fail_silent(study, storage, grace)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
    failed: list[optuna.trial.FrozenTrial] = _failed_here.trials
    return failed


_silence_lock = threading.Lock()
_silence: dict[tuple[int, str, int], tuple[Any, float]] = {}
"""For each running trial of a journal seen here (storage, study, number): its beat count when first seen at that
count, and when that was by this process's monotonic clock."""


def _fail_silent(study: optuna.Study, storage: Any, grace: int) -> None:
    """Fail the journal study's running trials whose beat count this process has seen still for `grace` seconds."""
    now = time.monotonic()
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    silent = []
    with _silence_lock:
        ended = [k for k in _silence if k[:2] == (id(storage), study.study_name)]
        for key in set(ended) - {(id(storage), study.study_name, t.number) for t in running}:
            del _silence[key]  # finished since: nothing more to watch
        for frozen in running:
            key = (id(storage), study.study_name, frozen.number)
            beat = frozen.system_attrs.get(BEAT_KEY)
            seen = _silence.get(key)
            if seen is None or seen[0] != beat:
                _silence[key] = (beat, now)
            elif now - seen[1] >= grace:
                silent.append(frozen)
                del _silence[key]
    for frozen in silent:
        try:
            storage.set_trial_state_values(trial_id(study, frozen.number), optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # it finished, or another search failed it first: that one says why and queues it again
        _stale(study, frozen)


def _stale(study: optuna.Study, frozen: optuna.trial.FrozenTrial) -> None:
    """Optuna's callback for a trial it has just failed as stale (once, in the search that failed it)."""
    retry = len(frozen.system_attrs.get("retry_history", [])) < MAX_RETRIES
    record = record_of(frozen)
    message = (
        f"abandoned: the search that ran it (pid {record.pid} on "
        f"{record.host}) sent no heartbeat for {grace_period(study)} s"
        + ("; its configuration is queued again" if retry else "; not queued again: it was a retry already")
    )
    update_study_record(study, abandoned={frozen.number: message})
    if retry:
        _queue_again(study, frozen)
    shown = copy.deepcopy(frozen)
    abandoned = RunRecord(state="failed", reason="abandoned", message=message)
    shown.user_attrs[TRIAL_KEY] = replace(record, run=abandoned).to_dict()
    getattr(_failed_here, "trials", []).append(shown)


def failure_of(trial: optuna.trial.FrozenTrial, study: StudyRecord) -> tuple[str, str]:
    """Why a trial failed, and the message: its own record's, or for a trial failed as stale by another search's
    heartbeat, or left by a killed search, what was recorded in the study's record; ('', '') for a trial that did
    not fail."""
    message = study.abandoned.get(trial.number)
    record = record_of(trial)
    if trial.state == optuna.trial.TrialState.FAIL and record.run is None and isinstance(message, str):
        return "abandoned", message
    return record.reason, record.message


def retried_numbers(trials: list[optuna.trial.FrozenTrial]) -> set[int]:
    """The numbers of trials whose configuration was queued again: their retry counts towards --trials instead."""
    return {number for t in trials for number in t.system_attrs.get("retry_history", [])}


def _queue_again(study: optuna.Study, frozen: optuna.trial.FrozenTrial) -> None:
    frozen = copy.deepcopy(frozen)  # the caller's copy keeps what this trial found
    # What chose the configuration is kept, not what measuring it found.
    frozen.user_attrs = queued_attrs(record_of(frozen).requeued(frozen.number))
    # Optuna's own retry callback: the same parameters as a waiting trial, which the next `ask` of any host takes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)  # Optuna 5's name
        (retry or optuna.storages.RetryFailedTrialCallback)(max_retry=MAX_RETRIES)(study, frozen)


def grace_period(study: optuna.Study) -> int | None:
    """Seconds without a beat after which the study's trials are stale; None when its storage keeps no heartbeats."""
    storage = opened_in(study)
    journal = journal_liveness(storage)
    if journal is not None:
        return journal[1]
    if not isinstance(storage, optuna.storages.RDBStorage):
        return None
    interval = storage.get_heartbeat_interval()
    if interval is None:
        return None
    return storage.grace_period or 2 * interval


def _interval(storage: optuna.storages.BaseStorage) -> int:
    """Seconds between two beats in a storage that keeps them."""
    journal = journal_liveness(storage)
    if journal is not None:
        return journal[0]
    assert isinstance(storage, optuna.storages.RDBStorage)
    return storage.get_heartbeat_interval() or 1


def beats(study: optuna.Study) -> bool:
    """Whether the study's storage keeps heartbeats (opened with `Liveness.storage_kwargs`)."""
    return grace_period(study) is not None


def trial_id(study: optuna.Study, number: int) -> int:
    """The storage's id of the study's trial `number`, which its storage methods take (study opened here)."""
    storage = opened_in(study)
    assert storage is not None, "a study opened by autotune.study.storage"
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study.study_name), number)


class Heartbeat:
    """Beats for one running trial of a shared study from a thread, failing other searches' stale trials meanwhile.

    The first beat is written before the trial runs: a trial with no beat is never stale.
    A beat that fails (the server is briefly unreachable) is tried again at the next one.
    """

    def __init__(self, study: optuna.Study, number: int) -> None:
        self.study = study
        self.number = number
        self.storage = opened_in(study) if beats(study) else None
        self.failed: list[optuna.trial.FrozenTrial] = []
        """Other searches' trials this heartbeat's thread failed as stale."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beats = 0

    def __enter__(self) -> Heartbeat:
        if self.storage is None:
            return self
        self._id = trial_id(self.study, self.number)
        self._record()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{self.number}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _record(self) -> None:
        """One beat: Optuna's own in a database, the trial's raised beat count in a journal."""
        assert self.storage is not None
        if isinstance(self.storage, optuna.storages.RDBStorage):
            self.storage.record_heartbeat(self._id)
            return
        self._beats += 1
        self.storage.set_trial_system_attr(self._id, BEAT_KEY, self._beats)

    def _beat(self) -> None:
        assert self.storage is not None
        interval = _interval(self.storage)
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # the next beat tries again; the grace period allows for it
                self._record()
                self.failed += fail_stale(self.study)
