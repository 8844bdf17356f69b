"""The device seam: everything that differs between a CPU and a CUDA GPU, decided in one place.

`parse_device('cuda:1')` gives a `Device`: it knows its kind and index, the `torch.device` it
stands for, the environment a worker process on it needs (which GPU it sees), how to wait for
its queued work, what memory figures it has, the calibration probe that times it, how many
subjects may start side by side beside it, and which compile settings exist on it (CUDA
graphs only on a GPU, Inductor's C++ options only on a CPU). Nothing else in autotune asks
"is this CUDA?"; a new kind of device is a new subclass here (see docs/developing.md).

Parsing and the rules that need no device (`offers`, `worker_environment`, ...) never
initialise CUDA, so the search's parent may use them; the measuring methods (`synchronize`,
the memory figures, the probe) run in the worker that owns the device.

`device_name` is copied verbatim into every generated apply_compilation.py, whose only
module-level import is torch: it stays self-contained.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from autotune.errors import ConfigError
from autotune.runtime.config import CUDA_GRAPH_OPTIONS, available_modes, mode_options

__all__ = [
    "CPP",
    "CUDA_GRAPHS",
    "DEVICE_KINDS",
    "GPU_FIGURES",
    "OPTION_NEEDS",
    "CORES_PER_COMPILE",
    "MAX_COMPILES_AT_ONCE",
    "SHARED_MODES",
    "TRITON",
    "CPUDevice",
    "CUDADevice",
    "Device",
    "Peaks",
    "default_device",
    "device_name",
    "parse_device",
    "query_gpu",
    "query_gpu_fields",
    "recorded_device",
    "to_device",
]

CUDA_GRAPHS = "CUDA graphs"
"""A device capability: recording and replaying CUDA graphs (reduce-overhead, triton.cudagraphs)."""
TRITON = "Triton"
"""A device capability: Inductor's GPU code (Triton kernels, GEMM backends, combo kernels)."""
CPP = "C++"
"""A device capability: Inductor's CPU code (the C++ backend's cpp.* options)."""

OPTION_NEEDS: Mapping[str, str] = {
    **{name: CUDA_GRAPHS for name in CUDA_GRAPH_OPTIONS},
    "combo_kernels": TRITON,
    "max_autotune_gemm_backends": TRITON,
    "triton.cudagraph_trees": TRITON,
    "triton.cudagraph_skip_dynamic_graphs": TRITON,
    "cpp.weight_prepack": CPP,
    "cpp.dynamic_threads": CPP,
    "cpp.min_chunk_size": CPP,
    "cpp.enable_unsafe_math_opt_flag": CPP,
}
"""Inductor options that exist on some devices only, with the capability each needs; the rest exist everywhere."""

_WHY_NOT = {
    CUDA_GRAPHS: "CUDA graphs need a GPU",
    TRITON: "applies to GPU (Triton) code only",
    CPP: "applies to CPU (C++) code only",
}

SHARED_MODES = ("Default",)
"""nvidia-smi compute modes in which several processes may use one GPU at once."""

CORES_PER_COMPILE = 4
"""Host cores a trial's compile takes on a GPU host when several compile at once (`Device.compiles_at_once`)."""

MAX_COMPILES_AT_ONCE = 4
"""The most trials a search compiles at once on one GPU unless --workers asks for more: each holds a quarter of
its memory."""

_TEXT = re.compile(r"(?P<kind>[a-z]+)(?::(?P<index>[0-9]+))?")


@dataclass(frozen=True)
class Device(abc.ABC):
    """One device trials run on: its kind (`cpu`, `cuda`), its index (None: the default one) and its rules."""

    index: int | None = None
    """Which device of its kind ('cuda:1' is 1); None for the kind's default ('cuda', 'cpu')."""

    kind: ClassVar[str]
    """What `--device` calls this kind: the text before the colon."""
    memory_kind: ClassVar[str]
    """What `peak_memory_mb` counts, as the run's record names it (`RunRecord.memory_kind`)."""
    capabilities: ClassVar[frozenset[str]]
    """What settings may need of it: CUDA_GRAPHS, TRITON, CPP."""
    numbered: ClassVar[bool] = False
    """Whether the kind takes an index ('cuda:1'); one that does not is a single device ('cpu')."""
    forks_workers: ClassVar[bool] = False
    """Whether its workers may be forked from a pre-imported server (`autotune.trial.forkserver`) rather than
    started anew: not where the parent of a fork must not have initialised the device (CUDA)."""
    quiet_before_stop: ClassVar[bool] = False
    """Whether a worker here is asked to go quiet before it is stopped (`autotune.trial.gate`): on a GPU a
    stopped process's queued kernels would run on another's clock. (Its cached memory stays: each worker that
    shares a GPU is held to its share of the memory, `memory_share`, so what it keeps takes nothing from another.)"""

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    @functools.cached_property
    def torch_device(self) -> torch.device:
        """The `torch.device` this device stands for (made once: the measuring methods use it in timed loops)."""
        return torch.device(str(self))

    # -- what exists here ---------------------------------------------------------------------------

    def why_not(self, setting: str) -> str | None:
        """Why `setting` (a compile mode such as 'reduce-overhead', or an Inductor option such as
        'triton.cudagraphs') does not exist on this device, or None where it does."""
        if setting in available_modes():
            uses_graphs = any(bool(mode_options(setting).get(name)) for name in CUDA_GRAPH_OPTIONS)
            needed = CUDA_GRAPHS if uses_graphs else None
        else:
            needed = OPTION_NEEDS.get(setting)
        return None if needed is None or needed in self.capabilities else _WHY_NOT[needed]

    def offers(self, setting: str) -> bool:
        """Whether `setting` (a compile mode or an Inductor option) exists on this device."""
        return self.why_not(setting) is None

    # -- the parent's rules: which machine, which worker, how many at once ----------------------------

    def check_usable(self) -> None:
        """Raise ConfigError when this machine's torch cannot run on this device; nothing is initialised."""
        return None

    def worker_environment(self, parent_env: Mapping[str, str]) -> dict[str, str]:
        """Environment variables a worker process on this device needs, given its parent's environment."""
        return {}

    def in_worker(self) -> Device:
        """This device as a worker given `worker_environment` sees it."""
        return self

    def compute_mode(self, visible: str | None) -> str | None:
        """Whether several processes may share this device, as its driver says ('Default', 'Exclusive_Process',
        'Prohibited'); None where nothing restricts it or nothing can say."""
        return None

    def starts_at_once(self, cores: int) -> int:
        """How many subjects of a replicate build, compile and settle side by side on a host of `cores` cores.

        One: a warm start's settle windows on a CPU device use every core, and starts that overlap fight over them.
        """
        return 1

    def compiles_at_once(self, cores: int) -> int:
        """How many trials a search compiles side by side on this device, given `cores` host cores of its own.

        One: a CPU device compiles and measures on the same cores, so a second compile only slows the first.
        """
        return 1

    def memory_share(self, workers: int) -> float | None:
        """The share of this device's memory each of `workers` workers that share it is held to; None: no cap."""
        return None

    def driver_version(self) -> str | None:
        """The version of the driver this device runs under, or None where it has none or nothing says."""
        return None

    # -- inside the worker that owns it ----------------------------------------------------------------

    def prepare(self, memory_share: float | None = None) -> None:
        """Make this the process's current device and hold it to `memory_share` of its memory, where that applies."""
        return None

    def go_quiet(self) -> None:
        """Finish queued work before the process is stopped (`quiet_before_stop`), keeping what the allocator
        cached: released, it would be allocated again inside the first window timed after the pause."""
        return None

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait for queued device work, so a clock read after it sees the work done."""

    @abc.abstractmethod
    def reset_peak_memory(self) -> None:
        """Start a fresh peak-memory count."""

    @abc.abstractmethod
    def peak_memory_mb(self) -> float:
        """Peak memory since the last `reset_peak_memory`, in MiB, of the kind `memory_kind` names."""

    def peak_reserved_mb(self) -> float | None:
        """Peak memory an allocator reserved since the last reset, in MiB; None where `peak_memory_mb` says it."""
        return None

    def held_memory(self, allocated: float, reserved: float | None, cuda_graphs: bool) -> tuple[float, str]:
        """The peak a run held, and what it counts (`RunRecord.memory_kind`), from its peaks of `peak_memory_mb` and
        `peak_reserved_mb`: what the objectives, the Pareto front and co-residence read."""
        return allocated, self.memory_kind

    @abc.abstractmethod
    def free_memory_mb(self) -> float | None:
        """Memory free for another process, in MiB, or None where nothing says."""

    @abc.abstractmethod
    def calibration_probe(self, repeats: int = 3) -> float:
        """Seconds a fixed amount of device work takes (median of `repeats`): slower means a busier machine.

        The work is the same in every process of every study on one kind of device.
        """

    def figures(self) -> dict[str, Any]:
        """What this process's figures rest on, read where the model runs: the hardware's name, the float32
        precision and TF32 settings in force (a configuration may change them), and torch's CPU threads."""
        return {
            "name": device_name(str(self)),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "threads": torch.get_num_threads(),
        }


@dataclass(frozen=True)
class CPUDevice(Device):
    """The host's CPU: Inductor's C++ code, the process's resident memory, one subject starting at a time."""

    kind: ClassVar[str] = "cpu"
    memory_kind: ClassVar[str] = "process_rss"
    capabilities: ClassVar[frozenset[str]] = frozenset({CPP})
    forks_workers: ClassVar[bool] = True

    def synchronize(self) -> None:
        """Nothing to wait for: CPU work is done when the call returns."""

    def reset_peak_memory(self) -> None:
        """Reset the process's peak resident set on Linux."""
        # Writing 5 to clear_refs resets the peak resident set size (VmHWM) the kernel keeps for this process.
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")

    def peak_memory_mb(self) -> float:
        """The process's peak resident memory since the last reset (VmHWM; ru_maxrss where /proc is missing)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10

    def free_memory_mb(self) -> float | None:
        """MemAvailable (/proc/meminfo)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**10
        return None

    def calibration_probe(self, repeats: int = 3) -> float:
        """Chained 256x256 matrix products, with the thread count the run uses."""
        generator = torch.Generator().manual_seed(0)
        matrix = torch.rand(256, 256, generator=generator) / 256
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            product = matrix
            for _ in range(24):
                product = product @ matrix + matrix
            timings.append(time.perf_counter() - started)
        return statistics.median(timings)


@dataclass(frozen=True)
class CUDADevice(Device):
    """A CUDA GPU: Triton code and CUDA graphs, the caching allocator's figures, the driver's view of sharing."""

    kind: ClassVar[str] = "cuda"
    memory_kind: ClassVar[str] = "cuda_allocated"
    capabilities: ClassVar[frozenset[str]] = frozenset({TRITON, CUDA_GRAPHS})
    numbered: ClassVar[bool] = True
    quiet_before_stop: ClassVar[bool] = True

    @property
    def number(self) -> int:
        """The index, 0 for plain 'cuda' (the current device, which is the first visible one)."""
        return self.index or 0

    def check_usable(self) -> None:
        """Refuse a torch without CUDA, or an index past the devices this machine has (asked without initialising)."""
        if not torch.cuda.is_available():
            build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a build without CUDA")
            raise ConfigError(f"--device {str(self)!r}: no CUDA device is usable here ({build}); use --device cpu.")
        count = torch.cuda.device_count()
        if self.number >= count:
            raise ConfigError(
                f"--device {str(self)!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}."
            )

    def visible_entry(self, visible: str | None) -> str:
        """The worker's CUDA_VISIBLE_DEVICES under the parent's `visible` (None: unset).

        'cuda:N' means the parent's N-th visible GPU, as torch numbers them in the parent: under
        CUDA_VISIBLE_DEVICES=4,5 'cuda:0' is physical GPU 4. The entry is passed on as the parent
        has it, so GPU and MIG UUIDs work alike. 'cuda' is the parent's first visible GPU.
        """
        if visible is None:
            return str(self.number)
        entries = [e.strip() for e in visible.split(",")]
        # CUDA stops at the first entry it cannot parse; an empty value hides every GPU.
        entries = entries[: next((i for i, e in enumerate(entries) if not e or e.startswith("-")), len(entries))]
        if self.number >= len(entries):
            raise ConfigError(
                f"--device {str(self)!r}: CUDA_VISIBLE_DEVICES={visible!r} makes {len(entries)} GPU(s) visible"
                + (f", cuda:0 to cuda:{len(entries) - 1}." if entries else "; set it to the GPUs autotune may use.")
            )
        return entries[self.number]

    def worker_environment(self, parent_env: Mapping[str, str]) -> dict[str, str]:
        """The worker sees only its own GPU (CUDA_VISIBLE_DEVICES), which CUDA then numbers 0."""
        return {"CUDA_VISIBLE_DEVICES": self.visible_entry(parent_env.get("CUDA_VISIBLE_DEVICES"))}

    def in_worker(self) -> Device:
        return CUDADevice(0)

    def compute_mode(self, visible: str | None) -> str | None:
        """The compute mode nvidia-smi reports for this GPU; None for a MIG instance (nvidia-smi does not take
        its UUID), without nvidia-smi, or on an error."""
        entry = self.visible_entry(visible)
        if entry.startswith("MIG-"):
            return None
        return query_gpu("compute_mode", entry)

    def starts_at_once(self, cores: int) -> int:
        # Beside a GPU a warm start needs about four of the host's cores (tracing, loading, launching kernels).
        return max(1, cores // 4)

    def compiles_at_once(self, cores: int) -> int:
        # Compiling is CPU work and measuring GPU work: one compile per four cores (Inductor's compile workers and
        # the worker's own thread), at most MAX_COMPILES_AT_ONCE, whose share of the GPU's memory stays useful.
        return min(MAX_COMPILES_AT_ONCE, max(1, cores // CORES_PER_COMPILE))

    def memory_share(self, workers: int) -> float | None:
        # Workers sharing a GPU: one that grows past its share fails alone instead of starving another.
        return round(1.0 / workers, 4) if workers > 1 else None

    def driver_version(self) -> str | None:
        return query_gpu("driver_version")

    def prepare(self, memory_share: float | None = None) -> None:
        torch.cuda.set_device(self.torch_device)
        if memory_share:
            torch.cuda.set_per_process_memory_fraction(float(memory_share), self.torch_device)

    def go_quiet(self) -> None:
        # While a CUDA graph is being recorded, synchronising would break the recording: then it only answers.
        # The cached blocks stay: emptied, they were allocated again (cudaMalloc, which synchronises) inside the
        # first window after the pause, a cost CUDA-graph configurations, whose pools survive, did not pay.
        if torch.cuda.is_initialized() and not torch.cuda.is_current_stream_capturing():
            torch.cuda.synchronize()

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.torch_device)

    def reset_peak_memory(self) -> None:
        """Reset CUDA's allocator statistics."""
        torch.cuda.reset_peak_memory_stats(self.torch_device)

    def peak_memory_mb(self) -> float:
        """Peak device memory allocated by tensors."""
        return torch.cuda.max_memory_allocated(self.torch_device) / 2**20

    def peak_reserved_mb(self) -> float | None:
        """Peak memory CUDA's caching allocator reserved: CUDA-graph pools and the allocator's slack included, the
        CUDA context not."""
        return torch.cuda.max_memory_reserved(self.torch_device) / 2**20

    def held_memory(self, allocated: float, reserved: float | None, cuda_graphs: bool) -> tuple[float, str]:
        # A replayed graph allocates nothing: its pool's memory is reserved, never counted as allocated again, so a
        # configuration that replays graphs would look lighter than it is.
        if cuda_graphs and reserved is not None:
            return max(allocated, reserved), "cuda_reserved"
        return allocated, self.memory_kind

    def free_memory_mb(self) -> float | None:
        """The CUDA driver's count of free memory on the device."""
        free, _ = torch.cuda.mem_get_info(self.torch_device)
        return free / 2**20

    def figures(self) -> dict[str, Any]:
        """The common figures, the compute capability, and the clocks, power limit and temperature the driver reports
        for this GPU now (nvidia-smi, asked by the GPU's UUID, so the worker's renumbered device is the one asked)."""
        properties = torch.cuda.get_device_properties(self.torch_device)
        uuid = str(getattr(properties, "uuid", "") or "")
        gpu = uuid if not uuid or uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        said = query_gpu_fields(GPU_FIGURES, gpu or None) if not gpu.startswith("MIG-") else {}
        return {**super().figures(), "capability": f"{properties.major}.{properties.minor}", **said}

    def calibration_probe(self, repeats: int = 3) -> float:
        """A few milliseconds of half-precision 4096x4096 matrix products, timed on the device with CUDA events.

        The CPU's small products would time kernel launches here, and follow the configuration's own TF32
        setting: a compute-bound float16 product has no TF32 question.
        """
        device = self.torch_device
        generator = torch.Generator().manual_seed(0)
        matrix = (torch.rand(4096, 4096, generator=generator) / 4096).to(device=device, dtype=torch.float16)
        timings = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            for _ in range(8):
                torch.mm(matrix, matrix)
            end.record()
            end.synchronize()
            timings.append(start.elapsed_time(end) / 1e3)
        del matrix
        return statistics.median(timings)


@dataclass
class Peaks:
    """A run's peak memory with its calibration probes left out.

    The probe runs before every window, and on a GPU its matrices take about 64 MiB: read after it, the
    peak of a small model was mostly the probe's. So around each probe the
    peaks so far are carried here and the device's are reset after it. On a GPU the probe's freed blocks
    stay in the caching allocator, so the reserved peak may still hold up to their size.
    """

    device: Device
    allocated: float = 0.0
    reserved: float | None = None

    def probe(self) -> float:
        """The device's calibration probe (`Device.calibration_probe`), outside the peaks."""
        self._carry()
        seconds = self.device.calibration_probe()
        self.device.reset_peak_memory()
        return seconds

    def reset(self) -> None:
        """Start a fresh count, as `Device.reset_peak_memory` does."""
        self.device.reset_peak_memory()
        self.allocated, self.reserved = 0.0, None

    def read(self) -> tuple[float, float | None]:
        """The peaks since the last `reset`, in MiB: (`peak_memory_mb`'s kind, reserved or None)."""
        self._carry()
        return self.allocated, self.reserved

    def _carry(self) -> None:
        self.allocated = max(self.allocated, self.device.peak_memory_mb())
        reserved = self.device.peak_reserved_mb()
        if reserved is not None:
            self.reserved = max(self.reserved or 0.0, reserved)


DEVICE_KINDS: Mapping[str, type[Device]] = {kind.kind: kind for kind in (CPUDevice, CUDADevice)}
"""Every kind of device, by the name `--device` gives it."""


def parse_device(text: str) -> Device:
    """The device `text` names: 'cpu', 'cuda' or 'cuda:N'; ConfigError naming the value and what is allowed.

    Only the text is checked: whether this machine has the device is `Device.check_usable`.
    """
    found = _TEXT.fullmatch(text) if isinstance(text, str) else None
    kind = DEVICE_KINDS.get(found["kind"]) if found else None
    if found is None or kind is None or (found["index"] is not None and not kind.numbered):
        raise ConfigError(f"--device {text!r} is not allowed; use {_allowed()}.")
    return kind(None if found["index"] is None else int(found["index"]))


def _allowed() -> str:
    """What `parse_device` takes, in words: "'cpu', 'cuda' or 'cuda:N'"."""
    names = [name for kind in DEVICE_KINDS.values() for name in (kind.kind, f"{kind.kind}:N")[: 1 + kind.numbered]]
    return ", ".join(repr(name) for name in names[:-1]) + f" or {names[-1]!r}"


def recorded_device(text: str) -> Device:
    """The device a recorded environment names (best.yaml's environment.device, a cache file's header): as
    `parse_device`, but a name this version cannot parse counts as the CPU, whose figures need no device."""
    try:
        return parse_device(text)
    except ConfigError:
        return CPUDevice()


def default_device() -> Device:
    """The device trials run on when none is named: the first CUDA GPU where torch has one, else the CPU."""
    return CUDADevice() if torch.cuda.is_available() else CPUDevice()


def query_gpu(field: str, gpu: str | None = None) -> str | None:
    """One `nvidia-smi --query-gpu` field of `gpu` (an index or UUID; None: the first GPU), or None where
    nvidia-smi is missing, fails or says nothing."""
    command = ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader", *(["-i", gpu] if gpu else [])]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if lines and lines[0].strip() else None


GPU_FIGURES = ("clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit", "temperature.gpu")
"""What a GPU's figures ask nvidia-smi: the clocks it runs at against their maximum, its power limit, its heat."""


def query_gpu_fields(names: tuple[str, ...], gpu: str | None = None) -> dict[str, str]:
    """Several `nvidia-smi --query-gpu` fields of `gpu` in one call, by name; those it leaves empty or reports as
    '[N/A]' left out, and nothing where nvidia-smi is missing or fails."""
    said = query_gpu(",".join(names), gpu)
    if said is None:
        return {}
    values = [value.strip() for value in said.split(",")]
    if len(values) != len(names):
        return {}
    return {name: value for name, value in zip(names, values, strict=True) if value and "N/A" not in value}


def device_name(device: str = "cpu") -> str:
    """The name of the hardware behind `device`: the GPU's name for 'cuda(:N)' where CUDA is usable, else the CPU's
    model name (/proc/cpuinfo, else what `platform` says)."""
    import platform  # this function is copied into apply_compilation.py, which imports only torch at the top

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def to_device(batch: Any, device: torch.device) -> Any:
    """The batch with every tensor in it moved to `device` (dicts, tuples and lists kept)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
