"""What a study leaves and shows: best.yaml and its companions, report.md and its plots, the verdict, and the live display."""

from __future__ import annotations

from autotune.study.report._cost import SESSION_STAGES, cost_text, search_cost
from autotune.study.report._display import SearchDisplay, duration
from autotune.study.report._export import (
    SearchResult,
    campaign_of,
    config_columns,
    export_from_storage,
    export_study,
    exported_choice,
    pruning_savings,
    study_summary,
    trial_rows,
    write_trials_csv,
)
from autotune.study.report._files import cannot_write, written_together
from autotune.study.report._plots import (
    Plot,
    decision,
    history,
    importances,
    pareto,
    retune_history,
    throughput_vs_compile,
)
from autotune.study.report._progress import Plan, Progress, ProgressCallback, confirmation_guess, quiet
from autotune.study.report._report import write_report
from autotune.study.report._studies import StudyRow, studies_in, studies_in_storage
from autotune.study.report._verdict import BEST_TRIALS, best_trials, render_summary, savings_text

__all__ = [
    "BEST_TRIALS",
    "SESSION_STAGES",
    "Plan",
    "Plot",
    "Progress",
    "ProgressCallback",
    "SearchDisplay",
    "SearchResult",
    "best_trials",
    "campaign_of",
    "cannot_write",
    "confirmation_guess",
    "config_columns",
    "cost_text",
    "decision",
    "duration",
    "export_from_storage",
    "export_study",
    "exported_choice",
    "history",
    "importances",
    "pareto",
    "pruning_savings",
    "quiet",
    "render_summary",
    "retune_history",
    "savings_text",
    "search_cost",
    "StudyRow",
    "studies_in",
    "studies_in_storage",
    "study_summary",
    "throughput_vs_compile",
    "trial_rows",
    "write_report",
    "write_trials_csv",
    "written_together",
]
