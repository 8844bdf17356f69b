"""The CUDA path with real workers on a real GPU: collected only where CUDA is present (`bash .ci/gpu`).

Cheapest first, so that a check stopped at its limit has run the most tests: in-process checks,
then one cold compile a test, then two at once, then the paired campaign (which the GPU check
leaves out, its validate stage measuring the same pair).
"""

from __future__ import annotations

import os

import torch

from autotune import CompileConfig
from autotune.measure import CampaignRules, Harness, Subject, Throughput, outcome
from autotune.measure.engine import _engine as engine
from autotune.runtime.device import parse_device
from autotune.trial.request import RunProtocol
from autotune.trial.runner import run_trial
from autotune.workload import resolve

TOY = "examples.toy:model"


def harness(device: str = "cuda") -> Harness:
    workload = resolve(TOY)
    return Harness(
        spec=TOY,
        summary=workload.summary(TOY, workload.draw_batches()),
        device=device,
        protocol=RunProtocol(window_seconds=0.25, fresh_batches=24),
        timeout=600,
    )


def test_the_gpu_probe_is_stable_on_an_idle_gpu() -> None:
    device = parse_device("cuda")
    device.calibration_probe()  # the first call pays for the allocation and the kernels' loading
    probes = [device.calibration_probe() for _ in range(10)]
    assert min(probes) > 0
    assert max(probes) / min(probes) < 1.2, probes  # PROBE_SLOWDOWN flags 1.5x


def test_the_cuda_device_counts_what_its_tensors_take_and_what_is_left() -> None:
    device = parse_device("cuda:0")
    device.prepare()
    device.reset_peak_memory()
    block = torch.empty(64 * 2**20, dtype=torch.uint8, device=device.torch_device)  # 64 MiB
    device.synchronize()
    peak, reserved, free = device.peak_memory_mb(), device.peak_reserved_mb(), device.free_memory_mb()
    assert peak >= 64 and reserved is not None and reserved >= peak, (peak, reserved)
    assert free is not None and 0 < free < torch.cuda.get_device_properties(0).total_memory / 2**20
    del block
    device.go_quiet()  # synchronises, and keeps the cached block for the next window
    assert torch.cuda.memory_reserved(0) >= 64 * 2**20
    assert device.memory_kind == "cuda_allocated" and device.in_worker() == parse_device("cuda:0")


class StaleGraph(torch.nn.Module):
    """A hand-made CUDA graph with the fault the replayed check exists for: it warms up on its first call,
    records on its second, and from then on replays without copying the new batch into its static input."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.linear = linear
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 1:
            return self.linear(x)
        if self.graph is None:
            self.static_in = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.linear(self.static_in)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_out = self.linear(self.static_in)
            return self.static_out
        self.graph.replay()  # the fault: x is never copied into self.static_in
        return self.static_out


def test_the_replayed_accuracy_check_catches_a_stale_static_input() -> None:
    from types import SimpleNamespace

    import pytest

    from autotune.trial.failure import TrialFailure
    from autotune.trial.references import EagerReference
    from autotune.workload.steps import StepRunner

    device = torch.device("cuda")
    workload = SimpleNamespace(trains=False, step=None, autocast=None, run_forward=lambda model, batch: model(batch))
    linear = torch.nn.Linear(16, 16).to(device)
    batch, other = torch.randn(8, 16, device=device), torch.randn(8, 16, device=device)
    for cuda_graphs in (True, False):
        step = StepRunner(workload, device, cuda_graphs=cuda_graphs)  # type: ignore[arg-type]
        reference = EagerReference.of(workload, linear, batch, step)  # type: ignore[arg-type]
        reference.other = other
        if cuda_graphs:
            # Warm-up and recording on the other batch, then a replay on this one: it returns the other's outputs.
            with pytest.raises(TrialFailure, match="differs from eager"):
                reference.check(StaleGraph(linear), None, lambda b: b)
        else:
            # The first call alone is the warm-up, which is right: without a replay the fault is not seen.
            reference.check(StaleGraph(linear), None, lambda b: b)


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


def test_two_workers_on_one_gpu_measure_one_at_a_time_and_go_quiet_before_they_stop(tmp_path) -> None:
    import threading

    from autotune.measure.tasks import measure_trial
    from autotune.trial.gate import MeasurementGate

    runs = []
    gate = MeasurementGate()

    def one(config: CompileConfig, folder: str) -> None:
        request = harness().request(config, cache_dir=str(tmp_path / folder))
        run, _ = measure_trial(request, monitor=None, on_window=None, gate=gate, reference=None, windows=1, rng=None)  # type: ignore[arg-type]
        runs.append(run)

    threads = [
        threading.Thread(target=one, args=(CompileConfig(), "plain")),
        # A second configuration that compiles as fast as the first: the gate is what is tested, and a cold
        # max-autotune compile would add a minute of GEMM benchmarking to the GPU check.
        threading.Thread(target=one, args=(CompileConfig(dynamic=True), "dynamic")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    gate.close()
    assert len(runs) == 2 and all(run.state == "complete" for run in runs), [(r.reason, r.message) for r in runs]
    (a_start, a_end), (b_start, b_end) = sorted(tuple(run.measured_between) for run in runs)
    assert a_end <= b_start, "two measurements overlapped"
    quiet = [run.quiet_pauses for run in runs if run.paused_seconds > 0]
    assert quiet and all(pauses[0] >= 1 for pauses in quiet), quiet  # a paused worker went quiet first


def test_reduce_overhead_and_plain_compile_are_measured_paired_and_decided(tmp_path) -> None:
    subjects = [
        Subject(name="compile", config=CompileConfig()),
        Subject(name="reduce-overhead", config=CompileConfig(mode="reduce-overhead")),
    ]
    campaign = engine.measure(
        harness(),
        subjects,
        objective=Throughput(),
        rules=CampaignRules(min_replicates=3, max_replicates=6),
        cache_root=tmp_path,
    )
    cold = campaign.cold["reduce-overhead"]
    assert cold.complete, cold.message + cold.stderr_tail
    assert cold.peak_memory_mb and cold.peak_memory_mb > 0
    said = outcome(campaign.ratio("reduce-overhead", "compile"), 0.02)
    assert said != "undecided" or campaign.replicate_count == 6, campaign.design()
