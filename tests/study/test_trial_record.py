"""A trial's record: one versioned user attribute, read back as its type; older studies' loose attributes converted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from autotune.errors import RecordError
from autotune.study.storage import TRIAL_KEY, TrialRecord, queue_trial, record_of, update_record
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel

OLD_STUDY = Path(__file__).parents[1] / "recorded" / "toy-trials-2026-11-29.json"
"""The eight trials of a real toy search, as a study stored them before the record existed."""


def _old_trials() -> list[dict]:
    return json.loads(OLD_STUDY.read_text())["trials"]


def _full() -> TrialRecord:
    run = RunRecord(
        state="complete",
        samples_per_second=410.0,
        batches_per_second=51.25,
        windows=[400.0, 420.0],
        compile_seconds=31.5,
        phase_seconds={"compile": 31.5, "measure": 8.0},
        compile_split={"inductor": 20.0},
        wall_seconds=52.0,
    )
    return TrialRecord(
        recipe="regional",
        retry_of=3,
        config={"scope": "regional"},
        description="regional",
        created="2026-11-29T10:00:00Z",
        source_sha256="ab" * 32,
        host="here",
        pid=41,
        run=run,
        first_run_samples_per_second=300.0,
        measured_between=[1.0, 9.0],
        baselines_of="here",
        speedup_vs_compile=1.08,
        speedup_vs_eager=1.5,
        scaled_samples_per_second=432.0,
        scaled_batches_per_second=54.0,
        paired_ratio=1.1,
        reference_level=1.02,
        reference_anchors=1,
        paired_windows=5,
        reference_samples_per_second=392.7,
    )


def test_a_record_round_trips_through_its_stored_form_and_json() -> None:
    record = _full()
    stored = json.loads(json.dumps(record.to_dict()))
    assert stored["version"] == 2
    assert TrialRecord.from_dict(stored) == record


def test_a_record_of_version_1_is_read_with_its_fields_under_their_names_since() -> None:
    # Version 1 named the count of paired windows `paired_blocks`: "blocks" also names a model's repeated blocks.
    record = _full()
    stored = {**record.to_dict(), "version": 1}
    stored["paired_blocks"] = stored.pop("paired_windows")
    assert TrialRecord.from_dict(stored) == record
    assert TrialRecord.from_loose({"paired_blocks": 7}).paired_windows == 7


def test_a_record_of_a_later_version_or_with_a_field_this_version_lacks_is_refused_by_name() -> None:
    stored = _full().to_dict()
    with pytest.raises(RecordError, match=r"version 3: this autotune reads versions 1 to 2"):
        TrialRecord.from_dict({**stored, "version": 3})
    with pytest.raises(RecordError, match=r"unknown field\(s\) colour"):
        TrialRecord.from_dict({**stored, "colour": "blue"})


def test_the_scaled_rate_and_the_runs_own_are_two_fields() -> None:
    record = _full()
    assert record.run is not None and record.run.samples_per_second == 410.0, "its own run, as it ran"
    assert record.samples_per_second == 432.0, "what tables show: on the study's scale"
    told = record.told()
    assert (told.samples_per_second, told.batches_per_second) == (432.0, 54.0), "what Optuna was told"
    unscaled = replace(record, scaled_samples_per_second=None, scaled_batches_per_second=None)
    assert unscaled.samples_per_second == 410.0 and unscaled.told().batches_per_second == 51.25


def test_a_study_written_today_holds_each_trial_in_one_attribute_and_reads_it_back() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(direction="maximize", storage=storage)
    queue_trial(study, {}, TrialRecord(recipe="plain"))
    trial = study.ask()
    update_record(trial, host="here", pid=41)
    update_record(trial, config={"scope": "whole"}, run=_full().run, scaled_samples_per_second=432.0)
    study.tell(trial, 432.0)
    (frozen,) = optuna.load_study(study_name=study.study_name, storage=storage).trials
    assert set(frozen.user_attrs) == {TRIAL_KEY}
    record = record_of(frozen)
    assert record == TrialRecord(
        recipe="plain", host="here", pid=41, config={"scope": "whole"}, run=_full().run, scaled_samples_per_second=432.0
    )


def test_a_study_written_before_the_record_reads_through_the_converter_with_nothing_lost() -> None:
    for trial in _old_trials():
        attrs = trial["user_attrs"]
        record = TrialRecord.from_loose(attrs)
        # Every loose attribute is in the record, under its name since (the count of paired windows was `paired_blocks`).
        renamed = {"paired_windows" if k == "paired_blocks" else k: v for k, v in attrs.items()}
        assert record.flat() == renamed, f"trial {trial['number']}: every loose attribute is in the record"
        assert record.state == attrs["state"] and record.config == attrs["config"]
        if "own_samples_per_second" in attrs:
            # Paired (or plain compile's run reused): the loose `samples_per_second` was the scaled rate.
            assert record.own.samples_per_second == attrs["own_samples_per_second"]
            assert record.samples_per_second == attrs["samples_per_second"]
        else:
            assert record.scaled_samples_per_second is None and record.samples_per_second == attrs["samples_per_second"]
    kinds = {(t["state"], "reused_run" in t["user_attrs"], "paired_ratio" in t["user_attrs"]) for t in _old_trials()}
    assert kinds == {("COMPLETE", True, False), ("COMPLETE", False, True), ("PRUNED", False, False)}, "every kind"


def test_record_of_reads_an_old_trial_and_the_first_update_carries_its_loose_attributes_into_the_record() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({}, user_attrs={"recipe": "regional", "retune": "2026-11-28"})  # queued by an older autotune
    trial = study.ask()
    update_record(trial, host="here")
    record = record_of(study.trials[0])
    assert (record.recipe, record.retune, record.host) == ("regional", "2026-11-28", "here")


def test_a_requeued_trial_keeps_why_it_was_asked_and_nothing_it_measured() -> None:
    again = _full().requeued(7)
    assert again == TrialRecord(recipe="regional", retry_of=7)
