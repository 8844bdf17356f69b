"""report.md's Failures section: each failed trial's reason, the settings and compiler stage that cause it, the
seconds spent narrowing them, and what the search did about it."""

from __future__ import annotations

import optuna

from autotune.study.storage import COMPILER_FAILURES, Explanation, StudyRecord, record_of

__all__ = ["failures_section"]


def failures_section(study: optuna.Study, record: StudyRecord) -> list[str]:
    """The section's lines, or none where no trial failed."""
    failed = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.FAIL]
    if not failed:
        return []
    held: dict[int, list[int]] = {}
    for trial in failed:
        explained = record_of(trial).holds_culprit_of
        if explained is not None:
            held.setdefault(explained, []).append(trial.number)
    lines = [
        "## Failures",
        "",
        "| trial | reason | caused by | failing stage | narrowing | what the search did |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for trial in failed:
        trial_record = record_of(trial)
        if trial_record.holds_culprit_of is not None:
            continue  # listed with the trial whose culprit it holds
        reason = trial_record.reason or "?"
        explanation = record.explanations.get(trial.number)
        if explanation is not None:
            lines.append(_explained_row(trial.number, explanation, held.get(trial.number, [])))
        else:
            lines.append(f"| {trial.number} | {reason} | {_unexplained(trial.number, reason)} | – | – | went on |")
    lines += ["", "`autotune explain OUT_DIR TRIAL` narrows a failed trial that the search did not.", ""]
    return lines


def _explained_row(number: int, explanation: Explanation, skipped: list[int]) -> str:
    culprit = f"{explanation.culprit_text} (against {explanation.against})"
    stage = explanation.stage_text
    cost = f"{explanation.seconds:.1f} s, {explanation.probes} short runs (budget {explanation.budget:.0f} s)"
    did = "went on, and runs no configuration holding these settings again"
    if skipped:
        did += f" (trials {', '.join(map(str, skipped))} held them and were not run)"
    if explanation.repro:
        did += f"; reproduction: `{explanation.repro}`"
    return f"| {number} | {explanation.reason} | {_cell(culprit)} | {_cell(stage)} | {cost} | {did} |"


def _unexplained(number: int, reason: str) -> str:
    if reason in COMPILER_FAILURES:
        return f"not narrowed (`autotune explain OUT_DIR {number}`)"
    return f"no setting causes a {reason} failure"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
