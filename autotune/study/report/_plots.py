"""The report's plots, as PNG files beside report.md.

Optuna draws what it has (the optimization history, parameter importances); autotune adds
what a reader of this report needs on them (the baselines, the exported trial, pruned and
failed trials) and draws the plots Optuna lacks (throughput against compile time, the
retune history). A plot that cannot be drawn is replaced by a sentence saying why.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import optuna

from autotune.measure import Objective

__all__ = [
    "ROUGH_IMPORTANCES",
    "Plot",
    "decision",
    "history",
    "importance_caveat",
    "importances",
    "pareto",
    "retune_history",
    "throughput_vs_compile",
]

Plot = tuple[str, str]
"""(title, file name beside report.md), or (title, sentence) when it could not be drawn."""


def _replicates(stat: dict[str, Any]) -> int:
    """The replicates an interval rests on (`rounds` in files of earlier versions)."""
    return int(stat.get("replicates", stat.get("rounds")) or 0)


def _pyplot() -> Any:
    # matplotlib is imported only when a report is drawn: it is slow to import and no trial needs it.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _optuna_axes(plot: Any, study: optuna.Study, **kwargs: Any) -> Any:
    if len(study.directions) > 1:
        kwargs["target"] = lambda trial: trial.values[0]  # the speed objective, which comes first
    with warnings.catch_warnings():
        # Optuna marks its matplotlib plots experimental, and few trials per choice is the usual case here.
        warnings.simplefilter("ignore")
        return plot(study, **kwargs)


def _ring(ax: Any, x: float, y: float, label: str) -> None:
    """Circle the exported point."""
    ax.scatter([x], [y], s=160, facecolors="none", edgecolors="black", linewidths=2, label=label, zorder=4)


def _save(plt: Any, ax: Any, out_dir: Path, name: str) -> str:
    """The legend beside the axes, then the figure written to `out_dir/name` and closed; returns `name`."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.figure.tight_layout()
    ax.figure.savefig(out_dir / name, dpi=100)
    plt.close(ax.figure)
    return name


RATIO_TICKS = (0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 8.0)
"""Where the decision plot's ratio axis is labelled (those inside its range)."""


def decision(out_dir: Path, rows: list[dict[str, Any]], within: float, exported: str | None) -> Plot:
    """The decision itself: each confirmed subject's ratio to plain torch.compile with its 95% interval.

    A forest plot: one row per subject, the estimate and its interval, 1 marked, and the
    band of equivalence (+/- `within`) shaded; an interval wholly right of 1 is a gain.
    """
    title = "The decision: each subject against plain torch.compile"
    shown = [r for r in rows if isinstance(r.get("vs_compile"), dict) and r["vs_compile"].get("median")]
    if not shown:
        return title, "Nothing was confirmed against plain torch.compile, so there is no decision to draw."
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.55 * (len(shown) + 1)))
    ax.axvspan(1 / (1 + within), 1 + within, color="tab:green", alpha=0.15, label=f"equivalent (+/-{within:.0%})")
    ax.axvline(1.0, color="black", linewidth=1, label="plain torch.compile")
    labels = []
    # A subject that left the later replicates (racing) rests on fewer: its label says how many.
    most = max(_replicates(r["vs_compile"]) for r in shown)
    for y, row in enumerate(shown):
        stat = row["vs_compile"]
        low, high, centre = float(stat["low"]), float(stat["high"]), float(stat["median"])
        color = "tab:blue" if low > 1 else "tab:red" if high < 1 else "tab:gray"
        ax.errorbar(centre, y, xerr=[[centre - low], [high - centre]], fmt="o", color=color, capsize=4)
        replicates = _replicates(stat)
        fewer = f" ({replicates} replicates)" if 0 < replicates < most else ""
        ax.annotate(
            f"{centre:.2f}x [{low:.2f}, {high:.2f}]{fewer}",
            (high, y),
            xytext=(6, -3),
            textcoords="offset points",
            fontsize=8,
        )
        name = str(row["subject"])
        labels.append(f"{name} (exported)" if name == exported else name)
    ax.set_yticks(range(len(shown)), labels)
    ax.invert_yaxis()
    # Ratios multiply: on a log axis 0.5x and 2x lie as far from 1 on either side.
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter  # with matplotlib itself, only when a plot is drawn

    # Room on the right for the labels beside each interval, and ticks a reader can read the ratios from.
    lowest = min([1 / (1 + within), *(float(r["vs_compile"]["low"]) for r in shown)])
    highest = max([1 + within, *(float(r["vs_compile"]["high"]) for r in shown)])
    left, right = lowest / 1.05, highest * 1.35
    ax.set_xlim(left, right)
    ax.set_xticks([t for t in RATIO_TICKS if left <= t <= right] or [1.0])
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
    ax.set_xlabel(
        "times as fast as plain torch.compile (geometric mean of paired replicates, 95% simultaneous interval)"
    )
    ax.set_title(title)
    return title, _save(plt, ax, out_dir, "decision.png")


def history(
    out_dir: Path,
    study: optuna.Study,
    rows: list[dict[str, Any]],
    baselines: dict[str, Any],
    objective: Objective,
    winner: int | None,
) -> Plot:
    """Every trial's value by trial number, the best so far, both baselines and the exported trial."""
    title = "Optimization history"
    if not any(r["state"] == "COMPLETE" for r in rows):
        return title, "No trial completed, so there is no history to draw."
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator  # with matplotlib itself, only when a plot is drawn

    ax = _optuna_axes(optuna.visualization.matplotlib.plot_optimization_history, study, target_name=objective.unit)
    fig = ax.figure
    fig.set_size_inches(8, 4.5)
    low = min((r["value"] for r in rows if r["value"] is not None), default=0.0)
    for state, marker, color in (("PRUNED", "v", "tab:orange"), ("FAIL", "x", "tab:red")):
        xs = [r["number"] for r in rows if r["state"] == state]
        if xs:
            ax.scatter(xs, [low] * len(xs), marker=marker, color=color, label=f"{state.lower()} (no value)", zorder=3)
    if objective.per_sample:
        for name, label, style in (("eager", "eager", ":"), ("compile", "plain torch.compile", "--")):
            value = baselines.get(name, {}).get("samples_per_second")
            if value:
                ax.axhline(value, linestyle=style, color="gray", label=f"{label} (search-time baseline)")
    if winner is not None:
        row = next((r for r in rows if r["number"] == winner), None)
        if row and row["value"] is not None:
            _ring(ax, winner, row["value"], f"exported: trial {winner}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    return title, _save(plt, ax, out_dir, "history.png")


def throughput_vs_compile(
    out_dir: Path, rows: list[dict[str, Any]], baselines: dict[str, Any], winner: int | None
) -> Plot:
    """Each complete trial's throughput against its compile time, with the baselines and the exported trial."""
    title = "Throughput vs compile time"
    complete = [r for r in rows if r["state"] == "COMPLETE" and _search_rate(r)]
    if not complete:
        return title, "No trial completed, so there is nothing to place."
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = [r["compile_seconds"] or 0.0 for r in complete]
    ys = [_search_rate(r) or 0.0 for r in complete]
    ax.scatter(xs, ys, label="trial", color="tab:blue")
    for (x, y), text in _labels(xs, ys, [f"#{row['number']}" for row in complete]):
        ax.annotate(text, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    for name, label, marker in (("eager", "eager", "s"), ("compile", "plain torch.compile", "D")):
        base = baselines.get(name, {})
        if base.get("samples_per_second"):
            ax.scatter(
                [base.get("compile_seconds") or 0.0],
                [base["samples_per_second"]],
                marker=marker,
                color="gray",
                s=60,
                label=f"{label} (search-time baseline)",
            )
    chosen = next((r for r in complete if r["number"] == winner), None)
    if chosen is not None:
        _ring(ax, chosen["compile_seconds"] or 0.0, _search_rate(chosen) or 0.0, f"exported: trial {winner}")
    ax.set_xlabel("compile and warm-up seconds (first, cold run)")
    ax.set_ylabel("samples/s (search time, paired with plain compile)")
    ax.set_title(title)
    return title, _save(plt, ax, out_dir, "throughput_vs_compile.png")


def _search_rate(row: dict[str, Any]) -> float | None:
    """A trial's search-time rate (paired with the live plain compile, where it was)."""
    value = row.get("samples_per_second")
    return float(value) if value else None


def pareto(out_dir: Path, front: list[dict[str, Any]]) -> Plot:
    """The Pareto points: speed against compile time, the exported point ringed, in the order along the front."""
    title = "Pareto front: speed against compile time"
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    speed_name = next(iter(front[0]["figures"]))
    xs = [p["figures"]["compile_seconds"] for p in front]
    ys = [p["figures"][speed_name] for p in front]
    order = sorted(range(len(front)), key=lambda i: xs[i])
    ax.plot([xs[i] for i in order], [ys[i] for i in order], color="tab:blue", alpha=0.4, drawstyle="steps-post")
    ax.scatter(xs, ys, color="tab:blue", zorder=3, label="Pareto point (confirmed)")
    for (x, y), text in _labels(xs, ys, [p["subject"] for p in front]):
        ax.annotate(text, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    picked = next((p for p in front if p.get("picked")), None)
    if picked is not None:
        figures = picked["figures"]
        _ring(ax, figures["compile_seconds"], figures[speed_name], f"best.yaml: {picked['subject']}")
    ax.margins(x=0.12, y=0.12)  # room for the labels of the points at the edges
    ax.set_xlabel("compile and warm-up seconds (first, cold run)")
    ax.set_ylabel(f"{speed_name} ({Objective.one(speed_name).unit})")
    ax.set_title(title)
    return title, _save(plt, ax, out_dir, "pareto.png")


ROUGH_IMPORTANCES = 10
"""Under this many completed trials, parameter importances are drawn with a caveat: a handful of trials, most
of them the seeded recipes, say little about which setting matters."""


def importance_caveat(study: optuna.Study) -> str:
    """What a reader should know of the importances of a study with few completed trials ('' with enough)."""
    complete = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    if complete >= ROUGH_IMPORTANCES:
        return ""
    return (
        f"Rough: estimated from {complete} completed trial(s), fewer than {ROUGH_IMPORTANCES}, several of them "
        "the seeded recipes; a setting may rank high or low by the few configurations that happened to run. "
        "Read it as where to look, not as what matters."
    )


def importances(out_dir: Path, study: optuna.Study) -> Plot:
    """Optuna's parameter importances, when enough trials completed to estimate them."""
    title = "Parameter importances"
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 3 or not any(t.params for t in complete):
        return (
            title,
            f"Not drawn: importances need at least 3 complete trials with parameters; this study has {len(complete)}.",
        )
    plt = _pyplot()
    try:
        ax = _optuna_axes(optuna.visualization.matplotlib.plot_param_importances, study)
    except (RuntimeError, ValueError, ImportError) as exc:
        return title, f"Not drawn: Optuna could not estimate importances from these trials ({exc})."
    fig = ax.figure
    fig.set_size_inches(8, max(2.5, 0.4 * len(ax.get_yticklabels()) + 1.5))
    fig.tight_layout()
    fig.savefig(out_dir / "importances.png", dpi=100)
    plt.close(fig)
    return title, "importances.png"


def retune_history(out_dir: Path, retunes: list[dict[str, Any]]) -> tuple[str, str]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = list(range(len(retunes)))

    def series(pick: Any) -> list[float | None]:
        return [pick(entry) for entry in retunes]

    incumbent = series(lambda e: (e.get("incumbent") or {}).get("median"))
    challenger = series(lambda e: (e.get("challenger") or {}).get("median"))
    for values, label, style in (
        (series(lambda e: ((e.get("baselines") or {}).get("eager") or {}).get("median")), "eager", ":"),
        (
            series(lambda e: ((e.get("baselines") or {}).get("compile") or {}).get("median")),
            "plain torch.compile",
            "--",
        ),
        (incumbent, "incumbent", "-"),
    ):
        points = [(x, y) for x, y in zip(xs, values, strict=True) if y is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, marker="o", label=label)
    points = [(x, y) for x, y in zip(xs, challenger, strict=True) if y is not None]
    if points:
        ax.scatter(*zip(*points, strict=True), marker="^", color="tab:green", label="best challenger", zorder=3)
    for x, entry in zip(xs, retunes, strict=True):
        if entry.get("decision") == "regression":
            ax.axvline(x, color="tab:red", alpha=0.3)
        if entry.get("replaced"):
            ax.annotate("replaced", (x, incumbent[x] or 0), fontsize=8)
    ax.set_xticks(xs, [str(e.get("date", ""))[:10] for e in retunes], rotation=30, fontsize=8)
    ax.set_ylabel(str(retunes[-1].get("unit", "samples/s")))
    ax.set_title("Retune history (red: regression)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    else:  # every retune failed before measuring a figure: say so rather than leave an empty frame
        ax.text(0.5, 0.5, "no retune measured a figure", transform=ax.transAxes, ha="center", va="center")
    fig.tight_layout()
    fig.savefig(out_dir / "retune_history.png", dpi=100)
    plt.close(fig)
    return ("Retune history", "retune_history.png")


def _labels(xs: list[float], ys: list[float], texts: list[str]) -> list[tuple[tuple[float, float], str]]:
    """One label per group of points that would print on top of each other ("#0, #1"), at the group's first point."""
    x_span = (max(xs) - min(xs)) or 1.0
    y_span = (max(ys) - min(ys)) or 1.0
    groups: list[tuple[tuple[float, float], list[str]]] = []
    for x, y, text in zip(xs, ys, texts, strict=True):
        for (gx, gy), members in groups:
            if abs(x - gx) < 0.05 * x_span and abs(y - gy) < 0.05 * y_span:
                members.append(text)
                break
        else:
            groups.append(((x, y), [text]))
    return [(point, ", ".join(members)) for point, members in groups]
