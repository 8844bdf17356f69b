"""`autotune studies`: every study in an output folder (or a storage), with its trials and the verdict beside it."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.runtime.summary import WorkloadSummary
from tests.best_yaml import write_best

pytestmark = pytest.mark.parallel  # times nothing


def _study(folder: Path, name: str, model: str, states: list[optuna.trial.TrialState]) -> None:
    folder.mkdir(parents=True)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{folder / 'study.db'}")
    study.set_user_attr("model", model)
    study.set_user_attr("device", "cpu")
    for state in states:
        trial = study.ask()
        if state == optuna.trial.TrialState.COMPLETE:
            study.tell(trial, 1.0)
        else:
            study.tell(trial, state=state)


def test_studies_lists_each_study_of_a_folder_of_outputs_with_its_trials_and_verdict(tmp_path: Path, capsys) -> None:
    complete, pruned = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
    _study(tmp_path / "mypkg.tune-model", "mypkg.tune-model", "mypkg.tune:model", [complete, complete, pruned])
    verdict = "trial 2 is exported: a gain, 1.11x [1.03, 1.20] plain torch.compile and 1.21x [1.12, 1.30] eager."
    write_best(
        tmp_path / "mypkg.tune-model" / "best.yaml",
        WorkloadSummary(spec="mypkg.tune:model", task="train"),
        metrics={"verdict": verdict},
    )
    _study(tmp_path / "other-net", "other-net", "other:net", [])
    assert cli.main(["studies", str(tmp_path)]) == cli.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    database = tmp_path / "mypkg.tune-model" / "study.db"
    assert out[:3] == [
        f"mypkg.tune-model  (sqlite:///{database})",
        "  model mypkg.tune:model on cpu; 2 complete, 1 pruned",
        f"  {verdict}",
    ]
    assert out[3:] == [
        f"other-net  (sqlite:///{tmp_path / 'other-net' / 'study.db'})",
        "  model other:net on cpu; no trials",
        "  not exported",
    ]
    # The same study by its storage: the folder's best.yaml is not looked for there.
    assert cli.main(["studies", "--storage", f"sqlite:///{database}"]) == cli.EXIT_OK
    assert capsys.readouterr().out.splitlines()[2] == "  not exported"


def test_a_folder_with_no_study_says_so_and_a_missing_one_is_an_error(tmp_path: Path, capsys) -> None:
    assert cli.main(["studies", str(tmp_path)]) == cli.EXIT_OK
    assert f"autotune: no study in {tmp_path}" in capsys.readouterr().err
    assert cli.main(["studies", str(tmp_path / "nowhere")]) == cli.EXIT_ERROR
    assert "no such folder; give the folder a search wrote into" in capsys.readouterr().err
