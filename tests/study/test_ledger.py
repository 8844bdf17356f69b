"""The study's trials as one search sees them: what counts towards --trials, the abandoned, the best to confirm."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
from typing import Any

import optuna
import pytest

from autotune import CompileConfig
from autotune.measure import Objectives
from autotune.study.search import StudyLedger
from autotune.study.storage import failure_of, read_study_record

pytestmark = pytest.mark.parallel

State = optuna.trial.TrialState
HOST = socket.gethostname()
REGIONAL = CompileConfig(scope="regional").to_dict()
FULLGRAPH = CompileConfig(knobs={"fullgraph": True}).to_dict()
PLAIN = CompileConfig().to_dict()


def trial(
    state: State,
    values: list[float] | None = None,
    *,
    ago: float = 0.0,
    **user_attrs: Any,
) -> optuna.trial.FrozenTrial:
    """A trial as a search records it; `ago` is how many seconds before now it started (and, if it ended, ended)."""
    at = datetime.datetime.now() - datetime.timedelta(seconds=ago)
    return optuna.trial.FrozenTrial(
        number=0,
        trial_id=0,
        state=state,
        value=None,
        values=values,
        datetime_start=at,
        datetime_complete=at if state.is_finished() else None,
        params={},
        distributions={},
        user_attrs=user_attrs,
        system_attrs={},
        intermediate_values={},
    )


def ledger_of(*trials: optuna.trial.FrozenTrial, objective: str = "throughput", timeout: float = 900.0):
    """A ledger of an in-memory study holding `trials`, and the notes it writes."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objectives = Objectives.parse(objective)
    study = optuna.create_study(directions=[o.direction for o in objectives.items])
    for frozen in trials:
        study.add_trial(frozen)
    notes: list[str] = []
    return StudyLedger(study, objectives, timeout=timeout, note=notes.append), notes


def gone_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_sqlite_or_memory_study_is_not_shared() -> None:
    ledger, _ = ledger_of()
    assert ledger.shared is False
    assert ledger.in_flight == set()


def test_started_counts_finished_trials_and_the_running_ones_that_may_still_finish() -> None:
    ledger, _ = ledger_of(
        trial(State.COMPLETE, [1.0]),
        trial(State.PRUNED),
        trial(State.FAIL),
        trial(State.RUNNING, host="another-host", pid=1),  # recent, on another host: may finish
        trial(State.RUNNING, ago=2000, host="another-host", pid=1),  # older than the hard timeout: cannot
        trial(State.RUNNING, host=HOST, pid=gone_pid()),  # its search's process is gone
        trial(State.RUNNING, host=HOST, pid=os.getpid()),  # this process's, but not in flight
    )
    assert len(ledger.finished()) == 3
    assert ledger.running() == 4, "a SQLite study counts every RUNNING row"
    assert ledger.started() == 4
    ledger.in_flight.add(6)
    assert ledger.started() == 5, "a trial this process runs now counts"


def test_a_trial_whose_search_process_is_gone_is_failed_as_abandoned_naming_the_pid() -> None:
    dead = gone_pid()
    ledger, notes = ledger_of(
        trial(State.RUNNING, host=HOST, pid=dead),
        trial(State.RUNNING, host=HOST, pid=os.getpid()),
        trial(State.RUNNING, host="another-host", pid=dead),
    )
    assert ledger.reap_abandoned() == 1
    states = [t.state for t in ledger.study.get_trials()]
    assert states == [State.FAIL, State.RUNNING, State.RUNNING]
    reason, message = failure_of(ledger.study.get_trials()[0], read_study_record(ledger.study))
    assert reason == "abandoned" and f"(pid {dead}) was killed" in message
    assert notes == [f"trial 0: FAIL {message}"]
    assert ledger.reap_abandoned() == 0, "a trial is reaped once"


def test_the_typical_trial_time_is_the_median_of_the_trials_measured() -> None:
    empty, _ = ledger_of(trial(State.COMPLETE, [1.0]))
    assert empty.typical_seconds() is None
    ledger, _ = ledger_of(
        trial(State.COMPLETE, [1.0], wall_seconds=10.0),
        trial(State.FAIL, wall_seconds=20.0),
        trial(State.COMPLETE, [2.0], wall_seconds=60.0),
        trial(State.COMPLETE, [2.0], wall_seconds=1000.0, duplicate_of=2),  # reused, not measured
        trial(State.COMPLETE, [3.0]),
    )
    assert ledger.typical_seconds() == 20.0


def test_the_best_trials_are_one_per_configuration_without_plain_compile_or_reused_outcomes() -> None:
    ledger, _ = ledger_of(
        trial(State.COMPLETE, [5.0], config=REGIONAL),
        trial(State.COMPLETE, [7.0], config=REGIONAL),
        trial(State.COMPLETE, [6.0], config=FULLGRAPH),
        trial(State.COMPLETE, [100.0], config=PLAIN),
        trial(State.COMPLETE, [50.0], config=FULLGRAPH, duplicate_of=2),
        trial(State.FAIL, config=CompileConfig(mode="max-autotune").to_dict()),
    )
    assert [t.number for t in ledger.best_distinct(3)] == [1, 2]
    assert [t.number for t in ledger.best_distinct(1)] == [1]
    assert ledger.best_distinct(0) == []


def test_a_time_to_study_keeps_the_shortest_first_and_says_its_best_total() -> None:
    trials = [trial(State.COMPLETE, [9.0], config=REGIONAL), trial(State.COMPLETE, [4.0], config=FULLGRAPH)]
    ledger, _ = ledger_of(*trials, objective="time-to:100")
    assert [t.number for t in ledger.best_distinct(2)] == [1, 0]
    assert ledger.best_total_seconds() == 4.0
    throughput, _ = ledger_of(*trials)
    assert throughput.best_total_seconds() is None, "only a time-to study has a total"


def test_the_front_to_confirm_is_one_trial_per_configuration_on_the_front_fastest_first() -> None:
    modes = [CompileConfig(mode=mode).to_dict() for mode in ("max-autotune", "reduce-overhead")]
    ledger, _ = ledger_of(
        trial(State.COMPLETE, [10.0, 30.0], config=REGIONAL),
        trial(State.COMPLETE, [8.0, 10.0], config=FULLGRAPH),
        trial(State.COMPLETE, [5.0, 5.0], config=modes[0]),
        trial(State.COMPLETE, [4.0, 20.0], config=modes[1]),  # dominated by trial 1
        trial(State.COMPLETE, [10.0, 30.0], config=REGIONAL, duplicate_of=0),
        objective="throughput,compile-time",
    )
    assert [t.number for t in ledger.front_distinct(5)] == [0, 1, 2]
    assert [t.number for t in ledger.front_distinct(2)] == [0, 2], "spread along the front: both ends"
