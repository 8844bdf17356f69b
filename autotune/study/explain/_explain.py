"""Explaining one failed trial: narrow its settings, find the failing stage, write the reproduction, record it.

The search calls `explain_failure` for a trial it has just failed (with `--explain-failures`, or
under `--effort thorough`), and `autotune explain OUT_DIR TRIAL` calls `explain_in_folder` for
any failed trial of a study afterwards. Either way the explanation goes into the study's record
(`StudyRecord.explanations`), which report.md's Failures section and the search read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import optuna

from autotune.errors import SearchError
from autotune.measure import Harness
from autotune.runtime.config import CompileConfig
from autotune.study.explain._narrow import narrow
from autotune.study.explain._probe import COMPILER_FAILURES, explainable, short_probe
from autotune.study.explain._repro import ReproFacts, write_repro
from autotune.study.explain._stage import BISECTED, Stage, failing_stage
from autotune.study.storage import (
    Explanation,
    load_search_study,
    open_storage,
    read_study_record,
    record_of,
    update_study_record,
)
from autotune.trial.accuracy import PRECISION_TOLERANCE, tolerance_for

__all__ = ["BUDGET_FACTOR", "FAILURES", "default_budget", "explain_failure", "explain_in_folder", "explain_trial"]

BUDGET_FACTOR = 4.0
"""A narrowing may take this many times the failing trial's own first run, by default."""
FAILURES = "failures"
"""The folder of the reproductions in a study's output folder: failures/trial-N/."""

Note = Callable[[str], None]


def default_budget(first_run_seconds: float) -> float:
    """The seconds a narrowing may take by default: `BUDGET_FACTOR` times the failing trial's first run."""
    return round(BUDGET_FACTOR * max(first_run_seconds, 1.0), 1)


def explain_failure(
    harness: Harness,
    number: int,
    config: CompileConfig,
    *,
    reason: str,
    message: str,
    budget: float,
    out_dir: Path,
    option_needs: Mapping[str, str] | None = None,
    note: Note | None = None,
) -> Explanation:
    """Narrow trial `number`'s failing `config` within `budget` seconds and write its reproduction under `out_dir`."""
    say = note or (lambda text: None)
    started = time.monotonic()
    say(f"trial {number}: narrowing its {reason} failure to the settings that cause it (budget {budget:.0f} s)")
    found = narrow(config, short_probe(harness, reason), budget, option_needs=option_needs)
    facts = ReproFacts(
        spec=harness.spec,
        trial=number,
        reason=reason,
        message=(found.messages[-1] if found.messages else message),
        culprit=tuple(s.text for s in found.culprit),
        against=found.against,
        device=harness.device,
        tolerance=PRECISION_TOLERANCE if found.config.changes_precision else tolerance_for(None),
    )
    folder = out_dir / FAILURES / f"trial-{number}"
    script = write_repro(folder, harness.source(found.config), facts)
    stage = Stage("", f"not bisected: PyTorch's bisector finds stages of {' and '.join(BISECTED)} failures")
    if reason in BISECTED:
        say(f"trial {number}: finding the first compiler stage that fails (PyTorch's bisector)")
        stage = failing_stage(script, budget - (time.monotonic() - started))
        if stage.text:
            write_repro(folder, harness.source(found.config), replace(facts, stage=stage.text))
    explanation = Explanation(
        trial=number,
        reason=reason,
        settings=[s.name for s in found.culprit],
        described=[s.text for s in found.culprit],
        config=found.config.to_dict(),
        against=found.against,
        complete=found.complete,
        stage=stage.text,
        stage_note=stage.note,
        message=facts.message[:600],
        probes=found.probes,
        seconds=round(time.monotonic() - started, 2),
        budget=budget,
        repro=str(script.relative_to(out_dir)),
    )
    say(
        f"trial {number}: {reason} comes from {explanation.culprit_text}, failing stage: "
        f"{stage.text or stage.note}; reproduction in {script}"
    )
    return explanation


def explain_trial(
    study: optuna.Study,
    number: int,
    out_dir: Path,
    *,
    budget: float | None = None,
    option_needs: Mapping[str, str] | None = None,
    note: Note | None = None,
) -> Explanation:
    """Explain failed trial `number` of `study` and record the explanation in the study's record."""
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    if number not in trials:
        raise SearchError(
            f"trial {number} is not in study {study.study_name!r}; its trials are 0 to {len(trials) - 1}."
        )
    trial = trials[number]
    record = record_of(trial)
    if trial.state != optuna.trial.TrialState.FAIL:
        raise SearchError(
            f"trial {number} did not fail (it is {trial.state.name.lower()}): only a failed one is explained."
        )
    if not explainable(record.reason) or record.config is None:
        raise SearchError(
            f"trial {number} failed as {record.reason or 'unknown'!r}, which no compile setting causes: only "
            f"{', '.join(COMPILER_FAILURES)} failures are explained."
        )
    study_record = read_study_record(study)
    harness = Harness(spec=study_record.model, summary=study_record.workload, device=study_record.device or "cpu")
    explanation = explain_failure(
        harness,
        number,
        CompileConfig.from_dict(record.config),
        reason=record.reason,
        message=record.message,
        budget=budget if budget is not None else default_budget(record.own.wall_seconds),
        out_dir=out_dir,
        option_needs=option_needs,
        note=note,
    )
    update_study_record(study, explanations={number: explanation})
    return explanation


def explain_in_folder(
    out_dir: Path,
    number: int,
    *,
    study_name: str | None = None,
    budget: float | None = None,
    option_needs: Mapping[str, str] | None = None,
    note: Note | None = None,
) -> Explanation:
    """`autotune explain OUT_DIR TRIAL`: explain a failed trial of the study in `out_dir`'s study.db."""
    database = out_dir / "study.db"
    if not database.is_file():
        raise SearchError(f"{out_dir}: there is no study.db; give the folder a search wrote into.")
    storage = f"sqlite:///{database}"
    if study_name is None:
        names = [s.study_name for s in optuna.get_all_study_summaries(open_storage(storage), include_best_trial=False)]
        if len(names) != 1:
            raise SearchError(f"{database} holds the studies {names}; name one with --study-name.")
        study_name = names[0]
    study = load_search_study(storage, study_name)
    return explain_trial(study, number, out_dir, budget=budget, option_needs=option_needs, note=note)
