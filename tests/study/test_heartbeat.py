"""A study shared in PostgreSQL: heartbeats, abandoned trials failed and queued again, the study's total budget.

These run against a real PostgreSQL server on the loopback (the `postgres_url` fixture);
the end-to-end tests with two `autotune search` processes are in test_shared_search.py.
"""

from __future__ import annotations

import datetime
import itertools
import os
import socket
import sys
import time
from types import SimpleNamespace

import optuna
import pytest

from autotune.errors import SearchError
from autotune.measure import Objective
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search import SearchOptions, TrialLoop
from autotune.study.storage import (
    Heartbeat,
    Liveness,
    TrialRecord,
    create_study,
    failure_of,
    load_search_study,
    opened_in,
    read_study_record,
    record_of,
    trial_id,
    update_record,
    update_study_record,
)

pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")

FAST = Liveness(interval=1, grace=2)
_names = itertools.count()


def _study(url: str, name: str | None = None) -> optuna.Study:
    name = name or f"shared-{os.getpid()}-{next(_names)}"
    return create_study(name, url, heartbeat=FAST.storage_kwargs(), direction="maximize")


def _beat(study: optuna.Study, trial: optuna.Trial) -> None:
    """One beat for `trial`, as its search's heartbeat writes it (Optuna's public storage API)."""
    storage = opened_in(study)
    assert storage is not None
    storage.record_heartbeat(trial_id(study, trial.number))


def _loop(study: optuna.Study, trials: int = 3) -> TrialLoop:
    options = SimpleNamespace(
        trials=trials, reuse_since=0, max_compile_seconds=None, compile_budget=4.0, pruner_name="median", slow_ratio=0.5
    )
    harness = SimpleNamespace(timeout=900.0)
    return TrialLoop(study, harness, options, Objective.parse("throughput"), lambda *args, **kwargs: None)  # type: ignore[arg-type]


def _silent_trial(study: optuna.Study, pid: int = 999_999, host: str = "host-b") -> optuna.Trial:
    """A trial of another host's search that beat once, then died."""
    trial = study.ask()
    trial.suggest_categorical("mode", ["default", "max-autotune"])
    update_record(trial, host=host, pid=pid, recipe="regional")
    _beat(study, trial)
    return trial


def test_a_trial_whose_search_stopped_beating_is_failed_with_its_reason_and_queued_again(postgres_url: str) -> None:
    study = _study(postgres_url)
    silent = _silent_trial(study)
    loop = _loop(study)
    assert loop.ledger.shared and loop.ledger.started() == 1, "a running trial counts towards --trials"
    assert loop.ledger.reap_abandoned() == 0, "within the grace period a trial is left alone"
    time.sleep(FAST.grace + 1.5)
    assert loop.ledger.reap_abandoned() == 1
    failed = study.trials[silent.number]
    assert failed.state == optuna.trial.TrialState.FAIL
    # Optuna fails the trial before its callback runs: the reason is the study's, read back as the trial's.
    reason, message = failure_of(failed, read_study_record(study))
    assert reason == "abandoned" and "pid 999999 on host-b" in message and "no heartbeat for 2 s" in message
    (retry,) = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert retry.params == failed.params
    assert record_of(retry) == TrialRecord(recipe="regional", retry_of=silent.number), (
        "what measuring found is not copied"
    )
    assert loop.ledger.started() == 0, "the abandoned trial's retry counts instead, once it runs"

    again = study.ask()
    assert again.number == retry.number and again.params == failed.params, "the next ask of any host takes the retry"


def test_a_retry_whose_search_died_too_is_not_queued_a_third_time(postgres_url: str) -> None:
    study = _study(postgres_url)
    _silent_trial(study)
    loop = _loop(study)
    time.sleep(FAST.grace + 1.5)
    loop.ledger.reap_abandoned()
    retry = study.ask()  # taken by a search that dies as well
    _beat(study, retry)
    time.sleep(FAST.grace + 1.5)
    assert loop.ledger.reap_abandoned() == 1
    assert "not queued again" in failure_of(study.trials[retry.number], read_study_record(study))[1]
    assert not study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert loop.ledger.started() == 1, "the last retry counts: it is the configuration's one place in the budget"


def test_a_live_trial_keeps_beating_and_fails_others_stale_trials_meanwhile(postgres_url: str) -> None:
    study = _study(postgres_url)
    silent = _silent_trial(study)
    mine = study.ask()
    with Heartbeat(study, mine.number) as heartbeat:
        time.sleep(FAST.grace + 3)
        other = _loop(_study(postgres_url, study.study_name))
        assert other.ledger.reap_abandoned() == 0, "a beating trial is never stale"
    assert study.trials[mine.number].state == optuna.trial.TrialState.RUNNING
    assert [t.number for t in heartbeat.failed] == [silent.number], "the heartbeat's thread failed the silent one"
    assert record_of(heartbeat.failed[0]).reason == "abandoned", "what the search notes about it"


def test_a_trial_whose_search_died_before_its_first_beat_is_not_waited_for_past_the_trial_timeout(
    postgres_url: str,
) -> None:
    study = _study(postgres_url)
    orphan = optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING)
    orphan.datetime_start = datetime.datetime.now() - datetime.timedelta(seconds=900 + FAST.grace + 1)
    study.add_trial(orphan)
    young = study.ask()
    loop = _loop(study)
    assert loop.ledger.running() == 1 and loop.ledger.started() == 1, "only the trial that may still finish counts"
    assert study.trials[young.number].state == optuna.trial.TrialState.RUNNING


def test_a_search_whose_trial_was_failed_by_another_host_drops_its_outcome_and_goes_on(
    postgres_url: str, monkeypatch
) -> None:
    study = _study(postgres_url)
    loop = _loop(study)
    notes: list[str] = []
    loop.report = lambda number, phase, message="": notes.append(message)

    def outage(trial: optuna.Trial, *where: object) -> None:
        storage = opened_in(study)
        assert storage is not None
        storage.set_trial_state_values(trial_id(study, trial.number), optuna.trial.TrialState.FAIL)  # another host's
        trial.set_user_attr("samples_per_second", 1.0)

    monkeypatch.setattr(loop, "_run", outage)
    loop.space = SimpleNamespace()  # type: ignore[assignment]
    loop.one_trial()
    assert any("another search failed it as abandoned" in note for note in notes)


def test_any_host_can_read_a_shared_study_and_its_trials_own_host_and_pid(postgres_url: str) -> None:
    study = _study(postgres_url)
    update_study_record(study, workload=WorkloadSummary(spec="tests.trial_targets.workloads:tiny_infer", task="infer"))
    trial = study.ask()
    trial.set_user_attr("host", socket.gethostname())
    study.tell(trial, 1.0)
    loaded = load_search_study(postgres_url, study.study_name)
    assert [t.value for t in loaded.trials] == [1.0]


@pytest.mark.parallel  # a unit test
def test_a_postgresql_url_without_its_driver_says_which_extra_installs_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(SearchError, match=r"pip install autotune\[postgres\]") as raised:
        create_study("any", "postgresql://tuner:secret@127.0.0.1:9/db", direction="maximize")
    assert "secret" not in str(raised.value), "a password in the URL is not printed"


@pytest.mark.parallel  # a unit test
def test_a_grace_period_no_longer_than_the_heartbeat_interval_is_refused() -> None:
    with pytest.raises(SearchError, match="--heartbeat-interval 60 and --grace-period 60"):
        SearchOptions(model="tests.trial_targets.workloads:tiny_infer", heartbeat_interval=60, grace_period=60)


def test_a_search_frozen_inside_a_write_does_not_hold_the_trial_from_other_searches(
    postgres_url: str, monkeypatch
) -> None:
    # A host that hangs, or loses its network, between two statements of a transaction keeps the
    # trial's row locked; the server ends that session after the limit, and the others go on.
    import sqlalchemy

    from autotune.study.storage import _storage

    monkeypatch.setattr(_storage, "IDLE_IN_TRANSACTION_SECONDS", 2)
    study = _study(postgres_url)
    trial = study.ask()
    frozen = _storage.open_storage(postgres_url + "?options=-c%20application_name%3Dfrozen").engine.connect()
    assert frozen.execute(sqlalchemy.text("show application_name")).scalar_one() == "frozen", "the URL's options stay"
    assert frozen.execute(sqlalchemy.text("show idle_in_transaction_session_timeout")).scalar_one() == "2s"
    frozen.execute(sqlalchemy.text(f"select * from trials where trial_id = {trial_id(study, trial.number)} for update"))
    # The frozen host now holds the row, in a transaction it never ends; the other search writes the same row.
    other = _storage.open_storage(postgres_url)
    started = time.monotonic()
    with other.engine.connect() as connection:
        connection.execute(sqlalchemy.text("set lock_timeout = '20s'"))  # without the limit: an error after 20 s
        connection.execute(
            sqlalchemy.text(f"update trials set state = 'FAIL' where trial_id = {trial_id(study, trial.number)}")
        )
        connection.commit()
    assert time.monotonic() - started < 15, "the other search waited on the frozen host's lock"
    with pytest.raises(sqlalchemy.exc.DBAPIError, match="idle-in-transaction"):
        frozen.execute(sqlalchemy.text("select 1"))  # the server ended the frozen session
