"""`--json`: one machine-readable summary on standard output, for `search`, `validate`, `retune` and `show`.

Every summary is one JSON object with `schema` (`SCHEMA`) and `command` first; docs/json.md
lists its fields. Progress lines stay on standard error, and nothing else is printed on
standard output, so `autotune search ... --json | jq .exported` reads it whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA", "emit", "retune_summary", "tuned_summary", "validate_summary"]

SCHEMA = "autotune-summary/1"
"""The summary's format: a field may be added within it; one renamed or removed starts /2."""


def emit(command: str, fields: dict[str, Any]) -> None:
    """Print the summary of `command` as one JSON object on standard output."""
    print(json.dumps({"schema": SCHEMA, "command": command, **fields}, indent=2, default=str))


def _interval(value: Any) -> dict[str, Any] | None:
    """An interval as best.yaml keeps it ({median, low, high, replicates}; files of earlier versions say `rounds`
    for the replicates), or None."""
    if not isinstance(value, dict):
        return None
    shown = {key: value.get(key) for key in ("median", "low", "high") if key in value}
    if "replicates" in value or "rounds" in value:
        shown["replicates"] = value.get("replicates", value.get("rounds"))
    return shown


def tuned_summary(path: Path) -> dict[str, Any]:
    """What a best.yaml says, for `search` (the file it exported) and `show`: the export, its figures, its files."""
    from autotune.runtime import tuned  # lazy: see the package docstring

    recorded = tuned.read(path)
    metrics = recorded.metrics
    folder = path.parent
    return {
        "exported": metrics.get("exported"),
        "trial": metrics.get("trial"),
        "decision": metrics.get("decision"),
        "verdict": metrics.get("verdict"),
        "confirmed": metrics.get("confirmed"),
        "objective": metrics.get("objective"),
        "unit": metrics.get("unit"),
        "value": metrics.get("value"),
        "vs_compile": _interval(metrics.get("vs_compile")),
        "vs_eager": _interval(metrics.get("vs_eager")),
        "samples_per_second": metrics.get("samples_per_second"),
        "compile_seconds": metrics.get("compile_seconds"),
        "cost": metrics.get("cost"),
        "config": recorded.config.to_dict(),
        "workload": {"spec": recorded.workload.spec, "task": recorded.workload.task},
        "created": recorded.created,
        "environment_differences": {k: list(v) for k, v in recorded.environment_differences().items()},
        "files": {
            "best_yaml": str(path),
            "apply_compilation": str(folder / "apply_compilation.py"),
            "report": str(folder / "report.md"),
            "trials": str(folder / "trials.csv"),
        },
    }


def validate_summary(report: Any, code: int) -> dict[str, Any]:
    """A validation's figures and what they decide (`ValidationReport`), with the exit code it ends with."""
    from autotune.measure.stats import outcome  # lazy: see the package docstring

    failure = report.campaign.failure("config")
    versus = report.speedup("compile")
    eager = report.speedup("eager")
    return {
        "path": str(report.path),
        "model": report.model,
        "config": report.config.to_dict(),
        "ok": report.ok,
        "slower": report.slower,
        "exit_code": code,
        "failure": {"reason": failure.reason, "message": failure.message} if failure is not None else None,
        "vs_compile": versus.to_dict() if versus is not None else None,
        "vs_eager": eager.to_dict() if eager is not None else None,
        "decision": outcome(versus, report.within) if failure is None else None,
        "replicates": report.campaign.replicate_count,
    }


def retune_summary(result: Any, code: int) -> dict[str, Any]:
    """A retune's decision and figures: its history.jsonl line, the files and the exit code."""
    return {
        **result.to_history(),
        "exit_code": code,
        "files": {"best_yaml": str(result.path), "history": str(Path(result.path).parent / "history.jsonl")},
    }
