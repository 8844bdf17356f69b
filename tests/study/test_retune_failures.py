"""A retune whose incumbent failed once: it is measured again before anything is claimed.

The campaigns are made up (`tests/measure/stands.py`) and stand in for the engine's
`measure`, so that the retune's own rule is tested alone: a failure in the last replicate is
run again, up to --max-replicates, and counts as a regression only when it happens again.
"""

from __future__ import annotations

import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autotune.measure import Campaign
from autotune.measure.engine import Replicate
from autotune.study.retune import _retune
from autotune.study.retune._retune import RetuneOptions
from tests.measure.stands import REGIONAL, campaign

pytestmark = pytest.mark.parallel  # made-up campaigns: no worker, no clock


def _retune_with(measured: list[Campaign], notes: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """A retune object, past everything but its measurement, whose `measure` hands out `measured` in turn."""
    calls = iter(measured)

    def measure(harness, subjects, **kwargs):
        given = kwargs.get("campaign")
        made = next(calls)
        if given is not None:  # the same campaign, carried on: keep the object, take the new replicates
            given.runs, given.replicates = made.runs, made.replicates
            return given
        return made

    monkeypatch.setattr(_retune, "measure", measure)
    retune = object.__new__(_retune._Retune)
    retune.options = RetuneOptions(path="best.yaml", replicates=3, max_replicates=4)
    retune.harness = types.SimpleNamespace(protocol=types.SimpleNamespace(window_seconds=0.25, warmup_windows=1))
    retune.objective = measured[0].objective
    retune.tuned = types.SimpleNamespace(config=REGIONAL, created="2026-11-28T00:00:00Z", metrics={"trial": 7})
    retune.out_dir = Path("never-written")
    retune.notes = notes
    retune.progress = lambda progress: notes.append(progress.message)
    monkeypatch.setattr(_retune, "first_windows", lambda protocol: 4)
    return retune


def _with(incumbent: list[float | None]) -> Campaign:
    measured = campaign(eager=[50.0] * len(incumbent), compile=[100.0] * len(incumbent), incumbent=incumbent)
    measured.subjects["incumbent"] = replace(measured.subjects["incumbent"], config=REGIONAL)
    measured.replicates = [Replicate(design="together", windows=4, batches_per_window=4) for _ in incumbent]
    return measured


def test_an_incumbent_that_failed_in_the_last_replicate_runs_again_and_a_failure_gone_is_no_regression(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes: list[str] = []
    retune = _retune_with([_with([120.0, 121.0, None]), _with([120.0, 121.0, None, 119.0])], notes, monkeypatch)
    measured, verdict = retune._measure(None)
    assert (
        "the incumbent failed once, in its last replicate after 3 replicate(s); measuring up to 4 to be sure" in notes
    )
    assert measured.replicate_count == 4 and verdict.decision == "unchanged" and not verdict.regressions
    assert "replicate 3 failed (accuracy) and its later runs did not: not reproduced" in verdict.warnings[0]


def test_an_incumbent_that_fails_again_is_a_regression(monkeypatch: pytest.MonkeyPatch) -> None:
    notes: list[str] = []
    retune = _retune_with([_with([120.0, 121.0, None]), _with([120.0, 121.0, None, None])], notes, monkeypatch)
    _, verdict = retune._measure(None)
    assert verdict.decision == "regression"
    assert verdict.regressions[0].startswith("the incumbent failed (accuracy) in replicates 3 and 4 (reproduced)")


def test_a_failure_already_run_again_needs_no_more_replicates(monkeypatch: pytest.MonkeyPatch) -> None:
    notes: list[str] = []
    retune = _retune_with([_with([120.0, None, 121.0])], notes, monkeypatch)
    measured, verdict = retune._measure(None)
    assert measured.replicate_count == 3 and verdict.decision == "unchanged"
    assert not any("measuring up to" in note for note in notes)
