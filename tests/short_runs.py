"""Shorter measurement for tests whose claims rest on large differences, not on fine ones.

A window lasts about 0.5 s by default; the tiny test workloads reach a steady rate well
within a quarter of that, and most of a test's time would otherwise go to measuring it.
"""

from __future__ import annotations

from typing import Any

from autotune import CompileConfig
from autotune.runtime import codegen
from autotune.trial.request import TrialRequest
from autotune.trial.run_record import RunRecord
from autotune.workload import resolve

SHORT = {"window_seconds": 0.25}
"""Protocol fields."""

SHORT_FLAGS = ("--window-seconds", "0.25")
"""The same as `autotune search` flags."""


def source_for(spec: str, config: CompileConfig) -> str:
    """The generated `apply_compilation` code of `config` for the workload `spec`, as a search would write it."""
    workload = resolve(spec)
    summary = workload.summary(spec, workload.draw_batches())
    return codegen.generate(config, summary, created="2026-01-01T00:00:00+00:00", version="test")


def run_config(spec: str, config: CompileConfig | None = None, timeout: float = 300, **fields: Any) -> RunRecord:
    """One run of `config` (plain compile by default) of the workload `spec`, to its end, as a trial's first run."""
    from autotune.trial.runner import run_trial

    source = source_for(spec, config or CompileConfig())
    return run_trial(TrialRequest(spec=spec, source=source, timeout=timeout, **fields)).record()
