"""The scale of a study's search-time rates: recorded by the session that begins it, adopted by every later one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from autotune.study.storage import (
    SessionBaselines,
    StudyRecord,
    ValueScale,
    adopt_scale,
    scaled_baselines,
    study_scale,
)
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel


def _scale(rate: float, reference: str = "compile") -> ValueScale:
    return ValueScale(
        reference=reference, samples_per_second=rate, batches_per_second=rate / 8, host="h", measured="2026-11-28"
    )


def _study(tmp_path: Path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s", direction="maximize")


def test_the_first_session_records_its_scale_and_a_later_one_adopts_it(tmp_path: Path) -> None:
    study = _study(tmp_path)
    first, mine = adopt_scale(study, _scale(500.0))
    assert mine and first == _scale(500.0)
    # The next night the machine runs 30% slower: its reference's own rate would put every new trial 30% below
    # the old ones. It takes the study's instead, read from the storage as any later process would.
    again = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    later, mine = adopt_scale(again, _scale(350.0))
    assert not mine and later == _scale(500.0)
    assert study_scale(again) == _scale(500.0), "the recorded scale is not overwritten"


def test_each_baseline_paired_with_has_a_scale_of_its_own(tmp_path: Path) -> None:
    # The first session paired trials with eager (plain compile failed there); a later one pairs with plain compile:
    # it records plain compile's scale, which every session after it adopts, and leaves eager's as it was.
    study = _study(tmp_path)
    adopt_scale(study, _scale(90.0, reference="eager"))
    own, mine = adopt_scale(study, _scale(500.0))
    assert mine and own == _scale(500.0)
    assert adopt_scale(study, _scale(350.0)) == (_scale(500.0), False)
    assert study_scale(study, "eager") == _scale(90.0, reference="eager")


def test_a_study_begun_before_scales_were_recorded_takes_its_first_paired_trial_s(tmp_path: Path) -> None:
    study = _study(tmp_path)
    for number, attrs in enumerate(
        [
            {"reused_run": "the plain torch.compile baseline", "samples_per_second": 300.0},  # no pairing of its own
            {"duplicate_of": 0, "samples_per_second": 300.0},
            {"speedup_vs_compile": 1.2, "reference_samples_per_second": 410.0, "samples_per_second": 492.0,
             "batches_per_second": 61.5},
            {"speedup_vs_compile": 1.1, "reference_samples_per_second": 380.0, "samples_per_second": 418.0,
             "batches_per_second": 52.25},
        ]
    ):  # fmt: skip
        study.add_trial(optuna.trial.create_trial(value=float(number), user_attrs=attrs))
    scale, mine = adopt_scale(study, _scale(350.0))
    assert not mine and scale.samples_per_second == 410.0 and scale.batches_per_second == pytest.approx(410.0 / 8)
    assert study_scale(study) == scale, "recorded, for every later session"


@pytest.mark.parametrize(
    "raw", ["fast", {"compile": "fast"}, {"compile": {"samples_per_second": 1.0}}, {"compile": _scale(0.0).to_dict()}]
)
def test_an_unreadable_or_empty_scale_of_a_study_written_before_the_record_is_none(tmp_path: Path, raw: object) -> None:
    study = _study(tmp_path)
    study.set_user_attr("value_scale", raw)  # the loose attribute that held the scales before the study's record
    assert study_scale(study) is None
    other = StudyRecord.from_loose({"value_scale": {"other": _scale(1.0).to_dict()}})
    assert other.scales == {}, "no such baseline"


def test_a_rate_of_zero_is_not_recorded(tmp_path: Path) -> None:
    study = _study(tmp_path)
    own, mine = adopt_scale(study, _scale(0.0))
    assert mine and own == _scale(0.0) and study_scale(study) is None


def test_the_search_time_baselines_are_placed_on_the_study_scale() -> None:
    # The latest session measured plain compile at 350 samples/s, 2x eager; the study's rates are on 500.
    record = StudyRecord(
        baselines=SessionBaselines(
            compile=RunRecord(state="complete", samples_per_second=350.0),
            eager=RunRecord(state="complete", samples_per_second=175.0),
            compile_over_eager=2.0,
        )
    )
    assert scaled_baselines(record)["compile"]["samples_per_second"] == 350.0, "no scale: the session's own"
    placed = scaled_baselines(replace(record, scales={"compile": _scale(500.0)}))
    assert placed["compile"]["samples_per_second"] == 500.0 and placed["eager"]["samples_per_second"] == 250.0
    assert placed["compile"]["batches_per_second"] == 62.5 and placed["compile"]["speedup_vs_eager"] == 2.0
    assert record.baselines.of("compile").samples_per_second == 350.0, "the study's records are untouched"
    on_eager = scaled_baselines(replace(record, scales={"eager": _scale(100.0, "eager")}))
    assert on_eager["eager"]["samples_per_second"] == 100.0 and on_eager["compile"]["samples_per_second"] == 200.0
