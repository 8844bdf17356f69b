"""report.md and its plots (optimization history, throughput vs compile time, parameter importances, retunes)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from autotune import history
from autotune.search import Objective

__all__ = ["write_report"]


def write_report(
    out_dir: Path,
    study: optuna.Study,
    rows: list[dict[str, Any]],
    baselines: dict[str, dict[str, Any]],
    metrics: dict[str, Any] | None,
    summary: dict[str, Any],
    objective: Objective,
    *,
    compile_cache: Mapping[str, Any] | None = None,
) -> Path:
    """Write report.md (and PNG plots beside it); returns its path.

    With a saved compile cache it says what loading it saves; with a history.jsonl beside
    it (written by `autotune retune`) it adds the retune history and its plot.
    """
    plots = _plots(out_dir, study, rows, baselines, objective)
    retunes = history.read(out_dir)
    lines = [f"# autotune report: {study.study_name}", ""]
    lines += [
        f"Workload `{study.user_attrs.get('model')}`, space `{summary['space']}`, device `{summary['device']}`, objective {objective} ({objective.unit}).",
        "",
    ]
    lines += ["## Verdict", "", verdict(metrics, baselines), ""]
    lines += ["## Baselines", "", "| baseline | samples/s | compile s | peak memory MiB |", "|---|---|---|---|"]
    for name, label in (("eager", "eager"), ("compile", "plain torch.compile")):
        b = baselines.get(name, {})
        lines.append(
            f"| {label} | {_fmt(b.get('samples_per_second'))} | {_fmt(b.get('compile_seconds'))} | {_fmt(b.get('peak_memory_mb'))} |"
        )
    lines += [
        "",
        "## Best trials",
        "",
        "| trial | value | samples/s | vs eager | vs compile | compile s | configuration |",
        "|---|---|---|---|---|---|---|",
    ]
    complete = sorted(
        (r for r in rows if r["state"] == "COMPLETE"),
        key=lambda r: r["value"],
        reverse=objective.direction == "maximize",
    )
    for row in complete[:10]:
        lines.append(
            f"| {row['number']} | {_fmt(row['value'])} | {_fmt(row['samples_per_second'])} | {_fmt(row['speedup_vs_eager'], 'x')} "
            f"| {_fmt(row['speedup_vs_compile'], 'x')} | {_fmt(row['compile_seconds'])} | {row.get('description') or ''} |"
        )
    if compile_cache:
        lines += ["", "## Compile cache", "", _cache_text(compile_cache)]
    if retunes:
        title, name = _history_plot(out_dir, retunes)
        lines += ["", "## Retune history", "", _history_table(retunes), "", f"![{title}]({name})"]
    trials = summary["trials"]
    lines += [
        "",
        "## Study",
        "",
        f"{trials['total']} trials: {trials['complete']} complete, {trials['pruned']} pruned, {trials['failed']} failed. "
        f"Pruning saved about {summary['pruning_saved_seconds']:.0f} s of {summary['trial_seconds']:.0f} s spent in trials.",
    ]
    if summary["failure_reasons"]:
        lines.append(
            "Failures by reason: "
            + ", ".join(f"{k} ({v})" for k, v in sorted(summary["failure_reasons"].items()))
            + "."
        )
    lines += ["", "Every trial, with its parameters and reasons, is in `trials.csv`.", ""]
    for title, name in plots:
        lines += [f"## {title}", "", f"![{title}]({name})", ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path


def verdict(metrics: dict[str, Any] | None, baselines: dict[str, dict[str, Any]]) -> str:
    """One honest sentence on how the winner compares with both baselines."""
    if not metrics:
        return "No trial completed, so there is no configuration to recommend; see the failure reasons below."
    vs_eager, vs_compile = metrics.get("speedup_vs_eager"), metrics.get("speedup_vs_compile")
    text = f"Trial {metrics['trial']} reached {_fmt(metrics['samples_per_second'])} samples/s"
    if vs_eager:
        text += f", {_fmt(vs_eager, 'x')} eager"
    if vs_compile:
        text += f" and {_fmt(vs_compile, 'x')} plain torch.compile"
    text += f" (compile {_fmt(metrics['compile_seconds'])} s)."
    if vs_compile is not None and vs_compile < 1.0:
        text += " No configuration beat plain torch.compile here: prefer plain torch.compile."
    if vs_eager is not None and vs_eager < 1.0:
        text += " It is slower than eager on this machine: compiling does not pay off for this workload here."
    return text


def _plots(
    out_dir: Path,
    study: optuna.Study,
    rows: list[dict[str, Any]],
    baselines: dict[str, dict[str, Any]],
    objective: Objective,
) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[tuple[str, str]] = []
    complete = [r for r in rows if r["state"] == "COMPLETE" and r["value"] is not None]
    if complete:
        fig, ax = plt.subplots(figsize=(7, 4))
        xs = [r["number"] for r in complete]
        ys = [r["value"] for r in complete]
        best, best_so_far = None, []
        for y in ys:
            best = y if best is None or objective.better(y, best) else best
            best_so_far.append(best)
        ax.scatter(xs, ys, label="trial")
        ax.step(xs, best_so_far, where="post", color="tab:red", label="best so far")
        eager = baselines.get("eager", {}).get("samples_per_second")
        compiled = baselines.get("compile", {}).get("samples_per_second")
        if objective.kind == "throughput":
            for value, label, style in ((eager, "eager", ":"), (compiled, "plain torch.compile", "--")):
                if value:
                    ax.axhline(value, linestyle=style, color="gray", label=label)
        ax.set_xlabel("trial")
        ax.set_ylabel(objective.unit)
        ax.set_title("Optimization history")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "history.png", dpi=100)
        plt.close(fig)
        made.append(("Optimization history", "history.png"))

        fig, ax = plt.subplots(figsize=(7, 4))
        ax.scatter([r["compile_seconds"] or 0 for r in complete], [r["samples_per_second"] for r in complete])
        for r in complete:
            ax.annotate(str(r["number"]), (r["compile_seconds"] or 0, r["samples_per_second"]), fontsize=8)
        ax.set_xlabel("compile and warm-up seconds")
        ax.set_ylabel("samples/s")
        ax.set_title("Throughput vs compile time")
        fig.tight_layout()
        fig.savefig(out_dir / "throughput_vs_compile.png", dpi=100)
        plt.close(fig)
        made.append(("Throughput vs compile time", "throughput_vs_compile.png"))

    importances = _importances(study)
    if importances:
        fig, ax = plt.subplots(figsize=(7, 0.4 * len(importances) + 1.2))
        names = list(importances)[::-1]
        ax.barh(names, [importances[n] for n in names])
        ax.set_xlabel("importance (fANOVA)")
        ax.set_title("Parameter importances")
        fig.tight_layout()
        fig.savefig(out_dir / "importances.png", dpi=100)
        plt.close(fig)
        made.append(("Parameter importances", "importances.png"))
    return made


def _cache_text(section: Mapping[str, Any]) -> str:
    if not section.get("saved"):
        return f"No compile cache was saved: {section.get('note', 'it was not measured')}."
    made = section.get("fingerprint") or {}
    return "\n".join(
        [
            f"`{section['file']}` ({section['bytes'] / 1024:.0f} KiB) holds the winner's compile artifacts, made with torch "
            f"{made.get('torch')} on {made.get('device_name')}. Load it with `load_compile_cache(...)` from "
            "`apply_compilation.py` or `autotune.load(...).load_compile_cache(...)` before the first step; it is "
            "refused, with a warning, under another torch, Triton, CUDA, Python or device.",
            "",
            "| compile and warm-up | seconds |",
            "|---|---|",
            f"| cold (fresh caches) | {_fmt(section.get('cold_compile_seconds'))} |",
            f"| with the cache loaded | {_fmt(section.get('cached_compile_seconds'))} |",
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
            _fmt(incumbent.get("median"))
            if incumbent.get("state") == "complete"
            else f"failed ({incumbent.get('reason')})"
        )
        lines.append(
            f"| {entry.get('date', '?')} | {entry.get('decision', '?')} | {shown} | {_fmt(challenger.get('median'))} "
            f"| {_fmt((bases.get('eager') or {}).get('median'))} | {_fmt((bases.get('compile') or {}).get('median'))} | {changed} |"
        )
    return "\n".join(lines)


def _history_plot(out_dir: Path, retunes: list[dict[str, Any]]) -> tuple[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "retune_history.png", dpi=100)
    plt.close(fig)
    return ("Retune history", "retune_history.png")


def _importances(study: optuna.Study) -> dict[str, float]:
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 3 or not any(t.params for t in complete):
        return {}
    try:
        with warnings.catch_warnings():
            # Few trials per choice is the usual case here; the plot is a hint, not a claim.
            warnings.simplefilter("ignore", UserWarning)
            return dict(optuna.importance.get_param_importances(study))
    except (RuntimeError, ValueError, ImportError):
        # Too few distinct parameter values to fit the model: the report simply has no importance plot.
        return {}


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}{suffix}" if abs(value) < 1000 else f"{value:,.0f}{suffix}"
    return f"{value}{suffix}"
