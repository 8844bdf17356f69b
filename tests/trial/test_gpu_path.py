"""The CUDA path's rules, checked without a GPU: the worker's environment on a GPU, when a GPU may not be shared,
CUDA-graph recordings counted as compiling, the replayed accuracy check, the output-clone rule.

Which GPU a worker is given, and the other rules of one device, are in tests/runtime/test_device.py; what
only a GPU can show is in tests/gpu (`bash .ci/gpu`).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autotune import ConfigError
from autotune.trial import compile_counts, live
from autotune.trial.devices import core_sets, refuse_shared_exclusive
from autotune.trial.references import EagerReference, same_shapes
from autotune.trial.request import TrialRequest
from autotune.workload.steps import StepRunner

pytestmark = pytest.mark.parallel


def test_the_worker_environment_maps_the_device(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,7")
    request = TrialRequest(spec="m:f", source=None, device="cuda:1")
    env = live._environment(tmp_path, request, 3)
    assert env["CUDA_VISIBLE_DEVICES"] == "7"
    assert live._payload(request, tmp_path)["device"] == "cuda:0", "the worker sees only that GPU, as its cuda:0"
    cpu = TrialRequest(spec="m:f", source=None, device="cpu")
    assert live._environment(tmp_path, cpu, 3)["CUDA_VISIBLE_DEVICES"] == "6,7", "a CPU worker's is left as it was"
    assert live._payload(cpu, tmp_path)["device"] == "cpu"


def test_workers_that_would_share_an_exclusive_gpu_are_refused() -> None:
    modes = {"cuda:0": "Default", "cuda:1": "Exclusive_Process"}
    asked: list[str] = []

    def mode_of(device: str, visible: str | None) -> str | None:
        asked.append(device)
        return modes[device]

    refuse_shared_exclusive(["cuda:0", "cuda:1"], 2, None, mode_of)  # one worker per device: nothing shared
    assert asked == []
    refuse_shared_exclusive(["cuda:0"], 3, None, mode_of)  # a GPU in the default mode may be shared
    with pytest.raises(ConfigError, match=r"--workers 4: cuda:1 is in compute mode 'Exclusive_Process'.*--workers 2"):
        refuse_shared_exclusive(["cuda:0", "cuda:1"], 4, None, mode_of)
    refuse_shared_exclusive(["cuda:0", "cuda:1"], 4, None, lambda device, visible: None)  # unknown: allowed
    refuse_shared_exclusive(["cpu"], 2, None)  # the CPU has no compute mode: shared, and nvidia-smi is not asked


class Returns(torch.nn.Module):
    """An inference model that returns a buffer it keeps, as a replayed graph returns its static output."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("kept", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.kept


def test_every_inference_step_clones_what_it_returns_not_only_cuda_graph_ones() -> None:
    # A replayed CUDA graph returns its static buffers, which the next replay overwrites, so its step
    # copies them; every other subject's step copies too, or reduce-overhead alone would pay for reading.
    workload = SimpleNamespace(trains=False, step=None, autocast=None, run_forward=lambda model, batch: model(batch))
    model = Returns()
    step = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)  # type: ignore[arg-type]
    (out,) = step(model, None, torch.ones(3))
    assert out.data_ptr() != model.kept.data_ptr() and torch.equal(out, model.kept)


def test_a_cuda_graph_recording_counts_as_compiling() -> None:
    # CUDA-graph trees record at run time, which moves none of dynamo's frame counters; torch calls
    # dynamo's compile callbacks around each recording, and that is what a window's count must see.
    from torch._dynamo.callback import CallbackTrigger

    compile_counts.watch_compiles()
    compile_counts.watch_compiles()  # twice is once
    before, recorded = compile_counts.frames_compiled(), compile_counts.dynamo_counts()["cuda_graph_recordings"]
    with torch._dynamo.callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"):
        pass
    assert compile_counts.frames_compiled() == before + 1
    assert compile_counts.dynamo_counts()["cuda_graph_recordings"] == recorded + 1
    with torch._dynamo.callback_handler.install_callbacks(CallbackTrigger.LAZY_BACKWARD, "0/0"):
        pass  # a lazy backward compile is not a recording (its frames are counted by dynamo)
    assert compile_counts.dynamo_counts()["cuda_graph_recordings"] == recorded + 1


def test_graphs_torch_ran_without_cuda_graphs_are_counted() -> None:
    from torch._dynamo.utils import counters

    skipped = compile_counts.dynamo_counts()["cuda_graph_skips"]
    counters["inductor"]["cudagraph_skips"] += 1
    try:
        assert compile_counts.dynamo_counts()["cuda_graph_skips"] == skipped + 1
    finally:
        counters["inductor"]["cudagraph_skips"] -= 1


def test_batches_of_the_same_shapes_are_told_from_others() -> None:
    a = {"input_ids": torch.zeros(2, 8, dtype=torch.long), "labels": torch.zeros(2, 8, dtype=torch.long)}
    assert same_shapes(a, {k: v + 1 for k, v in a.items()})
    assert not same_shapes(a, {**a, "input_ids": torch.zeros(2, 9, dtype=torch.long)})
    assert not same_shapes(a, {**a, "labels": torch.zeros(2, 8)})
    assert not same_shapes(a, {"input_ids": a["input_ids"]})
    assert same_shapes((torch.ones(3), 1), (torch.zeros(3), 2))


class Seen(torch.nn.Module):
    """An inference model that notes the first value of each batch it is called on."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(float(x[0]))
        return x * 2


def test_under_cuda_graphs_the_checked_call_is_a_replay_after_warm_up_and_recording_on_another_batch() -> None:
    workload = SimpleNamespace(trains=False, step=None, autocast=None, run_forward=lambda model, batch: model(batch))
    model, batch, other = Seen(), torch.full((4,), 1.0), torch.full((4,), 7.0)
    for cuda_graphs, calls in ((False, [1.0, 1.0]), (True, [1.0, 7.0, 7.0, 1.0])):
        model.seen.clear()
        step = StepRunner(workload, torch.device("cpu"), cuda_graphs=cuda_graphs)  # type: ignore[arg-type]
        reference = EagerReference.of(workload, model, batch, step)  # type: ignore[arg-type]
        reference.other = other
        reference.check(model, None, lambda b: b)
        # The reference, then (under CUDA graphs) the warm-up and the recording on the other batch,
        # and last the compared call, on the reference's batch.
        assert model.seen == calls


def test_workers_on_different_gpus_get_disjoint_cores_and_workers_of_one_device_share_theirs() -> None:
    assert core_sets(["cuda:0", "cuda:1", "cuda:0"], list(range(8))) == {
        "cuda:0": (0, 1, 2, 3),
        "cuda:1": (4, 5, 6, 7),
    }
    assert core_sets(["cuda:0", "cuda:1", "cuda:2"], [0, 1, 2, 3, 5, 7, 9]) == {
        "cuda:0": (0, 1, 2),
        "cuda:1": (3, 5),
        "cuda:2": (7, 9),
    }
    assert core_sets(["cpu", "cpu"], [0, 1]) == {}, "one device: its workers measure in turns, on every core"
    assert core_sets(["cuda:0", "cuda:1", "cuda:2"], [0, 1]) == {}, "fewer cores than devices: nothing to split"


def test_a_pool_worker_gets_its_devices_cores_and_a_share_of_a_gpu_it_shares(monkeypatch) -> None:
    from autotune.measure import Harness
    from autotune.study.search._pool import TrialPool
    from autotune.workload import resolve

    spec = "tests.trial_targets.workloads:tiny_infer"
    workload = resolve(spec)
    harness = Harness(spec=spec, summary=workload.summary(spec, workload.draw_batches()))
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    loop = SimpleNamespace(harness=harness)
    pool = TrialPool(loop, ["cuda:0", "cuda:1", "cuda:0"], more=lambda: False, finished_one=lambda: None)  # type: ignore[arg-type]
    first, second = pool.harness_for("cuda:0"), pool.harness_for("cuda:1")
    assert (first.device, first.cpus, first.memory_share) == ("cuda:0", (0, 1, 2, 3), 0.5)
    assert (second.device, second.cpus, second.memory_share) == ("cuda:1", (4, 5, 6, 7), None)
    request = first.request(None)
    assert (request.cpus, request.memory_share) == ((0, 1, 2, 3), 0.5)
    env = live._environment(Path("/tmp/cache"), request, 9)
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == "4" and env["OMP_NUM_THREADS"] == "4"
    assert live._payload(request, Path("/tmp/work"))["memory_share"] == 0.5
    cpu = TrialPool(loop, ["cpu", "cpu"], more=lambda: False, finished_one=lambda: None)  # type: ignore[arg-type]
    assert (cpu.harness_for("cpu").cpus, cpu.harness_for("cpu").memory_share) == (None, None)


def test_the_order_a_worker_reads_is_what_the_parent_wrote_and_nothing_else(tmp_path: Path) -> None:
    from autotune.trial.records import RecordError, WorkerOrder

    request = TrialRequest(spec="pkg.mod:model", source="x = 1\n", seed=3, changes_precision=True, memory_share=0.25)
    written = live._payload(request, tmp_path)
    order = WorkerOrder.from_json(written)
    assert (order.spec, order.seed, order.source, order.changes_precision) == ("pkg.mod:model", 3, "x = 1\n", True)
    assert order.source_path == str(tmp_path / "apply_compilation.py") and order.memory_share == 0.25
    with pytest.raises(RecordError, match="unknown field"):
        WorkerOrder.from_json({**written, "seeed": 4})  # a misspelt field is named, not read as a default
    with pytest.raises(RecordError, match="an? .order. record from the parent"):
        WorkerOrder.from_json({})
    with pytest.raises(RecordError, match="missing field.*seed"):
        WorkerOrder.from_json({k: v for k, v in written.items() if k != "seed"})
