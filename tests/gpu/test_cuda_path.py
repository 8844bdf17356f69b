"""The CUDA path with real workers on a real GPU: collected only where CUDA is present (`bash .ci/gpu`)."""

from __future__ import annotations

import os

import torch

from autotune import CompileConfig
from autotune.measure import Budget, Harness, Objective, Subject, outcome
from autotune.measure import _engine as engine
from autotune.trial.request import Protocol
from autotune.trial.runner import run_trial
from autotune.workload import resolve

TOY = "examples.toy:model"


def harness(device: str = "cuda") -> Harness:
    workload = resolve(TOY)
    return Harness(
        spec=TOY,
        summary=workload.summary(TOY, workload.draw_batches()),
        device=device,
        protocol=Protocol(window_seconds=0.25, fresh_batches=24),
        timeout=600,
    )


def test_the_worker_runs_on_the_gpu_the_parent_means(monkeypatch) -> None:
    # Under the parent's CUDA_VISIBLE_DEVICES the worker's cuda:0 is the parent's cuda:N.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(torch.cuda.device_count())))
    last = f"cuda:{torch.cuda.device_count() - 1}"
    run = run_trial(harness(last).request(CompileConfig()))
    record = run.record()
    assert record.complete, record.message + record.stderr_tail
    assert run.environment.get("device_name") == torch.cuda.get_device_name(torch.cuda.device_count() - 1)


def test_reduce_overhead_and_plain_compile_are_measured_paired_and_decided(tmp_path) -> None:
    subjects = [
        Subject(name="compile", config=CompileConfig()),
        Subject(name="reduce-overhead", config=CompileConfig(mode="reduce-overhead")),
    ]
    campaign = engine.measure(
        harness(), subjects, objective=Objective(), budget=Budget(min_rounds=3, max_rounds=6), cache_root=tmp_path
    )
    cold = campaign.cold["reduce-overhead"]
    assert cold.complete, cold.message + cold.stderr_tail
    assert cold.peak_memory_mb and cold.peak_memory_mb > 0
    said = outcome(campaign.ratio("reduce-overhead", "compile"), 0.02)
    assert said != "undecided" or campaign.rounds == 6, campaign.design()


def test_cuda_graph_recording_is_part_of_the_compile_time_and_skips_are_reported() -> None:
    # The first pass compiles and warms up, the second records: without counting recordings the
    # second pass looks quiet and warm-up stops there, before the graphs replay.
    run = run_trial(harness().request(CompileConfig(mode="reduce-overhead", dynamic=True)))
    record = run.record()
    assert record.complete, record.message + record.stderr_tail
    assert record.cuda_graph_recordings and record.cuda_graph_recordings > 0
    assert record.warmup_passes is not None and record.warmup_passes >= 3
    assert record.cuda_graph_skips is not None
    assert record.peak_reserved_mb and record.peak_memory_mb and record.peak_reserved_mb >= record.peak_memory_mb
    assert record.compile_peak_memory_mb and record.compile_peak_memory_mb > 0
