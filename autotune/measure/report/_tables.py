"""A campaign's subjects as plain rows and as a table: what best.yaml records and every command prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.measure.engine import Campaign
from autotune.measure.format import interval, number
from autotune.measure.report._breakeven import break_even, break_even_text

__all__ = ["confirmation_cells", "confirmation_rows", "confirmation_table", "table"]


def confirmation_rows(campaign: Campaign) -> list[dict[str, Any]]:
    """Each subject of a campaign as plain data: median throughput, ratios to both baselines, compile time, runs."""
    rows = []
    for name, subject in campaign.subjects.items():
        runs = campaign.complete_runs(name)
        failure = campaign.counted_failure(name)
        configuration = subject.description
        if subject.same_as is not None:
            configuration += f" (the {subject.same_as} runs: the same code)"
        row: dict[str, Any] = {"subject": name, "runs": len(runs), "configuration": configuration}
        if failure is not None:
            row["failure"] = failure.reason
        if campaign.failure_note(name):
            row["failed_replicates"] = campaign.failure_note(name)
        if runs:
            rates = sorted(r.samples_per_second or 0.0 for r in runs)
            row["samples_per_second"] = rates[(len(rates) - 1) // 2]
            row["compile_seconds"] = campaign.compile_seconds(name)
            spread = campaign.extra_compile(name) if subject.config is not None else None
            if spread is not None:
                row["compile_interval"] = spread.to_dict()  # the mean of the cold compiles, with its 95% interval
            for reference in ("compile", "eager"):
                versus = campaign.ratio(name, reference) if name != reference else None
                row[f"vs_{reference}"] = versus.to_dict() if versus else None
                row[f"break_even_vs_{reference}"] = break_even(campaign, name, reference)
        rows.append(row)
    return rows


def confirmation_table(campaign: Campaign, *, markdown: bool = False) -> str:
    """A campaign's subjects as a table (validate and retune print it for their own campaigns)."""
    return table(confirmation_cells(confirmation_rows(campaign)), markdown)


def confirmation_cells(
    rows: Sequence[Mapping[str, Any]], searched: Mapping[str, float | None] | None = None
) -> list[list[str]]:
    """The rows as table cells, a header first.

    With `searched` (subject -> its ratio to plain compile during the search, its first run's),
    that figure stands beside the confirmed one, so a reader sees where the two disagree.
    """
    header = ["subject", "samples/s", "vs plain compile", "vs eager", "compile s", "pays back after", "runs"]
    if searched is not None:
        header.insert(3, "at search time")
    cells = [[*header, "configuration"]]
    for row in rows:
        name = str(row.get("subject"))
        seen = searched.get(name) if searched is not None else None
        early = [] if searched is None else [f"{seen:.2f}x" if seen else "–"]
        if not row.get("runs"):
            failed = "failed once, not reproduced" if row.get("failed_replicates") else "not measured"
            failed = f"failed ({row['failure']})" if row.get("failure") else failed
            cells.append([name, failed, "", *early, "", "", "", "0", str(row.get("configuration", ""))])
            continue
        ratios = [
            "1.00x" if name == reference else interval(row.get(f"vs_{reference}")) for reference in ("compile", "eager")
        ]
        ratios[1:1] = early
        runs = str(row["runs"])
        if row.get("failure"):
            runs += f", failed ({row['failure']})"
        elif row.get("failed_replicates"):
            runs += ", 1 failed, not reproduced"
        cells.append(
            [
                name,
                number(row.get("samples_per_second")),
                *ratios,
                _compile_cell(row),
                _pays_back(row),
                runs,
                str(row.get("configuration", "")),
            ]
        )
    return cells


def _compile_cell(row: Mapping[str, Any]) -> str:
    """The compile seconds: the mean of the cold compiles with its interval where there were several, else the one
    cold compile."""
    spread = row.get("compile_interval")
    if not spread:
        return number(row.get("compile_seconds"))
    return f"{number(spread['median'])} [{number(spread['low'])}, {number(spread['high'])}] ({spread.get('replicates', spread.get('rounds'))} cold)"


def _pays_back(row: Mapping[str, Any]) -> str:
    """The steps after which the compile time is paid back against eager, and against plain compile when it applies."""
    text = break_even_text(row.get("break_even_vs_eager"))
    versus_compile = break_even_text(row.get("break_even_vs_compile"))
    if versus_compile:
        text = f"{text or '–'}; its extra compile vs plain compile: {versus_compile}"
    return text or "–"


def table(cells: list[list[str]], markdown: bool) -> str:
    """Cells as aligned text (the last column unpadded), or as a Markdown table."""
    if len(cells) == 1:
        return "(none)"
    if markdown:
        lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells[1:]])
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1] for row in cells
    )
