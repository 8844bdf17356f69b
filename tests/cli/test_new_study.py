"""`--new` starts a study afresh instead of resuming it: its trials deleted first, and said so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from autotune import cli
from autotune.errors import SearchError
from autotune.study.storage import discard_study

ROOT = Path(__file__).resolve().parents[2]
FAST = str(ROOT / "tests" / "search_spaces" / "fast.yaml")


def _search(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "autotune", "search", "--model", "tests.trial_targets.dynamo_only:tiny_infer",
            "--space", FAST, "--trials", "1", "--confirm", "0", "--no-doctor", "--windows", "2",
            "--window-seconds", "0.1", "--device", "cpu", "--no-compile-cache", "--out", str(out), *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip


def _trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=None, storage=f"sqlite:///{out / 'study.db'}").trials


@pytest.mark.slow  # two searches: the full tier
@pytest.mark.parallel  # times nothing it asserts on
def test_new_starts_the_study_afresh_and_says_how_many_trials_it_deleted(tmp_path: Path) -> None:
    # Resuming says so (test_search's resume test): --new is the way out of it.
    out = tmp_path / "out"
    first = _search(out)
    assert first.returncode == cli.EXIT_OK, first.stderr[-3000:]
    before = [t.datetime_start for t in _trials(out)]
    fresh = _search(out, "--new")
    assert fresh.returncode == cli.EXIT_OK, fresh.stderr[-3000:]
    said = f"--new: deleted study 'tests.trial_targets.dynamo_only-tiny_infer' ({len(before)} trial(s))"
    assert said in fresh.stderr and "resuming study" not in fresh.stderr, fresh.stderr[-3000:]
    after = _trials(out)
    assert len(after) == len(before) and min(t.datetime_start for t in after) > max(before), "only new trials"


@pytest.mark.parallel  # times nothing
def test_discarding_a_study_that_is_not_there_creates_nothing(tmp_path: Path) -> None:
    assert discard_study(f"sqlite:///{tmp_path / 'study.db'}", "nothing") is None
    assert not (tmp_path / "study.db").exists()
    storage = f"sqlite:///{tmp_path / 'other.db'}"
    optuna.create_study(study_name="kept", storage=storage)
    assert discard_study(storage, "nothing") is None
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["kept"]


@pytest.mark.parallel  # times nothing
def test_new_refuses_a_shared_study_with_a_running_trial(monkeypatch) -> None:
    # A storage several hosts share: a running trial may be another host's search at work.
    from autotune.study.storage import _storage

    study = optuna.create_study(study_name="busy", storage=optuna.storages.InMemoryStorage())
    study.ask()
    monkeypatch.setattr(_storage, "check_storage_url", lambda url: _Parsed())
    monkeypatch.setattr(_storage, "open_storage", lambda url: study._storage)
    with pytest.raises(SearchError, match=r"--new: study 'busy' in .* has running trial\(s\) \[0\]"):
        discard_study("postgresql://host/db", "busy")


class _Parsed:
    database = "db"

    def get_backend_name(self) -> str:
        return "postgresql"
