"""One benchmark stage's body: its subject's configurations, each one cold run in a fresh worker (see `_bench`).

Each run's figures are printed as it ends and written to the stage's figures file at once, so a
stage stopped at its limit keeps the runs it finished. What a run's figures rest on (the device's
clocks, the TF32 settings in force) is read by the worker that ran it, once ready: the stage's
`device` is its first completed run's, and each run keeps its own (`device_figures`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.measure import Harness
from autotune.measure.tasks import without_cuda_graphs
from autotune.runtime.config import CompileConfig
from autotune.trial.request import RunProtocol
from autotune.trial.runner import run_trial
from autotune.workload import resolve
from examples._shared import SIZE_VARIABLE
from examples.gpu_check._bench import subject
from examples.gpu_check._cost import RUN_COSTS
from examples.gpu_check._stages import FIGURES_VARIABLE

__all__ = ["BENCH_RUN_FIGURES", "headline", "no_room", "run_subject"]

BENCH_RUN_FIGURES = (
    "state",
    "reason",
    "compile_seconds",
    "compile_split",
    "steady_samples_per_second",
    "samples_per_second",
    "peak_memory_mb",
    "peak_reserved_mb",
    "memory_kind",
    "compile_peak_memory_mb",
    "compile_peak_reserved_mb",
    "cuda_graph_recordings",
    "cuda_graph_skips",
    "graph_breaks",
    "recompiles",
    "fresh_recompiles",
    "warmup_passes",
    "device_figures",
)
"""A benchmark run's figures, as `RunRecord` names them: `samples_per_second` is the fresh-batch pass's rate and
`steady_samples_per_second` the settled windows' on the fixed batches."""


LEAST_RUN_SECONDS = 15.0
"""On the CPU, a run is not started with less than this left: it could not even start and make its device ready."""


def run_subject(name: str, *, dry_run: bool, seconds: float) -> int:
    """Run the subject `name`'s configurations one after another, within `seconds` in all (each run may take what is
    left); 0 when every run it started completed.

    A run is started only where what is left holds its modelled cost on a GPU (`RUN_COSTS`; on the CPU,
    `LEAST_RUN_SECONDS`): one that would not fit is recorded as skipped, not started and stopped."""
    started = time.monotonic()
    entry = subject(name)
    os.environ[SIZE_VARIABLE] = "tiny" if dry_run else "full"  # read by the workload here and by its workers
    device = "cpu" if dry_run else "cuda"
    figures: dict[str, Any] = {
        "what": entry.what,
        "model": entry.model_for(dry_run=dry_run),
        "size": os.environ[SIZE_VARIABLE],
        "note": "each configuration is one cold run: its figures have no interval",
        "device": {},
        "runs": {},
    }
    _write(figures)
    harness, configs = _harness(entry.model_for(dry_run=dry_run), device, dry_run, name)
    for label, config in zip((label for label, _ in entry.configs), configs, strict=True):
        left = seconds - (time.monotonic() - started)
        why = no_room(name, label, left=left, seconds=seconds, dry_run=dry_run)
        if why is not None:
            kept: dict[str, Any] = {"state": "skipped", "reason": why}
        else:
            print(f"{name}: {label} ({config.describe() if config else 'no compilation'}): one cold run", flush=True)
            try:
                request = dataclasses.replace(harness, timeout=left).request(config)
            except AutotuneError as exc:  # a configuration the workload cannot take: a failed run, and the next runs
                record = {"state": "failed", "reason": "config", "message": str(exc)}
            else:
                record = run_trial(request).record().to_dict()
            kept = {k: record[k] for k in (*BENCH_RUN_FIGURES, "message") if record.get(k) not in (None, "", {}, [])}
            kept["configuration"] = config.describe() if config else "eager"
        figures["runs"][label] = kept
        if not figures["device"] and kept.get("device_figures"):
            figures["device"] = kept["device_figures"]
        figures["headline"] = headline(figures["runs"])
        _write(figures)
        print(f"{name}: {label}: {json.dumps(kept, default=str)}", flush=True)
    started_runs = [run for run in figures["runs"].values() if run["state"] != "skipped"]
    return 0 if started_runs and all(run["state"] == "complete" for run in started_runs) else 1


def no_room(name: str, label: str, *, left: float, seconds: float, dry_run: bool) -> str | None:
    """Why the run `label` of the subject `name` is not started with `left` of its stage's `seconds`, or None: on a
    GPU it needs its modelled cost (`RUN_COSTS`), on the CPU `LEAST_RUN_SECONDS`."""
    need = LEAST_RUN_SECONDS if dry_run else RUN_COSTS[name][label]
    if left >= need:
        return None
    return f"modelled at {need:.0f} s, {max(left, 0):.0f} s left of the stage's {seconds:g} s"


def _harness(model: str, device: str, dry_run: bool, name: str) -> tuple[Harness, list[CompileConfig | None]]:
    """The harness the stage's runs share, and each configuration as the device can run it."""
    workload = resolve(model)
    protocol = (
        RunProtocol(windows=2, window_seconds=0.1, fresh_batches=4)
        if dry_run
        else RunProtocol(windows=3, window_seconds=0.5, fresh_batches=8)
    )
    harness = Harness(
        spec=model, summary=workload.summary(model, workload.draw_batches()), device=device, protocol=protocol
    )
    configs: list[CompileConfig | None] = []
    for _, settings in subject(name).configs:
        config = None if settings is None else CompileConfig(**settings)
        # The dry run's CPU has no CUDA graphs: max-autotune runs as max-autotune-no-cudagraphs there.
        configs.append(without_cuda_graphs(config) if config is not None and dry_run else config)
    return harness, configs


def headline(runs: dict[str, dict[str, Any]]) -> str:
    """Each run's fresh-batch rate, and its compile seconds where it compiled: 'eager 812/s; plain compile 1204/s
    (compile 41 s)'; a run that did not complete, its reason."""
    parts = []
    for label, run in runs.items():
        if run.get("state") != "complete":
            parts.append(f"{label} {run.get('state')} ({run.get('reason') or 'no reason'})")
            continue
        rate = f"{label} {run.get('samples_per_second', 0):,.0f}/s"
        compiled = run.get("compile_seconds")
        parts.append(f"{rate} (compile {compiled:.0f} s)" if compiled else rate)
    return "; ".join(parts)


def _write(figures: dict[str, Any]) -> None:
    target = os.environ.get(FIGURES_VARIABLE)
    if target:
        Path(target).write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
