"""One probe of a narrowing: a short run of a configuration in a fresh worker, to its first checked steps.

A probe is no measured trial: the worker builds, compiles, checks against eager and warms up
on the fixed batches, and is ended there, before any window or pass over the fresh stream. Its
request comes from the search's own `Harness`, so a probe runs the generated code a trial runs.
"""

from __future__ import annotations

import time
from dataclasses import replace

from autotune.errors import ConfigError
from autotune.measure import Harness
from autotune.runtime.config import CompileConfig
from autotune.study.explain._narrow import Probe, ProbeOutcome
from autotune.study.storage import COMPILER_FAILURES
from autotune.trial.runner import live_worker

__all__ = ["COMPILER_FAILURES", "SHORT_WINDOW_SECONDS", "explainable", "short_probe"]


SHORT_WINDOW_SECONDS = 0.05
"""A probe's window, the shortest: its worker is ended once ready, before any window is measured."""


def explainable(reason: str) -> bool:
    """Whether a trial that failed for `reason` can be narrowed to the settings that caused it."""
    return reason in COMPILER_FAILURES


def short_probe(harness: Harness, reason: str) -> Probe:
    """A probe that runs a configuration with `harness` and says whether it failed for `reason`."""
    protocol = replace(
        harness.protocol, windows=1, settle_windows=1, fresh_batches=0, window_seconds=SHORT_WINDOW_SECONDS
    )
    short = replace(harness, protocol=protocol)

    def probe(config: CompileConfig, seconds: float) -> ProbeOutcome:
        started = time.monotonic()
        try:
            request = replace(short.request(config), timeout=max(1.0, min(seconds, harness.timeout)))
        except ConfigError as exc:
            return ProbeOutcome(False, "invalid_config", str(exc), time.monotonic() - started)
        with live_worker(request) as worker:
            worker.until_ready()
            run = worker.end().record()
        failed = run.state == "failed" and run.reason == reason
        return ProbeOutcome(failed, run.reason, run.message, time.monotonic() - started)

    return probe
