"""The one final summary of a search: the verdict, the confirmation table, the search table.

`autotune search` prints it, report.md opens with it and `autotune show` prints it from
best.yaml, so all three say the same thing. Its figures are plain data recorded in
best.yaml (`metrics.confirmation`, `study.best_trials`), never recomputed at display time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.measure.format import number
from autotune.measure.report import confirmation_cells, table
from autotune.study.report._cost import cost_text

__all__ = ["BEST_TRIALS", "best_trials", "render_summary", "savings_text"]

BEST_TRIALS = 5
"""Trials of the search table, best first."""


def best_trials(rows: Sequence[Mapping[str, Any]], maximize: bool) -> list[dict[str, Any]]:
    """The best complete trials of the search, as plain data for the search table."""
    complete = sorted(
        (r for r in rows if r["state"] == "COMPLETE" and r["value"] is not None),
        key=lambda r: r["value"],
        reverse=maximize,
    )
    keys = ("number", "value", "samples_per_second", "speedup_vs_eager", "speedup_vs_compile", "compile_seconds")
    return [
        {**{k: row.get(k) for k in keys}, "configuration": row.get("description") or ""}
        for row in complete[:BEST_TRIALS]
    ]


def render_summary(metrics: Mapping[str, Any], study: Mapping[str, Any], *, markdown: bool = False) -> str:
    """The verdict, then the confirmation table, then the search table, then the trial counts."""
    lines = [str(metrics.get("verdict") or "No verdict was recorded."), ""]
    if metrics.get("stopped"):
        lines += [f"The search {metrics['stopped']}.", ""]
    confirmed = metrics.get("confirmed", True)
    lines.append(
        "Confirmation: each subject warm from its own cache, in replicates of paired windows; ratios are geometric "
        "means over replicates with 95% intervals, simultaneous over the looks and candidates"
        if confirmed
        else "Search-time figures (not confirmed: --confirm 0, or no trial completed to confirm)"
    )
    searched = {f"trial {row.get('number')}": row.get("speedup_vs_compile") for row in study.get("best_trials") or []}
    searched["compile"] = 1.0
    lines += ["", table(confirmation_cells(metrics.get("confirmation") or [], searched), markdown), ""]
    lines += [
        "During the search (each trial restarted warm from the cache its first run filled, paired window by window"
        " with a live plain torch.compile of its session; the confirmation above decides):",
        "",
        table(_search_cells(study.get("best_trials") or []), markdown),
        "",
    ]
    trials = study.get("trials") or {}
    lines.append(
        f"{trials.get('total', 0)} trial(s): {trials.get('complete', 0)} complete, {trials.get('pruned', 0)} pruned, "
        f"{trials.get('failed', 0)} failed; {savings_text(study)}."
    )
    cost = cost_text(metrics.get("cost"))
    if cost:
        lines += ["", cost]
    return "\n".join(lines)


def _search_cells(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    cells = [["trial", "samples/s", "vs eager", "vs compile", "compile s", "configuration"]]
    for row in rows:
        cells.append(
            [
                f"#{row.get('number')}",
                number(row.get("samples_per_second")),
                number(row.get("speedup_vs_eager"), "x"),
                number(row.get("speedup_vs_compile"), "x"),
                number(row.get("compile_seconds")),
                str(row.get("configuration", "")),
            ]
        )
    return cells


def savings_text(summary: Mapping[str, Any]) -> str:
    """'pruning saved at least 40 s (...)' from a study summary, old ones (an estimate from medians) included."""
    pruning = summary.get("pruning")
    if not isinstance(pruning, Mapping):
        saved = summary.get("pruning_saved_seconds")
        return f"pruning saved about {saved if saved is not None else '?'} s (estimated from median trial times)"
    parts = []
    if pruning.get("pruned_while_measuring"):
        parts.append(
            f"{pruning['pruned_while_measuring']} trial(s) pruned while measuring: {pruning['measuring_seconds_saved']}"
            " s of paired windows not run"
        )
    if pruning.get("stopped_while_compiling"):
        parts.append(
            f"{pruning['stopped_while_compiling']} stopped while compiling after {pruning['compile_seconds_spent']} s "
            f"of compile in all: {pruning['measurement_seconds_skipped']} s of measurement not run, plus the rest of "
            "their compiles"
        )
    return f"pruning saved at least {pruning.get('saved_seconds', 0)} s" + (f" ({'; '.join(parts)})" if parts else "")
