"""report.md: the verdict first, then the confirmation, the search, the compile cache and the retune history."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from autotune.measure import Campaign
from autotune.measure.format import interval as show_interval
from autotune.measure.format import number, span
from autotune.measure.stats import BAND
from autotune.measure.tasks import design_text
from autotune.runtime.compile_cache import proven_text
from autotune.runtime.tuned import TunedConfig, write_atomic
from autotune.study.doctor import Diagnosis
from autotune.study.report import _plots as plots
from autotune.study.report._failures import failures_section
from autotune.study.report._verdict import render_summary, savings_text
from autotune.study.storage import read_history, read_study_record, scaled_baselines
from autotune.trial.compile_split import ALWAYS_SHOWN, SPLIT_LABELS

__all__ = ["write_report"]


def write_report(
    out_dir: Path,
    study: optuna.Study,
    rows: list[dict[str, Any]],
    campaign: Campaign,
    tuned: TunedConfig,
    *,
    confirmed: bool = True,
    front: list[dict[str, Any]] | None = None,
    history_from: Path | None = None,
) -> Path:
    """Write report.md (and PNG plots beside it) into `out_dir`; returns its path.

    The retune history is read from `history_from` (default: `out_dir`): a folder the report is staged in
    before it is moved beside the history holds none.
    """
    metrics = dict(tuned.metrics)
    objective = campaign.objective
    summary = dict(tuned.study)
    winner = metrics.get("trial")
    record = read_study_record(study)
    lines = [f"# autotune report: {study.study_name}", ""]
    if metrics.get("objectives"):
        aim = f"objectives {metrics['objectives']} (the first, in {objective.unit}, decides the confirmation)."
    else:
        aim = f"objective {objective} ({objective.unit})."
    lines += [
        f"Workload `{record.model or '?'}`, space `{summary.get('space')}`, device `{summary.get('device')}`, " + aim,
        "",
        "## Verdict",
        "",
        render_summary(metrics, summary, markdown=True),
        "",
    ]
    if confirmed:
        title_, what = plots.decision(out_dir, list(metrics.get("confirmation") or []), BAND, metrics.get("subject"))
        lines += [f"![{title_}]({what})" if what.endswith(".png") else what, ""]
    lines += [_noise_text(campaign, confirmed), ""]
    if front:
        title_, name = plots.pareto(out_dir, front)
        lines += ["## Pareto front", "", _front_table(front), "", f"![{title_}]({name})", ""]
    elif metrics.get("objectives"):
        lines += [
            "## Pareto front",
            "",
            "Not drawn: the front is placed by confirmed figures, and nothing was confirmed.",
            "",
        ]
    lines += _compile_sections(summary, metrics, tuned)
    retunes = read_history(history_from or out_dir)
    if retunes:
        title_, name = plots.retune_history(out_dir, retunes)
        lines += ["## Retune history", "", _history_table(retunes), "", f"![{title_}]({name})", ""]
    lines += [
        *_noted(rows),
        *failures_section(study, record),
        "## Study",
        "",
        _study_text(summary),
        "",
        "Every trial, with its parameters and reasons, is in `trials.csv`.",
        "",
    ]
    # The search's plots place each trial's search-time figure beside the baselines, on the study's one scale.
    searched = scaled_baselines(record)
    drawn = [
        plots.history(out_dir, study, rows, searched, objective, winner),
        plots.throughput_vs_compile(out_dir, rows, searched, winner),
        plots.importances(out_dir, study),
    ]
    for title_, what in drawn:
        lines += [f"## {title_}", "", f"![{title_}]({what})" if what.endswith(".png") else what, ""]
        if what == "importances.png" and plots.importance_caveat(study):
            lines += [plots.importance_caveat(study), ""]
    return write_atomic(out_dir / "report.md", "\n".join(lines))


def _noted(rows: list[dict[str, Any]]) -> list[str]:
    """The section of what the checks noted of the trials; none where they noted nothing."""
    noted = [row for row in rows if row.get("notes")]
    if not noted:
        return []
    lines = ["## What the checks noted", ""]
    for row in noted:
        for note in str(row["notes"]).split("; "):
            lines.append(f"- trial {row.get('number')} ({row.get('configuration', '')}): {note}")
    return [*lines, ""]


def _front_table(front: list[dict[str, Any]]) -> str:
    """The Pareto points with their confirmed figures; the one best.yaml ships is marked."""
    lines = [
        f"{len(front)} point(s) no other beats on every objective, by their confirmed figures (speed against plain "
        "torch.compile counts only where the paired interval excludes 1). Each has its own `best.yaml` and "
        "`apply_compilation.py`; `autotune export --pick ...` changes which one `best.yaml` is.",
        "",
        "| point | samples/s or objective | vs plain compile | compile s | peak MiB | files |",
        "|---|---|---|---|---|---|",
    ]
    for point in front:
        figures = point["figures"]
        speed = next(iter(figures.values()))
        name = f"**{point['subject']}** (best.yaml)" if point.get("picked") else point["subject"]
        lines.append(
            f"| {name} | {number(speed)} | {show_interval(figures.get('vs_compile')) if figures.get('vs_compile') else '1.00x'} "
            f"| {number(figures.get('compile_seconds'))} | {number(figures.get('peak_memory_mb'))} | `{point['best']}` |"
        )
    return "\n".join(lines)


def _noise_text(campaign: Campaign, confirmed: bool) -> str:
    """How the figures above were measured, and the machine's state meanwhile."""
    noise = campaign.noise()
    if confirmed and campaign.replicates:
        text = design_text(campaign)
    else:
        text = (
            "Search-time figures: each trial's own run, paired with the live plain compile of its session, on the "
            "study's one scale."
        )
    text += (
        f" Machine load during the runs: {span(noise.get('load'), missing='not reported')}; calibration probe "
        f"{span(noise.get('probe_ms'), ' ms', missing='not timed')}."
    )
    if noise["noisy_runs"]:
        text += (
            f" {noise['noisy_runs']} run(s) saw the machine busy ({'; '.join(noise.get('busy') or [])}); the paired "
            "ratios cancel what that did to both sides of each pair."
        )
    if campaign.spoiled:
        text += (
            f" {len(campaign.spoiled)} replicate(s) measured on a busy machine were set aside and measured again "
            f"({'; '.join(campaign.spoiled)})."
        )
    return text


def _study_text(summary: Mapping[str, Any]) -> str:
    trials = summary.get("trials") or {}
    text = (
        f"{trials.get('total', 0)} trials: {trials.get('complete', 0)} complete, {trials.get('pruned', 0)} pruned, "
        f"{trials.get('failed', 0)} failed, {number(summary.get('trial_seconds'))} s spent in trials; "
        f"{savings_text(summary)}."
    )
    reasons = summary.get("failure_reasons") or {}
    if reasons:
        text += " Failures by reason: " + ", ".join(f"{k} ({v})" for k, v in sorted(reasons.items())) + "."
    return text


def _cache_text(section: Mapping[str, Any]) -> str:
    if not section.get("saved"):
        return f"No compile cache was saved: {section.get('note', 'it was not measured')}."
    made = section.get("fingerprint") or {}
    proven = proven_text(section)
    return "\n".join(
        [
            f"`{section['file']}` ({section['bytes'] / 1024:.0f} KiB) holds the winner's compile artifacts, made with torch "
            f"{made.get('torch')} on {made.get('device_name')}. Load it with `load_compile_cache(...)` from "
            "`apply_compilation.py` or `autotune.load(...).load_compile_cache(...)` before the first step; it is "
            "refused, with a warning, under another torch, Triton, CUDA, Python or device.",
            "",
            "| compile and warm-up | seconds |",
            "|---|---|",
            f"| cold (fresh caches) | {number(section.get('cold_compile_seconds'))} |",
            f"| with the cache loaded | {number(section.get('cached_compile_seconds'))} |",
            *(["", f"The confirmation proved it itself{proven}."] if proven else []),
        ]
    )


def _history_table(retunes: list[dict[str, Any]]) -> str:
    lines = [
        f"{len(retunes)} retune(s); the latest {min(len(retunes), 10)} below, every one in `history.jsonl`.",
        "",
        "| date | decision | incumbent | challenger | eager | plain compile | changed |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in retunes[-10:]:
        incumbent = entry.get("incumbent") or {}
        challenger = entry.get("challenger") or {}
        bases = entry.get("baselines") or {}
        changed = (
            ", ".join(sorted({**(entry.get("environment_changes") or {}), **(entry.get("model_changes") or {})})) or "–"
        )
        shown = (
            number(incumbent.get("median"))
            if incumbent.get("state") == "complete"
            else f"failed ({incumbent.get('reason')})"
        )
        lines.append(
            f"| {entry.get('date', '?')} | {entry.get('decision', '?')} | {shown} | {number(challenger.get('median'))} "
            f"| {number((bases.get('eager') or {}).get('median'))} | {number((bases.get('compile') or {}).get('median'))} | {changed} |"
        )
    return "\n".join(lines)


def _compile_sections(summary: Mapping[str, Any], metrics: Mapping[str, Any], tuned: TunedConfig) -> list[str]:
    """The doctor's findings, where compile time goes, and the compile cache: each section when there is one."""
    lines: list[str] = []
    if summary.get("doctor"):
        rendered = Diagnosis.from_dict(summary["doctor"]).render()
        lines += ["## Graph breaks and recompiles", "", "```", rendered, "```", ""]
    split = _split_table(metrics, tuned.baselines)
    if split:
        lines += ["## Where compile time goes", "", split, ""]
    if tuned.compile_cache:
        lines += ["## Compile cache", "", _cache_text(tuned.compile_cache), ""]
    return lines


def _split_table(metrics: Mapping[str, Any], baselines: Mapping[str, Any]) -> str:
    """The exported configuration's cold compile and plain compile's, part by part, side by side."""
    columns = {"plain torch.compile": (baselines.get("compile") or {}).get("compile_split") or {}}
    if metrics.get("subject") not in ("compile", "eager", None):
        columns[f"exported ({metrics['subject']})"] = metrics.get("compile_split") or {}
    if not any(columns.values()):
        return ""
    header = "| part | " + " | ".join(columns) + " |"
    lines = [
        "Each subject's first, cold compile, split by torch's own compilation metrics (seconds):",
        "",
        header,
        "|---|" + "---|" * len(columns),
    ]
    for part, label in SPLIT_LABELS.items():
        if any(split.get(part) for split in columns.values()) or part in ALWAYS_SHOWN:
            lines.append(f"| {label} | " + " | ".join(number(split.get(part)) for split in columns.values()) + " |")
    totals = " | ".join(number(sum(split.values()) if split else None) for split in columns.values())
    lines.append(f"| all of them | {totals} |")
    return "\n".join(lines)
