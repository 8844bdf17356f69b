"""One benchmark stage's body: its subject's configurations, each one cold run in a fresh worker (see `_bench`).

Each run's figures are printed as it ends and written to the stage's figures file at once, so a
stage stopped at its limit keeps the runs it finished.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from autotune.measure import Harness
from autotune.measure.tasks import without_cuda_graphs
from autotune.runtime.config import CompileConfig
from autotune.runtime.device import device_name, query_gpu
from autotune.trial.request import RunProtocol
from autotune.trial.runner import run_trial
from autotune.workload import resolve
from examples._shared import SIZE_VARIABLE
from examples.gpu_check._bench import subject
from examples.gpu_check._stages import FIGURES_VARIABLE

__all__ = ["BENCH_RUN_FIGURES", "device_figures", "headline", "run_subject"]

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
)
"""A benchmark run's figures, as `RunRecord` names them: `samples_per_second` is the fresh-batch pass's rate and
`steady_samples_per_second` the settled windows' on the fixed batches."""


LEAST_RUN_SECONDS = 15.0
"""A run is not started with less than this left: it could not even start and make its device ready."""


def run_subject(name: str, *, dry_run: bool, seconds: float) -> int:
    """Run the subject `name`'s configurations one after another, within `seconds` in all (each run may take what is
    left); 0 when every run completed."""
    started = time.monotonic()
    entry = subject(name)
    os.environ[SIZE_VARIABLE] = "tiny" if dry_run else "full"  # read by the workload here and by its workers
    device = "cpu" if dry_run else "cuda"
    figures: dict[str, Any] = {
        "what": entry.what,
        "model": entry.model,
        "size": os.environ[SIZE_VARIABLE],
        "note": "each configuration is one cold run: its figures have no interval",
        "device": device_figures(device),
        "runs": {},
    }
    _write(figures)
    harness, configs = _harness(entry.model, device, dry_run, name)
    for label, config in zip((label for label, _ in entry.configs), configs, strict=True):
        left = seconds - (time.monotonic() - started)
        if left < LEAST_RUN_SECONDS:
            kept: dict[str, Any] = {"state": "not run", "reason": f"the stage's {seconds:g} s were spent"}
        else:
            print(f"{name}: {label} ({config.describe() if config else 'no compilation'}): one cold run", flush=True)
            record = run_trial(dataclasses.replace(harness, timeout=left).request(config)).record().to_dict()
            kept = {k: record[k] for k in BENCH_RUN_FIGURES if record.get(k) not in (None, "", {}, [])}
            kept["configuration"] = config.describe() if config else "eager"
        figures["runs"][label] = kept
        figures["headline"] = headline(figures["runs"])
        _write(figures)
        print(f"{name}: {label}: {json.dumps(kept, default=str)}", flush=True)
    return 0 if all(run["state"] == "complete" for run in figures["runs"].values()) else 1


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


def device_figures(device: str) -> dict[str, Any]:
    """The device's clocks (where nvidia-smi says them) and the process's TF32 settings, which the figures rest on."""
    figures: dict[str, Any] = {
        "name": device_name(device),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if device.startswith("cuda"):
        for field in ("clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit", "temperature.gpu"):
            figures[field] = query_gpu(field)
    return figures


def _write(figures: dict[str, Any]) -> None:
    target = os.environ.get(FIGURES_VARIABLE)
    if target:
        Path(target).write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
