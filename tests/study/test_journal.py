"""A journal file as the study's storage: its URL, and a dead host's trial failed by the others' own clocks."""

from __future__ import annotations

import time
from pathlib import Path

import optuna
import pytest

from autotune.errors import SearchError
from autotune.study.storage import BEAT_KEY, Liveness, create_study, fail_stale, failure_of, read_study_record
from autotune.study.storage._storage import check_storage_url, journal_path

pytestmark = pytest.mark.parallel  # sleeps past a grace period of its own; measures nothing


def test_a_journal_url_names_its_file_and_a_missing_folder_is_named(tmp_path: Path) -> None:
    assert journal_path(f"journal://{tmp_path}/study.journal") == tmp_path / "study.journal"
    assert check_storage_url(f"journal://{tmp_path}/study.journal") == tmp_path / "study.journal"
    assert journal_path("sqlite:///x.db") is None
    with pytest.raises(SearchError, match=f"the folder {tmp_path / 'nowhere'} does not exist"):
        journal_path(f"journal://{tmp_path}/nowhere/study.journal")
    with pytest.raises(SearchError, match="names no file"):
        journal_path(f"journal://{tmp_path}/")


def _host(url: str) -> optuna.Study:
    """The study as one host's search opens it: its own storage object, with heartbeats."""
    return create_study("shared", url, heartbeat=Liveness(interval=1, grace=2).storage_kwargs())


def test_a_silent_trial_is_failed_by_one_host_and_queued_again_once_and_a_beating_one_is_left(tmp_path: Path) -> None:
    url = f"journal://{tmp_path}/study.journal"
    a, b, owner = _host(url), _host(url), _host(url)
    silent, beating = owner.ask(), owner.ask()
    silent.suggest_categorical("mode", ["default", "max-autotune"])
    storage = owner._storage
    storage.set_trial_system_attr(silent._trial_id, BEAT_KEY, 1)
    storage.set_trial_system_attr(beating._trial_id, BEAT_KEY, 1)
    assert fail_stale(a) == fail_stale(b) == [], "first seen now: no host has watched them for the grace period"
    time.sleep(1.0)
    storage.set_trial_system_attr(beating._trial_id, BEAT_KEY, 2)
    assert fail_stale(a) == fail_stale(b) == [], "still for 1 s of a grace period of 2"
    time.sleep(1.2)
    storage.set_trial_system_attr(beating._trial_id, BEAT_KEY, 3)
    failed = fail_stale(a) + fail_stale(b)
    assert [t.number for t in failed] == [silent.number], "failed once, by one host; the beating trial is left"
    trials = owner.get_trials(deepcopy=False)
    assert trials[silent.number].state == optuna.trial.TrialState.FAIL
    assert trials[beating.number].state == optuna.trial.TrialState.RUNNING
    waiting = [t for t in trials if t.state == optuna.trial.TrialState.WAITING]
    assert len(waiting) == 1 and waiting[0].system_attrs["retry_history"] == [silent.number]
    assert waiting[0].params == trials[silent.number].params
    reason, message = failure_of(trials[silent.number], read_study_record(owner))
    assert reason == "abandoned" and "no heartbeat for 2 s" in message and "queued again" in message
