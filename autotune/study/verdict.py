"""The one final summary of a search: the verdict, the confirmation table, the search table.

`autotune search` prints it, report.md opens with it and `autotune show` prints it from
best.yaml, so all three say the same thing. Its figures are plain data recorded in
best.yaml (`metrics.confirmation`, `study.best_trials`), never recomputed at display time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.study.campaign import Campaign
from autotune.study.format import interval, number

__all__ = ["BEST_TRIALS", "best_trials", "confirmation_rows", "confirmation_table", "render_summary", "savings_text"]

BEST_TRIALS = 5
"""Trials of the search table, best first."""


def confirmation_rows(campaign: Campaign) -> list[dict[str, Any]]:
    """Each subject of a campaign as plain data: median throughput, ratios to both baselines, compile time, runs."""
    rows = []
    for name, subject in campaign.subjects.items():
        runs = campaign.complete_runs(name)
        failure = campaign.failure(name)
        configuration = subject.description
        if subject.same_as is not None:
            configuration += f" (the {subject.same_as} runs: the same code)"
        row: dict[str, Any] = {"subject": name, "runs": len(runs), "configuration": configuration}
        if failure is not None:
            row["failure"] = failure.reason
        if runs:
            rates = sorted(r.samples_per_second or 0.0 for r in runs)
            median = campaign.median_run(name)
            row["samples_per_second"] = rates[(len(rates) - 1) // 2]
            row["compile_seconds"] = median.compile_seconds if median else None
            for reference in ("compile", "eager"):
                versus = campaign.ratio(name, reference) if name != reference else None
                row[f"vs_{reference}"] = versus.to_dict() if versus else None
        rows.append(row)
    return rows


def confirmation_table(campaign: Campaign, *, markdown: bool = False) -> str:
    """A campaign's subjects as a table (validate and retune print it for their own campaigns)."""
    return _table(_confirmation_cells(confirmation_rows(campaign)), markdown)


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
        "Confirmation: fresh processes, rotated rounds, medians of paired ratios with 95% intervals"
        if confirmed
        else "Search-time figures (not confirmed: --confirm 0)"
    )
    lines += ["", _table(_confirmation_cells(metrics.get("confirmation") or []), markdown), ""]
    lines += [
        "During the search (each trial's own run, against the baselines measured when its session started;"
        " the confirmation above decides):",
        "",
        _table(_search_cells(study.get("best_trials") or []), markdown),
        "",
    ]
    trials = study.get("trials") or {}
    lines.append(
        f"{trials.get('total', 0)} trial(s): {trials.get('complete', 0)} complete, {trials.get('pruned', 0)} pruned, "
        f"{trials.get('failed', 0)} failed; {savings_text(study)}."
    )
    return "\n".join(lines)


def _confirmation_cells(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    cells = [["subject", "samples/s", "vs plain compile", "vs eager", "compile s", "runs", "configuration"]]
    for row in rows:
        name = str(row.get("subject"))
        if not row.get("runs"):
            failed = f"failed ({row['failure']})" if row.get("failure") else "not measured"
            cells.append([name, failed, "", "", "", "0", str(row.get("configuration", ""))])
            continue
        ratios = [
            "1.00x" if name == reference else interval(row.get(f"vs_{reference}")) for reference in ("compile", "eager")
        ]
        runs = str(row["runs"]) + (f", failed ({row['failure']})" if row.get("failure") else "")
        cells.append(
            [
                name,
                number(row.get("samples_per_second")),
                *ratios,
                number(row.get("compile_seconds")),
                runs,
                str(row.get("configuration", "")),
            ]
        )
    return cells


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


def _table(cells: list[list[str]], markdown: bool) -> str:
    if len(cells) == 1:
        return "(none)"
    if markdown:
        lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1] for row in cells
    )


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
            " s of windows and fresh stream not run"
        )
    if pruning.get("stopped_while_compiling"):
        parts.append(
            f"{pruning['stopped_while_compiling']} stopped while compiling after {pruning['compile_seconds_spent']} s "
            f"of compile in all: {pruning['measurement_seconds_skipped']} s of measurement not run, plus the rest of "
            "their compiles"
        )
    return f"pruning saved at least {pruning.get('saved_seconds', 0)} s" + (f" ({'; '.join(parts)})" if parts else "")
