"""The device seam (`autotune.runtime.device`): parsing, the worker's view of its GPU, what each device offers,
and the CUDA device's figures, read from torch.cuda functions stood in for here (no GPU needed).

What only a real GPU can show is in tests/gpu (`bash .ci/gpu`).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autotune import ConfigError
from autotune.errors import SearchError
from autotune.runtime import codegen, environment
from autotune.runtime import device as device_module
from autotune.runtime.config import CompileConfig
from autotune.runtime.device import (
    CPUDevice,
    CUDADevice,
    Device,
    Peaks,
    default_device,
    device_name,
    parse_device,
    recorded_device,
)
from autotune.runtime.summary import WorkloadSummary
from autotune.study.search import load_space
from autotune.study.search._options import _devices
from autotune.trial.gate import quiet_on_gpus
from autotune.trial.request import check_device

pytestmark = pytest.mark.parallel

GPU = "GPU-6a3c1f4e-8b2d-4c7a-9e1f-0d5b2a7c9e31"
MIG = "MIG-1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718"


# -- parsing --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "index", "device_type"),
    [("cpu", CPUDevice, None, "cpu"), ("cuda", CUDADevice, None, "cuda"), ("cuda:3", CUDADevice, 3, "cuda")],
)
def test_a_device_is_parsed_into_its_kind_and_index(text: str, kind: type[Device], index: int | None, device_type: str):
    device = parse_device(text)
    assert type(device) is kind and device.index == index and device.kind == device_type
    assert str(device) == text and device.torch_device == torch.device(text)
    assert parse_device(text) == device and hash(parse_device(text)) == hash(device), "a value: equal when alike"


def test_a_leading_zero_names_the_same_device() -> None:
    assert parse_device("cuda:01") == parse_device("cuda:1") and str(parse_device("cuda:01")) == "cuda:1"


@pytest.mark.parametrize("text", ["gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cpu:0", " cuda", "cuda:0,cuda:1", ""])
def test_a_bad_device_is_refused_naming_it_and_what_is_allowed(text: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_device(text)
    assert str(error.value) == f"--device {text!r} is not allowed; use 'cpu', 'cuda' or 'cuda:N'."


def test_a_recorded_device_this_version_cannot_parse_counts_as_the_cpu() -> None:
    assert recorded_device("cuda:2") == CUDADevice(2)
    assert recorded_device("mps") == CPUDevice(), "best.yaml's environment is free-form: no error on load"


def test_the_default_device_is_the_gpu_where_torch_has_one(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == CUDADevice() and check_device(None) == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == CPUDevice() and check_device(None) == "cpu"


def test_a_gpu_this_machine_lacks_is_refused_by_name(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"--device 'cuda:1': no CUDA device is usable here .*use --device cpu"):
        check_device("cuda:1")
    assert check_device("cpu") == "cpu", "the CPU is always usable"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda:1") == "cuda:1" and check_device("cuda") == "cuda"
    with pytest.raises(ConfigError, match=r"--device 'cuda:2': this machine has 2 CUDA device\(s\), cuda:0 to cuda:1"):
        check_device("cuda:2")


def test_several_devices_must_be_distinct_numbered_gpus(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert _devices("cuda:0, cuda:2", []) == ["cuda:0", "cuda:2"]
    for several in ("cpu,cpu", "cuda,cuda:1", "cuda:1,cuda:01", "cuda:1,gpu"):
        with pytest.raises(SearchError, match="distinct CUDA devices"):
            _devices(several, [])


# -- the worker's view: its GPU and its environment -----------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "visible", "given"),
    [
        ("cuda:0", None, "0"),
        ("cuda:3", None, "3"),
        ("cuda", None, "0"),
        ("cuda:0", "4,5", "4"),  # the parent's cuda:0 is physical GPU 4
        ("cuda:1", "4,5", "5"),
        ("cuda", "4,5", "4"),
        ("cuda:1", f"{GPU},3", "3"),
        ("cuda:0", GPU, GPU),
        ("cuda:0", MIG, MIG),
        ("cuda:0", " 2 , 7 ", "2"),
    ],
)
def test_the_worker_gets_the_parents_nth_visible_gpu(device: str, visible: str | None, given: str) -> None:
    gpu = parse_device(device)
    assert isinstance(gpu, CUDADevice) and gpu.visible_entry(visible) == given
    parent = {"CUDA_VISIBLE_DEVICES": visible} if visible is not None else {}
    assert gpu.worker_environment(parent) == {"CUDA_VISIBLE_DEVICES": given}
    assert gpu.in_worker() == CUDADevice(0), "the worker sees only that GPU, as its cuda:0"


@pytest.mark.parametrize(
    ("device", "visible", "named"),
    [
        ("cuda:2", "4,5", "makes 2 GPU(s) visible, cuda:0 to cuda:1"),
        ("cuda:0", "", "makes 0 GPU(s) visible"),
        ("cuda:1", "3,-1,5", "makes 1 GPU(s) visible"),  # CUDA stops at the first entry it cannot use
    ],
)
def test_a_device_the_parent_cannot_see_is_refused_by_name(device: str, visible: str, named: str) -> None:
    with pytest.raises(ConfigError, match="CUDA_VISIBLE_DEVICES") as error:
        parse_device(device).worker_environment({"CUDA_VISIBLE_DEVICES": visible})
    assert named in str(error.value) and device in str(error.value)


def test_a_cpu_worker_keeps_the_parents_view() -> None:
    cpu = parse_device("cpu")
    assert cpu.worker_environment({"CUDA_VISIBLE_DEVICES": "6,7"}) == {} and cpu.in_worker() == cpu


def test_the_compute_mode_is_asked_of_nvidia_smi_for_the_workers_gpu(monkeypatch) -> None:
    asked: list[tuple[str, str | None]] = []
    monkeypatch.setattr(device_module, "query_gpu", lambda field, gpu=None: asked.append((field, gpu)) or "Default")
    assert parse_device("cuda:1").compute_mode("4,5") == "Default" and asked == [("compute_mode", "5")]
    assert parse_device("cuda:0").compute_mode(MIG) is None, "nvidia-smi does not take MIG UUIDs: unknown"
    assert parse_device("cpu").compute_mode("4,5") is None and len(asked) == 1, "the CPU asks nothing"


def test_the_driver_is_asked_for_a_gpu_only(monkeypatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(device_module, "query_gpu", lambda field, gpu=None: asked.append(field) or "550.54")
    assert environment.fingerprint("cuda:0")["driver"] == "550.54" and asked == ["driver_version"]
    assert environment.fingerprint("cpu")["driver"] is None and asked == ["driver_version"]


# -- the parent's rules: sharing and starting ---------------------------------------------------------------


def test_a_gpu_is_shared_in_memory_shares_and_started_on_beside_a_few_cores() -> None:
    gpu, cpu = parse_device("cuda:0"), parse_device("cpu")
    assert [gpu.memory_share(n) for n in (1, 2, 3)] == [None, 0.5, 0.3333]
    assert [cpu.memory_share(n) for n in (1, 2, 3)] == [None, None, None], "no cap on the host's memory"
    assert [gpu.starts_at_once(c) for c in (2, 16, 64)] == [1, 4, 16]
    assert [cpu.starts_at_once(c) for c in (2, 16, 64)] == [1, 1, 1]
    assert gpu.quiet_before_stop and not cpu.quiet_before_stop
    assert quiet_on_gpus("cuda:1") and not quiet_on_gpus("cpu")


# -- what each device offers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "on_cpu", "on_gpu"),
    [
        ("default", None, None),
        ("max-autotune-no-cudagraphs", None, None),
        ("reduce-overhead", "CUDA graphs need a GPU", None),
        ("max-autotune", "CUDA graphs need a GPU", None),
        ("triton.cudagraphs", "CUDA graphs need a GPU", None),
        ("combo_kernels", "applies to GPU (Triton) code only", None),
        ("triton.cudagraph_trees", "applies to GPU (Triton) code only", None),
        ("cpp.dynamic_threads", None, "applies to CPU (C++) code only"),
        ("cpp.weight_prepack", None, "applies to CPU (C++) code only"),
        ("shape_padding", None, None),
    ],
)
def test_each_device_offers_the_settings_it_has(setting: str, on_cpu: str | None, on_gpu: str | None) -> None:
    cpu, gpu = parse_device("cpu"), parse_device("cuda:1")
    assert (cpu.why_not(setting), gpu.why_not(setting)) == (on_cpu, on_gpu)
    assert (cpu.offers(setting), gpu.offers(setting)) == (on_cpu is None, on_gpu is None)


def test_the_space_drops_what_the_device_lacks_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(
        "description: device rules\n"
        "mode: [default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs]\n"
        "options:\n  shape_padding: [false, true]\n  combo_kernels: [false, true]\n"
        "  triton.cudagraphs: [false, true]\n  cpp.dynamic_threads: [false, true]\n"
    )
    workload = WorkloadSummary(spec="m:f", task="infer", modules=("body",), blocks=())
    on_cpu = load_space(str(path)).adapt(workload, "cpu")
    assert on_cpu.mode == ("default", "max-autotune-no-cudagraphs")
    assert sorted(on_cpu.options) == ["cpp.dynamic_threads", "shape_padding"]
    assert on_cpu.dropped == (
        "mode ['reduce-overhead', 'max-autotune']: CUDA graphs need a GPU",
        "option combo_kernels: applies to GPU (Triton) code only",
        "option triton.cudagraphs: CUDA graphs need a GPU",
    )
    on_gpu = load_space(str(path)).adapt(workload, "cuda:1")
    assert len(on_gpu.mode) == 4 and on_gpu.dropped == ("option cpp.dynamic_threads: applies to CPU (C++) code only",)


# -- the device's name, in autotune and in the generated file -----------------------------------------------------


def test_the_device_name_is_the_gpus_where_cuda_is_usable_else_the_cpus(monkeypatch) -> None:
    cpu_name = device_name("cpu")
    assert cpu_name
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_name("cuda:0") == cpu_name, "without CUDA the recorded name is the host's"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: f"Tesla on {device}")
    assert device_name("cuda:1") == "Tesla on cuda:1" and device_name("cpu") == cpu_name


def test_the_generated_file_carries_its_own_copy_of_the_device_name() -> None:
    summary = WorkloadSummary(spec="m:f", task="infer", modules=(), blocks=())
    source = codegen.generate(CompileConfig(), summary, created="c", version="v")
    generated = codegen.load_module(source)
    assert generated.device_name is not device_name and "autotune" not in generated.device_name.__module__
    assert generated.running_fingerprint("cpu")["device_name"] == device_name("cpu")


# -- measuring: the CPU's own figures, and the CUDA device's from torch.cuda -------------------------------------


def test_the_cpu_counts_the_processs_peak_resident_memory() -> None:
    cpu = parse_device("cpu")
    cpu.reset_peak_memory()
    before = cpu.peak_memory_mb()
    block = torch.ones(64 * 2**20, dtype=torch.uint8)  # 64 MiB, written, so resident
    assert cpu.peak_memory_mb() >= before + 60
    del block
    assert cpu.peak_reserved_mb() is None and cpu.memory_kind == "process_rss"
    free = cpu.free_memory_mb()
    assert free is not None and free > 0
    assert cpu.calibration_probe(repeats=1) > 0


class ScriptedAllocator:
    """A device's memory counters as a caching allocator keeps them, driven by the test: the calibration probe
    takes 64 MiB and frees them, as the CUDA device's does."""

    def __init__(self) -> None:
        self.allocated = self.peak = 0.0
        self.reserved = self.reserved_peak = 0.0

    def hold(self, mb: float) -> None:
        self.allocated += mb
        self.reserved = max(self.reserved, self.allocated)  # freed blocks stay cached
        self.peak, self.reserved_peak = max(self.peak, self.allocated), max(self.reserved_peak, self.reserved)

    def reset_peak_memory(self) -> None:
        self.peak, self.reserved_peak = self.allocated, self.reserved

    def peak_memory_mb(self) -> float:
        return self.peak

    def peak_reserved_mb(self) -> float:
        return self.reserved_peak

    def calibration_probe(self) -> float:
        self.hold(64.0)
        self.hold(-64.0)
        return 0.01


def test_the_calibration_probe_is_left_out_of_a_run_s_peak_memory() -> None:
    device = ScriptedAllocator()
    peaks = Peaks(device)  # type: ignore[arg-type]
    peaks.reset()
    device.hold(20.0)  # the model's steps: 20 MiB at most
    device.hold(-20.0)
    assert peaks.probe() == 0.01
    device.hold(12.0)
    device.hold(-12.0)
    peaks.probe()
    assert peaks.read() == (20.0, 64.0), "the steps' peak, not the probe's 64 MiB"
    # (The probe's freed blocks stay cached: the reserved peak may still hold them, as the class says.)
    device.calibration_probe()  # the device's own counter read after a probe, as the worker read it before
    assert device.peak_memory_mb() == 64.0
    peaks.reset()
    assert peaks.read() == (0.0, 64.0)


def test_under_cuda_graphs_a_run_held_the_reserved_peak_which_holds_the_graphs_pools() -> None:
    gpu, cpu = parse_device("cuda:0"), parse_device("cpu")
    assert gpu.held_memory(99.0, 234.0, cuda_graphs=True) == (234.0, "cuda_reserved")
    assert gpu.held_memory(99.0, 234.0, cuda_graphs=False) == (99.0, "cuda_allocated")
    assert gpu.held_memory(99.0, None, cuda_graphs=True) == (99.0, "cuda_allocated")
    assert cpu.held_memory(99.0, None, cuda_graphs=True) == (99.0, "process_rss")


class FakeCuda:
    """torch.cuda's measuring functions, recording what they were asked and answering in bytes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, initialized: bool = True, capturing: bool = False) -> None:
        self.calls: list[tuple[str, object]] = []
        answers = {
            "max_memory_allocated": 3 * 2**20,
            "max_memory_reserved": 5 * 2**20,
            "mem_get_info": (7 * 2**20, 80 * 2**30),
        }
        for name in ("synchronize", "reset_peak_memory_stats", "set_device", "empty_cache", *answers):
            monkeypatch.setattr(torch.cuda, name, self._record(name, answers.get(name)))
        monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", self._share)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing)

    def _record(self, name: str, answer: object):
        return lambda device=None: self.calls.append((name, device)) or answer

    def _share(self, fraction: float, device: object) -> None:
        self.calls.append(("set_per_process_memory_fraction", (fraction, device)))


def test_the_cuda_device_reads_its_figures_from_the_allocator_and_the_driver(monkeypatch) -> None:
    cuda = FakeCuda(monkeypatch)
    gpu, here = parse_device("cuda:0"), torch.device("cuda:0")
    gpu.synchronize()
    gpu.reset_peak_memory()
    figures = (gpu.peak_memory_mb(), gpu.peak_reserved_mb(), gpu.free_memory_mb())
    assert figures == (3.0, 5.0, 7.0), "bytes become MiB"
    assert cuda.calls == [
        ("synchronize", here),
        ("reset_peak_memory_stats", here),
        ("max_memory_allocated", here),
        ("max_memory_reserved", here),
        ("mem_get_info", here),
    ]
    assert gpu.memory_kind == "cuda_allocated"


def test_a_gpu_s_figures_ask_the_driver_about_the_gpu_the_worker_sees_by_its_uuid(monkeypatch) -> None:
    # The worker sees its GPU as cuda:0 whatever the machine numbers it: nvidia-smi is asked by UUID, in one call.
    properties = SimpleNamespace(major=9, minor=0, uuid="2f1e-77")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: properties)
    asked: list[tuple[str, str | None]] = []
    answer = "1980 MHz, 1980 MHz, 2619 MHz, 2619 MHz, [N/A], 41"
    monkeypatch.setattr(device_module, "query_gpu", lambda field, gpu=None: asked.append((field, gpu)) or answer)
    figures = parse_device("cuda:0").figures()
    assert asked == [(",".join(device_module.GPU_FIGURES), "GPU-2f1e-77")]
    assert figures["name"] == "NVIDIA H100" and figures["capability"] == "9.0"
    assert figures["clocks.sm"] == "1980 MHz" and figures["temperature.gpu"] == "41"
    assert "power.limit" not in figures, "what the driver does not say is left out"
    assert figures["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    # Without nvidia-smi, or on a MIG instance (nvidia-smi does not take its UUID), the common figures alone.
    monkeypatch.setattr(device_module, "query_gpu", lambda field, gpu=None: None)
    assert "clocks.sm" not in parse_device("cuda:0").figures()
    properties.uuid = "MIG-5a"
    asked.clear()
    monkeypatch.setattr(device_module, "query_gpu", lambda field, gpu=None: asked.append((field, gpu)) or answer)
    assert "clocks.sm" not in parse_device("cuda:0").figures() and not asked


def test_a_cuda_worker_takes_its_device_and_its_share(monkeypatch) -> None:
    cuda = FakeCuda(monkeypatch)
    gpu, here = parse_device("cuda:0"), torch.device("cuda:0")
    gpu.prepare()
    assert cuda.calls == [("set_device", here)], "no share: no cap"
    gpu.prepare(0.5)
    assert cuda.calls[1:] == [("set_device", here), ("set_per_process_memory_fraction", (0.5, here))]
    parse_device("cpu").prepare(0.5)
    assert len(cuda.calls) == 3, "the CPU takes nothing"


@pytest.mark.parametrize(
    ("initialized", "capturing", "done"),
    [(True, False, ["synchronize"]), (True, True, []), (False, False, [])],
)
def test_a_gpu_worker_goes_quiet_unless_it_is_recording_a_graph(monkeypatch, initialized, capturing, done) -> None:
    # Synchronising while a CUDA graph is being recorded would break the recording; without CUDA there is nothing.
    # The allocator's cache is kept: emptied, it was allocated again inside the first window after the pause.
    cuda = FakeCuda(monkeypatch, initialized=initialized, capturing=capturing)
    parse_device("cuda:0").go_quiet()
    parse_device("cpu").go_quiet()
    assert [name for name, _ in cuda.calls] == done


def test_a_worker_answers_a_pause_after_going_quiet_on_its_device(monkeypatch) -> None:
    import os
    import signal

    from autotune.trial import worker

    quiet: list[str] = []
    device = SimpleNamespace(go_quiet=lambda: quiet.append("quiet"))
    read, write = os.pipe()
    monkeypatch.setenv(worker.PAUSE_FD_VARIABLE, str(write))
    previous = signal.getsignal(signal.SIGTSTP)
    try:
        assert worker.answer_pauses(device)  # type: ignore[arg-type]
        signal.raise_signal(signal.SIGTSTP)
        assert quiet == ["quiet"] and os.read(read, 1) == b"."
    finally:
        signal.signal(signal.SIGTSTP, previous)
        os.close(read)
        os.close(write)
