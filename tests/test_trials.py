"""Which earlier outcome a trial may reuse instead of measuring the same configuration again."""

from __future__ import annotations

import optuna
import pytest

from autotune import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.study.campaign import Harness
from autotune.study.objective import Objective
from autotune.study.search import SearchOptions
from autotune.study.trials import TrialLoop

CONFIG = CompileConfig(scope="regional").to_dict()


def loop_with(state: optuna.trial.TrialState, reason: str = "") -> TrialLoop:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    attrs = {"config": CONFIG, **({"reason": reason} if reason else {})}
    value = 1.0 if state == optuna.trial.TrialState.COMPLETE else None
    study.add_trial(optuna.trial.create_trial(state=state, value=value, user_attrs=attrs))
    harness = Harness(spec="m:w", summary=WorkloadSummary(spec="m:w", task="infer"))
    options = SearchOptions(model="m:w", device="cpu")
    return TrialLoop(study, harness, options, Objective(), lambda *args: None)


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (optuna.trial.TrialState.COMPLETE, ""),
        (optuna.trial.TrialState.FAIL, "accuracy"),
        (optuna.trial.TrialState.FAIL, "graph_break"),
    ],
)
def test_outcomes_that_measuring_again_would_repeat_are_reused(state, reason) -> None:
    assert loop_with(state, reason)._reusable_twin(CONFIG, number=1) is not None


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (optuna.trial.TrialState.PRUNED, ""),
        (optuna.trial.TrialState.FAIL, "timeout"),
        (optuna.trial.TrialState.FAIL, "crash"),
        (optuna.trial.TrialState.FAIL, "oom"),
    ],
)
def test_outcomes_that_noise_may_have_caused_are_measured_again(state, reason) -> None:
    assert loop_with(state, reason)._reusable_twin(CONFIG, number=1) is None
