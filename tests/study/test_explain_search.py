"""A search that explains its failures: the culprit settings in report.md, and never run again in the study."""

from __future__ import annotations

import pytest

from autotune import CompileConfig
from autotune.cli import main
from autotune.measure import Harness
from autotune.study.search import EFFORTS, Culprits, default_study_name
from autotune.study.storage import load_search_study, read_study_record, record_of
from autotune.trial.run_record import RunRecord
from tests.short_runs import SHORT_FLAGS

pytestmark = pytest.mark.parallel

SKIPS = "tests.trial_targets.dynamo_only:skips_its_update_when_compiled"


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """A search of three configurations, each with the compiled optimizer step that skips its update."""
    folder = tmp_path_factory.mktemp("explained")
    space = folder / "space.yaml"
    space.write_text(
        "description: the compiled optimizer step, three ways\nmode: [default]\ndynamic: [null, false, true]\n"
        "compile_optimizer: [true]\n"
    )
    out = folder / "out"
    argv = ["search", "--model", SKIPS, "--space", str(space), "--trials", "3", "--confirm", "0", "--no-doctor"]
    argv += ["--no-compile-cache", "--no-recipes", "--sampler", "bruteforce", "--out", str(out), *SHORT_FLAGS]
    assert main([*argv, "--explain-failures", "--explain-budget", "120"]) == 0
    study = load_search_study(f"sqlite:///{out / 'study.db'}", default_study_name(SKIPS))
    return out, study


@pytest.mark.slow  # a whole search that narrows its failures: a minute and a half on two cores
def test_the_first_failure_is_narrowed_to_the_compiled_optimizer_step_in_the_report(explained) -> None:
    out, study = explained
    explanations = read_study_record(study).explanations
    assert list(explanations) == [0]
    assert explanations[0].settings == ["compile_optimizer"]
    report = (out / "report.md").read_text()
    assert "## Failures" in report
    row = next(line for line in report.splitlines() if line.startswith("| 0 | accuracy |"))
    assert "compile_optimizer=True (against plain compile)" in row
    assert "| dynamo (the eager backend: tracing alone) |" in row, "the failing stage is not named"
    assert "failures/trial-0/repro.py" in row
    assert (out / "failures" / "trial-0" / "repro.py").is_file()


@pytest.mark.slow  # the same search
def test_the_culprit_settings_are_not_run_again_in_the_study(explained) -> None:
    out, study = explained
    later = [t for t in study.get_trials(deepcopy=False) if t.number > 0]
    assert len(later) == 2
    for trial in later:
        record = record_of(trial)
        assert record.holds_culprit_of == 0, record
        assert "which made trial 0 fail" in record.message
        assert record.created is None, "its code was generated: it ran"
    report = (out / "report.md").read_text()
    assert "trials 1, 2 held them and were not run" in report
    assert "runs no configuration holding these settings again" in report


def test_thorough_effort_explains_failures_and_the_default_does_not() -> None:
    assert EFFORTS["thorough"].explain_failures
    assert not EFFORTS["default"].explain_failures and not EFFORTS["quick"].explain_failures


def test_a_failure_no_setting_causes_is_never_narrowed(tmp_path) -> None:
    culprits = Culprits(None, tmp_path, explain=True, budget=60, note=print)  # type: ignore[arg-type]
    harness = Harness(spec=SKIPS, summary=None)
    for reason in ("workload_error", "timeout", "crash", "runtime_error"):
        run = RunRecord(state="failed", reason=reason, wall_seconds=1.0)
        culprits.after_failure(harness, 0, CompileConfig(compile_optimizer=True), run)  # a narrowing would raise
    assert not (tmp_path / "failures").exists()
