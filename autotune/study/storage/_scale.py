"""The one scale every search-time rate of a study is on, whichever session or host measured it.

A trial's search-time rate is its paired ratio to the live reference times a rate. Were that
rate each session's own, a study resumed the next night, or shared by a faster host, would mix
scales: a machine 20% slower that night puts every new trial 20% below the old ones, and the
pruner's medians, the sampler and the choice of trials to confirm would read it as the trials'.
So the first session records its reference's rates in the study record (`StudyRecord.scales`, one
scale per baseline the trials were paired with), and every later session multiplies its ratios by them,
whatever its own machine measured. Only rates are on it: compile seconds (a `time-to:N`
objective's first term, a Pareto front's compile time) are each session's own.
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.study.storage._study_record import (
    REFERENCES,
    StudyRecord,
    ValueScale,
    read_study_record,
    update_study_record,
)
from autotune.study.storage._trial_record import record_of

__all__ = ["REFERENCES", "ValueScale", "adopt_scale", "scaled_baselines", "study_scale"]


def study_scale(study: optuna.Study, reference: str = "compile") -> ValueScale | None:
    """The scale `study`'s search-time rates paired with `reference` are on, if one was recorded."""
    scale = read_study_record(study).scales.get(reference)
    return scale if scale is not None and scale.usable else None


def adopt_scale(study: optuna.Study, measured: ValueScale) -> tuple[ValueScale, bool]:
    """The scale this session's search-time rates go on, and whether it is `measured` (this session's own).

    The study's recorded scale for the same reference; where there is none, the rates of the
    earliest trial paired with plain compile in a study begun before scales were recorded, else
    this session's: recorded either way, so that every later session adopts it. Two hosts that
    begin a shared study at once may both record theirs; the last write stands, and a search
    reads it again before each trial (`TrialLoop.follow_scale`).
    """
    recorded = study_scale(study, measured.reference)
    if recorded is not None:
        return recorded, False
    first = _earliest_paired(study) if measured.reference == "compile" else None
    chosen = first or measured
    if not chosen.usable:
        return measured, True  # nothing to scale by: the trials' rates stay this session's
    update_study_record(study, scales={chosen.reference: chosen})
    stored = study_scale(study, measured.reference) or chosen  # read back: another host may have written since
    return stored, stored == measured


def _earliest_paired(study: optuna.Study) -> ValueScale | None:
    """The reference's rates of the study's first trial paired with plain compile, in a study that recorded no scale."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        record = record_of(trial)
        if not record.measured or record.speedup_vs_compile is None:
            continue
        # Its own run's proportion of batches to samples: the stream's, whichever rate it is taken from.
        figures = [record.reference_samples_per_second, record.own.samples_per_second, record.own.batches_per_second]
        values = [float(x) for x in figures if isinstance(x, int | float) and x > 0]
        if len(values) != len(figures):
            continue
        rate, samples, batches = values
        # A stream's batches hold the same samples for every subject: the reference's batch rate is in that proportion.
        return ValueScale(
            reference="compile",
            samples_per_second=rate,
            batches_per_second=rate * batches / samples,
            host=record.host or "",
            measured=f"trial {trial.number}, before scales were recorded",
        )
    return None


def scaled_baselines(record: StudyRecord) -> dict[str, dict[str, Any]]:
    """The search-time baselines a study's record holds, each as flat figures (`SessionBaselines.figures`), their
    rates put on the study's scale where it has one: where the search's trials stand against them, whichever session
    measured."""
    baselines = {name: record.baselines.figures(name) for name in REFERENCES}
    over_eager = record.baselines.compile_over_eager  # plain compile's paired ratio to eager, latest session
    for reference in REFERENCES:  # plain compile's scale first: the one a search pairs with
        scale = record.scales.get(reference)
        if scale is None or not scale.usable:
            continue
        factors = {reference: 1.0}
        if isinstance(over_eager, int | float) and over_eager > 0:
            other = "eager" if reference == "compile" else "compile"
            factors[other] = 1 / over_eager if reference == "compile" else float(over_eager)
        for name, factor in factors.items():
            if not baselines[name]:
                continue  # not measured: nothing to place
            baselines[name]["samples_per_second"] = scale.samples_per_second * factor
            baselines[name]["batches_per_second"] = scale.batches_per_second * factor
        break
    return baselines
