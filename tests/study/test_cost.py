"""A search's cost: its wall time over the cold compiles it ran, and where the rest went, from the study alone."""

from __future__ import annotations

import optuna
import pytest

from autotune.measure import Campaign, Subject, Throughput
from autotune.study.report import cost_text, search_cost
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel  # nothing here runs a worker

SESSION = {"host": "here", "pid": 41, "workers": 1}


def _trial(study: optuna.Study, number: int, **attrs: object) -> None:
    study.add_trial(optuna.trial.create_trial(value=float(number), user_attrs={"host": "here", "pid": 41, **attrs}))


def _study() -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    study.set_user_attr("baseline.compile", {"compile_seconds": 40.0, "wall_seconds": 60.0})
    study.set_user_attr("search_session", SESSION)
    study.set_user_attr(
        "search_stages",
        {"doctor": 10.0, "baselines": 90.0, "trials": 200.0, "confirmation": 100.0, "compile cache": 30.0},
    )
    # Trial 0 reuses the baseline's run: it compiled nothing of its own.
    _trial(study, 0, reused_run="the plain compile baseline", compile_seconds=40.0, wall_seconds=60.0)
    phases = {"start": 2.0, "compile": 50.0, "restart": 12.0, "measure": 8.0}
    _trial(
        study,
        1,
        compile_seconds=50.0,
        wall_seconds=75.0,
        phase_seconds=phases,
        check_seconds=3.0,
        restart_check_seconds=1.5,  # inside its restart's 12 s
    )
    # Trial 2 stood stopped 2 s while another worker of its device measured: not its own time.
    _trial(
        study,
        2,
        compile_seconds=30.0,
        wall_seconds=50.0,
        paused_seconds=2.0,
        phase_seconds={**phases, "compile": 30.0, "restart": 8.0},
    )
    # Trial 3 asked for trial 1's configuration again and was given its outcome: it compiled nothing.
    _trial(study, 3, duplicate_of=1, compile_seconds=50.0, wall_seconds=75.0, phase_seconds=phases)
    study.set_user_attr("confirmation", _confirmation().to_dict())
    # A trial another search ran into the same study, earlier: not this session's cost.
    study.add_trial(
        optuna.trial.create_trial(value=3.0, user_attrs={"host": "there", "pid": 41, "compile_seconds": 99})
    )
    return study


def _confirmation() -> Campaign:
    """Two replicates of plain compile and trial 1, a run of each checked against its first run's record; trial 2 is
    plain compile (its runs are that baseline's, counted once); plain compile ran once more beside trial 1."""
    campaign = Campaign(objective=Throughput())
    checked = RunRecord(state="complete", samples_per_second=1.0, check_seconds=1.0)
    for subject in Subject.baselines():
        campaign.subjects[subject.name] = subject
    campaign.subjects["trial 1"] = Subject(name="trial 1", config=None, trial=1)
    campaign.subjects["trial 2"] = Subject(name="trial 2", config=None, trial=2, same_as="compile")
    campaign.runs = {"eager": [None, None], "compile": [checked, checked], "trial 1": [checked, checked]}
    campaign.runs["trial 2"] = campaign.runs["compile"]
    campaign.partners = {"compile": {"trial 1": [checked, None]}}
    return campaign


def test_the_cost_is_the_sessions_wall_time_over_its_own_cold_compiles() -> None:
    cost = search_cost(_study())
    assert cost is not None
    assert cost["cold_compiles"] == 3 and cost["cold_compile_seconds"] == 120.0  # 40 + 50 + 30
    assert cost["wall_seconds"] == 430.0 and cost["ratio"] == pytest.approx(430 / 120, abs=0.01)
    rest = cost["rest_seconds"]
    assert rest["baselines beyond plain compile's compile"] == 50.0
    assert rest["warm restarts"] == 20.0 and rest["paired windows"] == 16.0
    assert rest["trials' accuracy checks"] == 3.0
    assert rest["trials' starts and stream passes"] == (75 - 50 - 12 - 8) + (50 - 2 - 30 - 8 - 8) - 3
    assert rest["anchors and the study's bookkeeping"] == 200 - 80 - 7 - 20 - 16
    assert sum(rest.values()) + cost["cold_compile_seconds"] == pytest.approx(cost["wall_seconds"])
    # The later runs' checks against their first run's record, inside the parts that ran them: not added again.
    assert cost["check_seconds"] == {"warm restarts": 1.5, "confirmation": 5.0}


def test_the_cost_is_said_in_one_sentence_and_not_at_all_for_a_study_that_did_not_record_it() -> None:
    text = cost_text(search_cost(_study()))
    assert text.startswith("Cost: 7 min 10 s from the doctor to the compile cache, 3.58x its 2 min 00 s of 3 cold ")
    assert "compile(s), which one worker cannot do in less; the rest: doctor 10 s" in text
    assert "warm restarts 20 s (checks 2 s)" in text and "confirmation 1 min 40 s (checks 5 s)" in text
    assert "trials' accuracy checks 3 s, trials' starts" in text, "the first runs' checks are a part of their own"
    assert search_cost(optuna.create_study()) is None and cost_text(None) == ""
