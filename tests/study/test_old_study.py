"""A study written before the study record: it exports, resumes and retunes with today's autotune.

`tests/recorded/detour-study-2026-12-07` is a real search's study.db and best.yaml, kept as the
autotune of that day wrote them, its study's state in loose study attributes:

    autotune search --model tests.trial_targets.dynamo_only:detour_infer
        --space tests/retune_spaces/whole_or_regional.yaml --trials 3 --confirm 1 --replicates 2
        --max-replicates 2 --sampler random --seed 2 --windows 2 --slow-ratio 0 --compile-budget 0
        --window-seconds 0.25 --device cpu --no-compile-cache

Its trials compile with dynamo's eager backend (`tests.trial_targets.dynamo_only`), so each step
here takes seconds. Exporting reads the study and writes nothing to it; resuming or retuning
writes the whole record, with everything the loose attributes held.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import optuna
import pytest
import yaml

from autotune import cli, load
from autotune.runtime import environment
from autotune.study.report import export_from_storage
from autotune.study.storage import STUDY_KEY, read_study_record, record_of

OLD_STUDY = Path(__file__).parents[1] / "recorded" / "detour-study-2026-12-07"
WIDE = str(Path(__file__).parents[1] / "retune_spaces" / "whole_or_regional.yaml")
NAME = "tests.trial_targets.dynamo_only-detour_infer"
SPEC = "tests.trial_targets.dynamo_only:detour_infer"
MEASURING = [
    "--confirm", "1", "--replicates", "2", "--max-replicates", "2", "--windows", "2", "--window-seconds", "0.25",
    "--slow-ratio", "0", "--compile-budget", "0", "--no-compile-cache",
]  # fmt: skip
"""As the old study's search measured."""
DYNAMIC_SPACE = """\
description: Whole-model compilation with dynamic shapes, which the old study did not try.
scope: [whole]
dynamic: [true]
"""


def _study(folder: Path) -> optuna.Study:
    return optuna.load_study(study_name=NAME, storage=f"sqlite:///{folder / 'study.db'}")


def _run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli.main(list(args))
    return code, out.getvalue()


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of the old study's folder, as measured in this environment.

    A search refuses to resume a study measured with another torch or Python; the study was
    measured with those of its day, so the environment this one runs in is written in its place,
    in the loose attribute the old study keeps it in.
    """
    folder = tmp_path / "detour"
    shutil.copytree(OLD_STUDY, folder)
    study = _study(folder)
    assert STUDY_KEY not in study.user_attrs, "a study from before the record"
    recorded = study.user_attrs["environment"]
    here = environment.fingerprint("cpu")
    study.set_user_attr("environment", {**recorded, **{key: here[key] for key in ("torch", "cuda", "python")}})
    return folder


@pytest.mark.parallel  # measures nothing
def test_an_old_study_exports_what_it_exported_then_and_is_left_as_it_was(old: Path, tmp_path: Path) -> None:
    before = _study(old).user_attrs
    result = export_from_storage(f"sqlite:///{old / 'study.db'}", NAME, tmp_path / "exported")
    then = yaml.safe_load((OLD_STUDY / "best.yaml").read_text())
    now = yaml.safe_load((tmp_path / "exported" / "best.yaml").read_text())
    assert result.best_number is None and now["config"] == then["config"], "plain torch.compile, as then"
    assert now["metrics"]["verdict"] == then["metrics"]["verdict"]
    # The cost names the trials' accuracy checks apart since: runs of then did not record theirs, so they read 0 s
    # and the starts and stream passes keep all they had.
    then_rest = dict(then["metrics"]["cost"]["rest_seconds"])
    then_rest["trials' starts and stream passes"] = then_rest.pop("trials' starts, checks and stream passes")
    now_rest = dict(now["metrics"]["cost"]["rest_seconds"])
    assert now_rest.pop("trials' accuracy checks") == 0.0
    assert now_rest == then_rest, "the exporting session's stages and its trials"
    # Nor the checks of its later runs inside the warm restarts and the confirmation: none said, none counted.
    assert now["metrics"]["cost"].pop("check_seconds") == {"warm restarts": 0.0, "confirmation": 0.0}
    assert {k: v for k, v in now["metrics"]["cost"].items() if k != "rest_seconds"} == {
        k: v for k, v in then["metrics"]["cost"].items() if k != "rest_seconds"
    }
    for section in ("workload", "baselines"):
        assert now[section] == then[section], section
    assert {k: v for k, v in now["environment"].items() if k not in ("torch", "cuda", "python")} == {
        k: v for k, v in then["environment"].items() if k not in ("torch", "cuda", "python")
    }
    for key in ("name", "storage", "space", "sampler", "pruner", "seed", "device", "trials", "protocol", "doctor"):
        assert now["study"][key] == then["study"][key], key
    assert now["study"]["search_wall_seconds"] == then["study"]["search_wall_seconds"]
    assert _study(old).user_attrs == before, "exporting writes nothing to the study"


# The full tier: a search and a retune of the old study take a minute and a half of the fast tier's ten.
@pytest.mark.slow
@pytest.mark.parallel  # asserts what the resumed study holds, not how fast its trial ran (nothing prunes it)
def test_an_old_study_resumes_with_one_more_trial_and_keeps_what_it_held(old: Path, tmp_path: Path) -> None:
    before = read_study_record(_study(old))
    space = tmp_path / "dynamic.yaml"
    space.write_text(DYNAMIC_SPACE)
    code, out = _run_cli(
        "search", "--model", SPEC, "--space", str(space), "--trials", "4", "--sampler", "random", "--seed", "2",
        "--device", "cpu", *MEASURING, "--pruner", "none", "--out", str(old),
    )  # fmt: skip
    assert code == cli.EXIT_OK, out[-3000:]
    assert f"resuming study {NAME!r}: 3 trial(s) so far" in out
    study = _study(old)
    assert STUDY_KEY in study.user_attrs, "the resumed study holds its whole record"
    record = read_study_record(study)
    new = study.trials[3]
    assert new.state == optuna.trial.TrialState.COMPLETE and record_of(new).measured, record_of(new).message
    assert (record_of(new).config or {})["dynamic"] is True
    # What the old study held is kept: its scale (the new trial is on it), its doctor, its stacked recipes.
    assert record.scales == before.scales
    assert record_of(new).reference_samples_per_second == round(before.scales["compile"].samples_per_second, 4)
    assert record.doctor == before.doctor and record.stacked == before.stacked == []
    assert "doctor:" not in out, "the study kept the doctor's findings"
    # This session's: its baselines, its confirmation, its cost.
    assert record.baselines.measured and record.baselines.measured != before.baselines.measured
    assert record.space == "dynamic" and record.search_session is not None
    assert record.search_session.pid != (before.search_session.pid if before.search_session else None)
    assert record.confirmation is not None and before.confirmation is not None
    assert record.confirmation.to_dict() != before.confirmation.to_dict(), "this session confirmed again"
    exported = load(old / "best.yaml")
    assert exported.study["trials"]["total"] == 4 and exported.study["doctor"] == before.doctor


@pytest.mark.slow
@pytest.mark.parallel  # asserts what the retune writes; its paired windows and a 30% regression bound shrug off a neighbour
def test_an_old_study_retunes(old: Path) -> None:
    code, out = _run_cli(
        "retune", str(old / "best.yaml"), "--space", WIDE, "--trials", "1", "--replicates", "2",
        "--max-replicates", "2", "--max-regression", "0.3", "--no-compile-cache",
    )  # fmt: skip
    assert code == cli.EXIT_OK, out[-3000:]
    assert "decision: " in out
    study = _study(old)
    record = read_study_record(study)
    assert STUDY_KEY in study.user_attrs and record.model == SPEC
    # The warm start queued the old study's regional trial again, first, and measured it.
    again = study.trials[3]
    assert record_of(again).retune_role == "previous" and record_of(again).previous_trial == 1
    assert again.state == optuna.trial.TrialState.COMPLETE, record_of(again).message
    assert record.environment["torch"] == environment.fingerprint("cpu")["torch"]
    assert (old / "history.jsonl").is_file() and "retuned" in load(old / "best.yaml").metrics
