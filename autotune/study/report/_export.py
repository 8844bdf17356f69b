"""Exporting a study: best.yaml, apply_compilation.py, trials.csv, report.md and its plots.

Everything is read back from the study's storage (its record and its trials' records), so
`autotune export --storage URL --study-name NAME` gives the same files as the search. What
is exported is decided by `choice.choose` on the confirmation campaign: never worse than
plain torch.compile or eager.
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
import yaml

from autotune.errors import SearchError
from autotune.measure import (
    DEFAULT_PICK,
    Campaign,
    Choice,
    Objectives,
    Subject,
    baseline_figures,
    choose,
    metrics,
    parse_pick,
)
from autotune.measure.choice import Pick, choose_point, point_figures
from autotune.measure.format import utc_now
from autotune.runtime.config import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.runtime.tuned import TunedConfig, write_atomic
from autotune.study.report._cost import search_cost
from autotune.study.report._files import written_together
from autotune.study.report._verdict import best_trials
from autotune.study.storage import (
    StudyRecord,
    failure_of,
    load_search_study,
    read_study_record,
    record_of,
    scaled_baselines,
    trial_rank,
    trial_value,
)
from autotune.trial.compile_split import SPLIT_PARTS
from autotune.trial.run_record import RunRecord

__all__ = [
    "SearchResult",
    "campaign_of",
    "export_from_storage",
    "export_study",
    "exported_choice",
    "pruning_savings",
    "study_summary",
    "trial_rows",
    "config_columns",
    "write_trials_csv",
]

_CSV_COLUMNS = (
    "number",
    "state",
    "reason",
    "value",
    "samples_per_second",
    "own_samples_per_second",
    "first_run_samples_per_second",
    "paired_ratio",
    "steady_samples_per_second",
    "batches_per_second",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "compile_seconds",
    *(f"compile_{part}_s" for part in SPLIT_PARTS),
    "fresh_recompiles",
    "peak_memory_mb",
    "graphs",
    "graph_breaks",
    "recompiles",
    "wall_seconds",
    "shared_build_seconds",
    # Workers that shared a device (--workers): how the trial stood beside the others.
    "device",
    "paused_seconds",
    "compile_concurrent_seconds",
    "quiet_pauses",
    "ran_alone",
    "duplicate_of",
    "description",
)


@dataclass(kw_only=True)
class SearchResult:
    """Where the exported files are, and the numbers behind the choice."""

    out_dir: Path
    best_number: int | None
    """The exported trial, or None when a baseline (plain torch.compile, or eager) is exported."""
    tuned_path: Path | None
    baselines: dict[str, dict[str, Any]]
    summary: dict[str, Any]
    """best.yaml's `study` section (its `best_trials` are the search table), plus `metrics` and the `campaign`."""


def export_from_storage(
    storage: str, study_name: str, out_dir: str | Path | None = None, *, pick: str | None = None
) -> SearchResult:
    """Re-export a study from any Optuna storage (default folder: outputs/<study-name>); `pick` as in export_study."""
    if pick is not None:
        parse_pick(pick)  # a bad rule is refused before the storage is opened
    study = load_search_study(storage, study_name)
    objectives = read_study_record(study).objectives
    if pick is not None and not objectives.multi:
        raise SearchError(
            f"--pick {pick}: study {study_name!r} has one objective ({objectives}), so there is no Pareto front to "
            "pick from; export it without --pick (a search with --objective throughput,compile-time has one)."
        )
    return export_study(study, Path(out_dir) if out_dir else Path("outputs") / study_name, pick=pick)


def campaign_of(study: optuna.Study) -> tuple[Campaign, bool]:
    """The study's confirmation campaign, and whether it is one (else the search-time runs of the best trial)."""
    study_record = read_study_record(study)
    if study_record.confirmation is not None and study_record.confirmation.subjects:
        return study_record.confirmation, True
    objective = study_record.objectives.primary
    campaign = Campaign(
        objective=objective,
        orders=[["eager", "compile"]],
        method=dict(study_record.method) if study_record.method is not None else None,
    )
    # Where the trials' search-time rates stand, whichever session measured them.
    searched = scaled_baselines(study_record)
    for subject in Subject.baselines():
        record = RunRecord.from_figures(searched[subject.name])
        campaign.subjects[subject.name] = subject
        campaign.runs[subject.name] = [record]
        if not record.complete:
            # The search measured each baseline once, starting cold: a failure is its first run's (the compile, the
            # accuracy check), a verdict with no second run to wait for (`Campaign.reproduced_failure`).
            campaign.cold[subject.name] = record
    complete = [
        t
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if trial_value(t) is not None and record_of(t).config is not None
    ]
    if complete:
        best = max(complete, key=lambda t: trial_rank(t, objective))
        trial = record_of(best)
        name = f"trial {best.number}"
        config = CompileConfig.from_dict(trial.config or {})
        campaign.subjects[name] = Subject(name=name, config=config, created=trial.created, trial=best.number)
        campaign.runs[name] = [replace(trial.told(), state="complete")]
        campaign.orders[0].append(name)
    return campaign, False


def exported_choice(study: optuna.Study, campaign: Campaign, pick: str | None = None) -> Choice:
    """What best.yaml ships: the never-worse choice, or for a multi-objective study the picked Pareto point."""
    record = read_study_record(study)
    if not record.objectives.multi:
        return choose(campaign)
    rule = parse_pick(pick or record.pick or DEFAULT_PICK)
    return choose_point(campaign, record.objectives, rule)[0]


def export_study(study: optuna.Study, out_dir: Path, *, pick: str | None = None) -> SearchResult:
    """Write the study's files into `out_dir` and return what was chosen.

    `pick` chooses the Pareto point of a multi-objective study (default: the one the search was given).
    """
    record = read_study_record(study)
    campaign, confirmed = campaign_of(study)
    if confirmed and campaign.looks is None:
        # Before method version 3 a confirmation judged plain 95% intervals after every replicate and over every
        # candidate: a candidate no faster than plain compile was claimed a gain in 11 to 18% of such campaigns.
        raise SearchError(
            f"study {study.study_name!r}: its confirmation was measured before autotune's intervals held over a "
            "campaign's looks and candidates (method version 2 or earlier), and is not exported on them: search "
            "again with --new, or measure its best configuration with `autotune validate`"
        )
    objectives = record.objectives
    choice = exported_choice(study, campaign, pick)
    trials = study.get_trials(deepcopy=False)
    rows = trial_rows(trials, record)
    summary = study_summary(study)
    extra: dict[str, Any] = {"confirmed": confirmed}
    if objectives.multi:
        extra["objectives"] = str(objectives)
        extra["pick"] = str(parse_pick(pick or record.pick or DEFAULT_PICK))
    figures = metrics(campaign, choice, extra=extra)
    if record.stopped:
        figures["stopped"] = record.stopped
    cost = search_cost(study)
    if cost is not None:
        figures["cost"] = cost
    baselines = {name: baseline_figures(campaign, name) for name in ("eager", "compile")}
    saved = record.compile_cache
    # Saved for another configuration (an older winner), it would not fit this one.
    cache = dict(saved.section) if saved is not None and saved.subject == choice.subject else {}
    recorded = dict(record.environment)
    if record.model_fingerprint is not None:
        recorded["model"] = record.model_fingerprint
    if record.workload is None:
        raise SearchError(f"study {study.study_name!r} records no workload: it was not made by `autotune search`")
    workload: WorkloadSummary = record.workload

    def tuned_for(chosen: Choice, figures: dict[str, Any], cache: dict[str, Any]) -> TunedConfig:
        return TunedConfig(
            workload=workload,
            config=chosen.config,
            created=campaign.subjects[chosen.subject].created or _created(study, chosen),
            metrics=figures,
            baselines=baselines,
            environment=recorded,
            study=summary,
            compile_cache=cache,
        )

    from autotune.study.report._report import write_report  # matplotlib is imported only when a report is drawn

    # Every file is written before any replaces its namesake: a full disk leaves the previous export whole.
    front: list[dict[str, Any]] = []
    with written_together(out_dir, "the exported files") as staging:
        write_trials_csv(staging, rows)
        if objectives.multi and confirmed:
            front = _write_front(staging, campaign, objectives, choice, lambda c, f: tuned_for(c, f, {}))
            figures["pareto"] = [{k: p[k] for k in ("subject", "figures", "best")} for p in front]
        tuned = tuned_for(choice, figures, cache)
        tuned.write(staging / "best.yaml")
        write_atomic(staging / "apply_compilation.py", tuned.source)
        write_report(staging, study, rows, campaign, tuned, confirmed=confirmed, front=front, history_from=out_dir)
    if front:
        _drop_stale_points(out_dir / PARETO_FOLDER, front)
    return SearchResult(
        out_dir=out_dir,
        best_number=choice.trial,
        tuned_path=out_dir / "best.yaml",
        baselines=baselines,
        summary={**summary, "metrics": figures, "campaign": campaign.to_dict()},
    )


PARETO_FOLDER = "pareto"


def _write_front(
    out_dir: Path,
    campaign: Campaign,
    objectives: Objectives,
    chosen: Choice,
    tuned_for: Callable[[Choice, dict[str, Any]], TunedConfig],
) -> list[dict[str, Any]]:
    """pareto.yaml and one folder per Pareto point (its best.yaml and apply_compilation.py); returns the points."""
    _, on_front = choose_point(campaign, objectives, parse_pick("fastest"))
    folder = out_dir / PARETO_FOLDER
    written = []
    for point in on_front:
        choice = choose_point(campaign, objectives, Pick("subject", subject=point.subject))[0]
        slug = point.subject.replace(" ", "-")
        tuned = tuned_for(choice, metrics(campaign, choice, extra={"confirmed": True, "objectives": str(objectives)}))
        tuned.write(folder / slug / "best.yaml")
        write_atomic(folder / slug / "apply_compilation.py", tuned.source)
        written.append(
            {
                "subject": point.subject,
                "trial": choice.trial,
                "exported": choice.exported,
                "picked": point.subject == chosen.subject,
                "config": choice.config.to_dict(),
                "figures": point_figures(campaign, objectives, point),
                "best": f"{PARETO_FOLDER}/{slug}/best.yaml",
                "code": f"{PARETO_FOLDER}/{slug}/apply_compilation.py",
            }
        )
    document = {
        "objectives": [str(o) for o in objectives],
        "picked": chosen.subject,
        "verdict": chosen.verdict,
        "points": written,
    }
    write_atomic(out_dir / "pareto.yaml", yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
    return written


def _drop_stale_points(folder: Path, front: list[dict[str, Any]]) -> None:
    """Remove the folders of an earlier export's Pareto points that are no longer on the front."""
    keep = {Path(str(p["best"])).parent.name for p in front}
    for stale in folder.iterdir() if folder.is_dir() else []:
        if stale.is_dir() and stale.name not in keep:
            for name in ("best.yaml", "apply_compilation.py"):
                (stale / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                stale.rmdir()


def _created(study: optuna.Study, choice: Choice) -> str:
    if choice.trial is not None:
        return str(record_of(study.trials[choice.trial]).created or utc_now())
    return utc_now()


def trial_rows(trials: list[optuna.trial.FrozenTrial], study: StudyRecord | None = None) -> list[dict[str, Any]]:
    """One flat row per trial: its figures, its speedups over the baselines of its session, its parameters; why a
    trial failed as `failure_of` reads it with the study's record (`study`)."""
    rows = []
    for trial in trials:
        attrs = record_of(trial).flat()
        reason, message = failure_of(trial, study or StudyRecord())
        row: dict[str, Any] = {
            "number": trial.number,
            "state": trial.state.name,
            "reason": reason,
            "value": trial_value(trial),
            **{k: attrs.get(k) for k in _CSV_COLUMNS if k not in ("number", "state", "reason", "value")},
            # Where its compile time went, one column per part (empty for a run that never compiled).
            **{f"compile_{part}_s": (attrs.get("compile_split") or {}).get(part) for part in SPLIT_PARTS},
            "message": message,
            # What the accuracy check noted of a run that passed it, joined into one cell.
            "notes": "; ".join(attrs.get("notes") or []),
        }
        if isinstance(attrs.get("config"), dict):
            row.update(config_columns(attrs["config"]))
            row["configuration"] = attrs.get("description", "")
        rows.append(row)
    return rows


def config_columns(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration a trial ran, as readable CSV columns: `mode`, `options.max_autotune`, `mark_dynamic`, ...

    Taken from the effective configuration (not from the sampler's parameters), so every
    column says what was compiled; nested settings get dotted names, marks read "input:axis".
    """
    columns: dict[str, Any] = {}
    for key, value in config.items():
        if key == "mark_dynamic":
            columns[key] = " ".join(f"{name}:{axis}" for name, axes in sorted(value.items()) for axis in axes)
        elif key == "options":
            columns.update({f"options.{name}": option for name, option in sorted(value.items())})
        elif key == "module_settings":
            for path, settings in sorted(value.items()):
                columns[f"{path}.mode"] = settings.get("mode")
                columns.update({f"{path}.options.{n}": v for n, v in sorted((settings.get("options") or {}).items())})
        else:
            columns[key] = value
    return columns


def write_trials_csv(out_dir: Path, rows: list[dict[str, Any]]) -> Path:
    """trials.csv: one row per trial (see `trial_rows`): figures, then the configuration it ran."""
    return write_atomic(out_dir / "trials.csv", _csv(rows))


def study_summary(study: optuna.Study) -> dict[str, Any]:
    """best.yaml's `study` section: name, storage, space, trial counts, failure reasons, pruning savings."""
    trials = study.get_trials(deepcopy=False)
    record = read_study_record(study)
    return _study_summary(study, record, trials, pruning_savings(trials, record.settings.protocol))


def pruning_savings(trials: list[optuna.trial.FrozenTrial], protocol: Mapping[str, Any]) -> dict[str, Any]:
    """What pruning saved, from the study's own measurements (a lower bound: what a stopped compile had left is unknown).

    - A trial pruned while measuring did not run its remaining paired windows in its warm
      restart (timed as its own turns ran, the reference's window of each included).
    - A trial stopped while compiling (the compile budget, the time-to bound) did not run a
      measurement: at least the shortest measurement phase a complete trial of this study
      took. Its compile time spent is recorded; how long the compile would have gone on is
      measured only by running the same study without the budget (the benchmark does).
    """
    measured = [(t, record_of(t).own) for t in trials if record_of(t).duplicate_of is None]
    measure_phases = [
        run.phase_seconds["measure"]
        for t, run in measured
        if t.state.name == "COMPLETE" and "measure" in run.phase_seconds
    ]
    shortest_measurement = min(measure_phases, default=0.0)
    windows = int(protocol.get("windows") or 0)
    while_measuring = while_compiling = 0
    measuring_saved = skipped_saved = compile_spent = 0.0
    for trial, run in measured:
        if trial.state.name != "PRUNED":
            continue
        phases = run.phase_seconds
        ran = len(run.windows)
        if ran and "measure" in phases:
            while_measuring += 1
            measuring_saved += max(windows - ran, 0) * phases["measure"] / ran
        else:
            while_compiling += 1
            compile_spent += float(phases.get("compile", 0.0))
            skipped_saved += shortest_measurement
    return {
        "saved_seconds": round(measuring_saved + skipped_saved, 1),
        "pruned_while_measuring": while_measuring,
        "measuring_seconds_saved": round(measuring_saved, 1),
        "stopped_while_compiling": while_compiling,
        "compile_seconds_spent": round(compile_spent, 1),
        "measurement_seconds_skipped": round(skipped_saved, 1),
    }


def _study_summary(
    study: optuna.Study, record: StudyRecord, trials: list[optuna.trial.FrozenTrial], saved: dict[str, Any]
) -> dict[str, Any]:
    counts = {state: sum(1 for t in trials if t.state.name == state) for state in ("COMPLETE", "PRUNED", "FAIL")}
    settings = record.settings
    reasons: dict[str, int] = {}
    for trial in trials:
        if trial.state.name == "FAIL":
            reason = failure_of(trial, record)[0] or "unknown"
            reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "name": study.study_name,
        "storage": settings.storage,
        "space": record.space,
        "sampler": settings.sampler,
        "pruner": settings.pruner,
        "seed": settings.seed,
        "device": record.device,
        "trials": {
            "total": len(trials),
            "complete": counts["COMPLETE"],
            "pruned": counts["PRUNED"],
            "failed": counts["FAIL"],
        },
        "failure_reasons": reasons,
        "pruning_saved_seconds": saved["saved_seconds"],
        "pruning": saved,
        "trial_seconds": round(sum(record_of(t).own.wall_seconds for t in trials), 1),
        "search_wall_seconds": record.search_wall_seconds,
        "protocol": settings.protocol,
        **({"doctor": record.doctor} if record.doctor else {}),
        "best_trials": best_trials(
            trial_rows(trials, record), study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
        ),
    }


def _csv(rows: list[dict[str, Any]]) -> str:
    known = {*_CSV_COLUMNS, "message", "notes", "configuration"}
    settings: list[str] = []
    for row in rows:
        settings += [k for k in row if k not in known and k not in settings]
    columns = [*_CSV_COLUMNS, "configuration", *settings, "message", "notes"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buffer.getvalue()
