"""A retune's warm start: the incumbent and the study's previous top trials are queued again, as today's space asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune import CompileConfig
from autotune.measure import Throughput
from autotune.runtime.summary import WorkloadSummary
from autotune.study.retune._warmstart import WarmStart
from autotune.study.search import load_space, params_for
from autotune.study.storage import SearchSettings, record_of

pytestmark = pytest.mark.parallel  # nothing runs: a study in memory

SPACES = Path(__file__).parent.parent / "retune_spaces"


def _study(space: Any, trials: list[tuple[CompileConfig, float | None]]) -> optuna.Study:
    """A study holding one complete trial per (configuration, value); None: a failed trial."""
    study = optuna.create_study(direction="maximize")
    for config, value in trials:
        study.enqueue_trial(params_for(space, config))
        trial = study.ask()
        assert space.suggest(trial) == config
        trial.set_user_attr("config", config.to_dict())
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            trial.set_user_attr("samples_per_second", value)
            study.tell(trial, value)
    return study


def _warm_start(study: optuna.Study, space: Any, incumbent: CompileConfig, top: int, notes: list[str]) -> WarmStart:
    """A WarmStart with what queueing reads: the study, the space, the incumbent, how many top trials."""

    class Tuned:
        config = incumbent

    return WarmStart(
        study=study,
        storage=None,
        storage_url="sqlite://",
        out_dir="unused",
        tuned=Tuned(),  # type: ignore[arg-type]
        harness=None,  # type: ignore[arg-type]
        space=space,
        space_name="default",
        settings=SearchSettings(),
        objective=Throughput(),
        trials=0,
        top=top,
        trial_timeout=60.0,
        date="2026-11-28",
        progress=lambda progress: None,
        note=notes.append,
    )


def test_the_incumbent_then_the_best_earlier_trials_are_queued_once_each(toy_summary: WorkloadSummary) -> None:
    space = load_space("default").adapt(toy_summary, "cpu")
    probe = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    configs: list[CompileConfig] = []
    while len(configs) < 4:
        config = space.suggest(probe.ask())
        if config not in configs and config != CompileConfig():
            configs.append(config)
    incumbent, best, second, third = configs
    # The incumbent ran too, and its twin; a failed trial ranks nowhere.
    study = _study(space, [(third, 10.0), (best, 30.0), (incumbent, 25.0), (second, 20.0), (best, 29.0), (third, None)])
    notes: list[str] = []
    queued = _warm_start(study, space, incumbent, top=2, notes=notes)._enqueue()
    assert queued == 3 and notes == []
    # What the search gets when it asks for its next trials, in order.
    asked = [study.ask() for _ in range(queued)]
    assert [space.suggest(trial) for trial in asked] == [incumbent, best, second]
    waiting = [study.get_trials(deepcopy=False)[trial.number] for trial in asked]
    assert [record_of(t).retune_role for t in waiting] == ["incumbent", "previous", "previous"]
    numbers = [record_of(t).previous_trial for t in waiting]
    assert numbers == [None, 1, 3], "each earlier configuration once, by its best trial"
    assert all(record_of(t).retune == "2026-11-28" for t in waiting)


def test_a_configuration_todays_space_cannot_ask_for_is_named_not_queued(toy_summary: WorkloadSummary) -> None:
    wide, narrow = (
        load_space(str(SPACES / name)).adapt(toy_summary, "cpu") for name in ("whole_or_regional.yaml", "regional.yaml")
    )
    whole, regional = CompileConfig(scope="whole"), CompileConfig(scope="regional")
    study = _study(wide, [(whole, 30.0), (regional, 20.0)])
    notes: list[str] = []
    queued = _warm_start(study, narrow, regional, top=3, notes=notes)._enqueue()
    assert queued == 1, "the incumbent, which the narrow space still asks for"
    assert notes == [f"{whole.describe()} is not in the space 'regional' any more, so it is not searched again"]


def test_a_brute_force_study_is_warm_started_at_random_once_its_space_asks_other_questions(
    toy_summary: WorkloadSummary,
) -> None:
    # Optuna's brute-force sampler failed with "param_name mismatch: None != scope" on a retune whose space had
    # grown a dimension since the search: its tree of answers cannot hold both.
    narrow, wide = (
        load_space(str(SPACES / name)).adapt(toy_summary, "cpu") for name in ("regional.yaml", "whole_or_regional.yaml")
    )
    study = _study(narrow, [(CompileConfig(scope="regional"), 30.0)])
    notes: list[str] = []
    same = _warm_start(study, narrow, CompileConfig(scope="regional"), top=1, notes=notes)
    same.settings = SearchSettings(sampler="bruteforce")
    assert same._sampler() == "bruteforce" and notes == []
    grown = _warm_start(study, wide, CompileConfig(scope="regional"), top=1, notes=notes)
    grown.settings = SearchSettings(sampler="bruteforce")
    assert grown._sampler() == "random"
    assert notes == [
        "the study's brute-force sampler cannot enumerate the space 'whole_or_regional' with the study's trials, "
        "which answered other questions (param_name mismatch: scope != None): the new trials are drawn at random"
    ]
    grown.settings = SearchSettings(sampler="tpe")
    assert grown._sampler() == "tpe", "any other sampler takes trials of any space"
