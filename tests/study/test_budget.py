"""A search's trial budget: --trials, --timeout and --max-failure-rate, and which search of a study confirms."""

from __future__ import annotations

import os
import socket
import time
import types

import optuna
import pytest

from autotune.errors import SearchError
from autotune.study.report import Plan
from autotune.study.search import SearchBudget, SearchOptions, StudyLedger
from autotune.study.search._budget import confirmation_seconds
from autotune.study.storage import read_study_record
from tests.study.test_ledger import ledger_of, trial

pytestmark = pytest.mark.parallel

State = optuna.trial.TrialState
MINE = {"host": socket.gethostname(), "pid": os.getpid()}


def budget_of(
    *trials: optuna.trial.FrozenTrial,
    exhausted: bool = False,
    started: float | None = None,
    **options: object,
) -> tuple[SearchBudget, StudyLedger, list[str]]:
    """The budget of a search over an in-memory study holding `trials`, and the notes it writes."""
    ledger, notes = ledger_of(*trials)
    # What the budget asks of the trial loop: its ledger, its study, and whether the space is used up.
    loop = types.SimpleNamespace(ledger=ledger, study=ledger.study, exhausted=exhausted)
    search = SearchOptions(model="m:w", device="cpu", **options)  # type: ignore[arg-type]
    budget = SearchBudget(search, loop, notes.append, started=time.monotonic() if started is None else started)  # type: ignore[arg-type]
    return budget, ledger, notes


def test_another_trial_starts_until_the_trials_started_reach_the_budget() -> None:
    done = [trial(State.COMPLETE, [1.0]), trial(State.PRUNED)]
    assert budget_of(*done, trials=3)[0].more()
    full, _, notes = budget_of(*done, trial(State.FAIL), trials=3)
    assert not full.more()
    assert notes == []
    running, _, _ = budget_of(*done, trial(State.RUNNING, host="another-host", pid=1), trials=3)
    assert not running.more(), "a trial another search runs now holds its place"


def test_a_used_up_space_stops_the_search_saying_after_how_many_trials() -> None:
    budget, _, notes = budget_of(trial(State.COMPLETE, [1.0]), trial(State.COMPLETE, [2.0]), exhausted=True)
    assert not budget.more()
    assert notes == ["every configuration of the space was measured after 2 trials"]


def test_the_timeout_counts_from_the_start_of_the_search() -> None:
    late, _, notes = budget_of(trial(State.COMPLETE, [1.0]), timeout=10.0, started=time.monotonic() - 20)
    assert not late.more()
    assert notes == ["--timeout 10 s reached after 1 trials"]
    assert budget_of(timeout=60.0, started=time.monotonic() - 20)[0].more()


def test_the_time_budget_keeps_a_typical_trial_and_the_confirmation_free() -> None:
    # 900 s spent of 1,000: a 60 s trial and a 100 s confirmation would end at 1,060 s.
    plan = Plan(typical_run=60.0, confirmation_seconds_guess=100.0)
    tight, _, notes = budget_of(trial(State.COMPLETE, [1.0]), time_budget=1000.0, started=time.monotonic() - 900)
    tight.plan = plan
    assert not tight.more()
    assert notes == [
        "--time-budget 1000 s: 900 s spent, and another trial (about 60 s) with the confirmation (about 100 s) "
        "would pass it; no more trials after 1"
    ]
    roomy, _, notes = budget_of(trial(State.COMPLETE, [1.0]), time_budget=1200.0, started=time.monotonic() - 900)
    roomy.plan = plan
    assert roomy.more() and notes == []
    cached, _, notes = budget_of(trial(State.COMPLETE, [1.0]), time_budget=1100.0, started=time.monotonic() - 900)
    cached.plan = Plan(typical_run=60.0, confirmation_seconds_guess=100.0, cache=1)  # the cache's runs come last
    assert not cached.more()
    assert "with the confirmation and the compile cache (about 160 s) would pass it" in notes[0]
    untimed, _, _ = budget_of(time_budget=1.0, started=time.monotonic() - 900)
    untimed.plan = Plan()
    assert untimed.more(), "before anything was timed, the first trial says what a trial costs"


def test_the_confirmation_gets_what_the_time_budget_leaves() -> None:
    options = SearchOptions(model="m:w", device="cpu", time_budget=1000.0)
    assert confirmation_seconds(options, started=100.0, now=800.0) == pytest.approx(300.0)
    assert confirmation_seconds(options, started=100.0, now=800.0, reserve=60.0) == pytest.approx(240.0)
    assert confirmation_seconds(options, started=100.0, now=5000.0) == 1.0, "spent: its least replicates only"
    assert confirmation_seconds(SearchOptions(model="m:w", device="cpu"), started=0.0, now=1.0) is None
    with pytest.raises(SearchError, match="--time-budget -5"):
        SearchOptions(model="m:w", device="cpu", time_budget=-5.0)


def test_more_failures_than_the_rate_allows_stop_the_search_naming_the_count_and_the_reasons() -> None:
    failed = [trial(State.FAIL, reason=r) for r in ("crash", "accuracy", "crash", "accuracy")]
    budget, ledger, notes = budget_of(trial(State.COMPLETE, [1.0]), *failed, max_failure_rate=0.5)
    assert not budget.more()
    expected = (
        "stopped searching: 4 of 5 trials failed, more than --max-failure-rate 50% (reasons: accuracy, crash); "
        "what completed is still confirmed"
    )
    assert notes == [expected]
    assert read_study_record(ledger.study).stopped == expected, "the study remembers why it stopped"


def test_the_failure_rate_is_judged_from_five_trials_and_only_above_the_limit() -> None:
    four_failed = [trial(State.FAIL, reason="crash") for _ in range(4)]
    assert budget_of(*four_failed, max_failure_rate=0.5)[0].more(), "four trials are too few to judge"
    at_limit, _, notes = budget_of(trial(State.COMPLETE, [1.0]), *four_failed, max_failure_rate=0.8)
    assert at_limit.more(), "4 of 5 is not more than 80%"
    assert notes == []


def test_start_notes_whether_the_budget_was_complete_with_nothing_running() -> None:
    under, _, _ = budget_of(trial(State.COMPLETE, [1.0]), trials=2)
    under.start()
    assert under.completed_before is False
    complete, _, _ = budget_of(trial(State.COMPLETE, [1.0]), trials=1)
    complete.start()
    assert complete.completed_before is True
    assert complete.confirms(), "a search started on a complete study confirms it"
    busy, _, _ = budget_of(trial(State.COMPLETE, [1.0]), trial(State.RUNNING, host="another-host", pid=1), trials=1)
    busy.start()
    assert busy.completed_before is False


def test_the_search_that_finished_the_last_trial_confirms() -> None:
    assert budget_of()[0].confirms(), "nothing finished: nobody else can confirm"
    mine_last = [trial(State.COMPLETE, [1.0], ago=10, host="another-host", pid=7), trial(State.COMPLETE, [2.0], **MINE)]
    assert budget_of(*mine_last)[0].confirms()
    # A trial failed as abandoned was finished by whoever noticed, not by the search that ran it.
    abandoned = trial(State.FAIL, ago=-5, reason="abandoned", host="another-host", pid=7)
    assert budget_of(*mine_last, abandoned)[0].confirms()
    # A search stopped with Ctrl-C records its running trial as interrupted, and is gone: it confirms nothing.
    interrupted = trial(State.FAIL, ago=-5, reason="interrupted", host="another-host", pid=8)
    assert budget_of(*mine_last, interrupted)[0].confirms()


def test_a_search_that_did_not_finish_the_last_trial_leaves_the_confirmation_and_says_who_does() -> None:
    last = trial(State.COMPLETE, [2.0], host="another-host", pid=4242)
    budget, _, notes = budget_of(trial(State.COMPLETE, [1.0], ago=10, **MINE), last, study_name="shared")
    assert not budget.confirms()
    (note,) = notes
    assert "(trial 1: pid 4242 on another-host) confirms and exports" in note
    assert "autotune export --storage sqlite:///" in note and "--study-name shared" in note


def test_while_other_searches_run_trials_the_confirmation_waits_for_the_last_of_them() -> None:
    running = trial(State.RUNNING, host="another-host", pid=1)
    budget, _, notes = budget_of(trial(State.COMPLETE, [1.0], **MINE), running)
    assert not budget.confirms()
    assert notes[0].startswith("other searches still run trials of the study: the last to finish confirms")


def test_only_a_shared_study_waits_for_other_searches_to_finish_its_budget() -> None:
    running = trial(State.RUNNING, host="another-host", pid=1)
    local, _, _ = budget_of(trial(State.COMPLETE, [1.0]), running, trials=2)
    assert not local.others_finish_it(), "a SQLite study has no other searches to wait for"
    shared, ledger, _ = budget_of(trial(State.COMPLETE, [1.0]), running, trials=2)
    ledger.shared = True
    assert shared.others_finish_it()
    short, ledger, _ = budget_of(trial(State.COMPLETE, [1.0]), running, trials=3)
    ledger.shared = True
    assert not short.others_finish_it(), "trials the budget still holds are this search's to run"
