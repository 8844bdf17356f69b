"""Headline figures of the search and validate stages, for `summary.json`.

From a search folder: what `best.yaml` exported and its ratios with their intervals, compile
seconds and memory, and for each trial (from the study) its recipe, outcome, compile seconds,
CUDA-graph recordings and skips and peak reserved memory, which `best.yaml` does not carry.
From a validation: the configuration's ratios to both baselines with their intervals, what they
decide, and each subject's first, cold run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "RUN_FIGURES",
    "interval_text",
    "junit_figures",
    "run_figures",
    "search_figures",
    "trial_figures",
    "unmeasured",
    "validation_figures",
]

RUN_FIGURES = (
    "compile_seconds",
    "cuda_graph_recordings",
    "cuda_graph_skips",
    "peak_memory_mb",
    "peak_reserved_mb",
    "compile_peak_reserved_mb",
    "warmup_passes",
)
"""A run's figures worth a line in the summary, as RunRecord names them."""


def interval_text(interval: Mapping[str, Any] | None) -> str | None:
    """'1.07x [1.02, 1.12]' from an interval's dict (median, low, high), or None."""
    if not interval or interval.get("median") is None:
        return None
    return f"{interval['median']:.2f}x [{interval['low']:.2f}, {interval['high']:.2f}]"


def run_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """The RUN_FIGURES a run recorded (those it has)."""
    return {k: _rounded(record[k]) for k in RUN_FIGURES if record.get(k) is not None}


def search_figures(folder: str | Path) -> dict[str, Any]:
    """The headline of a search folder: its best.yaml and, where Optuna can read it, its study's trials."""
    import yaml

    folder = Path(folder)
    best = yaml.safe_load((folder / "best.yaml").read_text(encoding="utf-8"))
    metrics = best.get("metrics") or {}
    figures: dict[str, Any] = {
        "exported": metrics.get("exported"),
        "decision": metrics.get("decision"),
        "vs_compile": interval_text(metrics.get("vs_compile")),
        "vs_eager": interval_text(metrics.get("vs_eager")),
        "compile_seconds": _rounded(metrics.get("compile_seconds")),
        "peak_memory_mb": _rounded(metrics.get("peak_memory_mb")),
        "replicates": metrics.get("replicates", metrics.get("rounds")),
        "configuration": (best.get("study") or {}).get("best_trials", [{}])[0].get("configuration")
        if metrics.get("trial") is not None
        else metrics.get("exported"),
    }
    cache = best.get("compile_cache")
    if isinstance(cache, Mapping):
        kept = ("saved", "bytes", "cold_compile_seconds", "cached_compile_seconds", "note")
        figures["compile_cache"] = {k: _rounded(cache[k]) for k in kept if k in cache}
    study = best.get("study") or {}
    figures["trials"] = trial_figures(folder / str(study.get("storage") or "study.db"), str(study.get("name")))
    if figures["vs_compile"]:
        vs = f"{figures['vs_compile']} vs plain compile"
    else:  # plain compile itself, or eager, was exported
        vs = f"{figures['vs_eager']} vs eager" if figures["vs_eager"] else "no interval"
    # best.yaml's decision is the best configuration's against plain compile, not the exported baseline's.
    decided = figures["decision"] if metrics.get("trial") is not None else f"best configuration {figures['decision']}"
    figures["headline"] = f"exported {figures['exported']}: {vs} ({decided})"
    return {k: v for k, v in figures.items() if v is not None}


def unmeasured(figures: Mapping[str, Any]) -> str | None:
    """Why a search stage showed nothing of the GPU path beyond its baselines, or None: a search whose every trial
    was plain compile's run reused, or failed, or never started (its --timeout reached first), exports plain
    compile and exits 0, having measured no configuration of its own."""
    trials = figures.get("trials")
    if not isinstance(trials, list):
        return f"its trials could not be read ({trials})"
    # A pruned trial ran and measured windows on the device too; a failed one showed only its failure.
    measured = [t for t in trials if t.get("state") in ("complete", "pruned") and t.get("measured")]
    if measured:
        return None
    ran = ", ".join(f"trial {t.get('number')}: {t.get('state')}" for t in trials) or "none"
    return f"no trial was measured beside the baselines (trials {ran})"


def trial_figures(storage: Path, study_name: str) -> list[dict[str, Any]] | str:
    """Per trial: its number, recipe, state, configuration, ratio to plain compile and run figures (or why not)."""
    if not storage.exists():
        return f"no study at {storage}"
    try:
        import optuna

        from autotune.study.storage import record_of

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name=study_name, storage=f"sqlite:///{storage}")
    except Exception as exc:  # the headline still has best.yaml's figures
        return f"the study could not be read: {type(exc).__name__}: {exc}"
    trials = []
    for trial in study.get_trials(deepcopy=False):
        record = record_of(trial)
        attrs = record.flat()
        row: dict[str, Any] = {
            "number": trial.number,
            "state": trial.state.name.lower(),
            "measured": record.measured,
            "recipe": attrs.get("recipe"),
            "configuration": attrs.get("description"),
            "vs_compile": _rounded(attrs.get("speedup_vs_compile")),
            "reason": attrs.get("reason") if trial.state.name != "COMPLETE" else None,
            **run_figures(attrs),
        }
        trials.append({k: v for k, v in row.items() if v is not None})
    return trials


def validation_figures(report: Any) -> dict[str, Any]:
    """The headline of an `autotune.measure.tasks.ValidationReport`: ratios, decision, and each subject's cold run."""
    from autotune.measure import outcome

    campaign = report.campaign
    over_compile, over_eager = report.speedup("compile"), report.speedup("eager")
    decision = outcome(over_compile, report.within)
    figures: dict[str, Any] = {
        "ok": report.ok,
        "configuration": report.config.describe(),
        "vs_compile": interval_text(over_compile.to_dict() if over_compile else None),
        "vs_eager": interval_text(over_eager.to_dict() if over_eager else None),
        "decision": decision,
        "replicates": campaign.replicate_count,
        "compile_seconds": {name: _rounded(campaign.compile_seconds(name)) for name in campaign.subjects},
        "cold": {name: run_figures(record.to_dict()) for name, record in campaign.cold.items()},
    }
    failure = campaign.failure("config")
    if failure is not None:
        figures["failure"] = f"{failure.reason}: {failure.message}"
    vs = figures["vs_compile"] or "no interval"
    figures["headline"] = f"{vs} vs plain compile ({decision})" if report.ok else f"failed: {figures.get('failure')}"
    return figures


def junit_figures(junit: str | Path) -> dict[str, Any]:
    """Each test's outcome and seconds from pytest's JUnit XML report, with the counts as the headline."""
    import xml.etree.ElementTree as ElementTree

    tests: dict[str, dict[str, Any]] = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for tag, said in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            if case.find(tag) is not None:
                outcome = said
        tests[case.get("name", "?")] = {"outcome": outcome, "seconds": round(float(case.get("time") or 0), 1)}
    counts: dict[str, int] = {}
    for test in tests.values():
        counts[test["outcome"]] = counts.get(test["outcome"], 0) + 1
    said = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "no tests"
    slowest = max(tests.items(), key=lambda item: item[1]["seconds"], default=None)
    if slowest is not None:
        said += f" (slowest {slowest[1]['seconds']:.0f} s: {slowest[0]})"
    return {"counts": counts, "tests": tests, "headline": said}


def _rounded(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value
