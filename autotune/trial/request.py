"""What crosses the boundary of a trial process: the request, the measuring protocol, and the run's record.

`TrialRequest` goes to the worker (as JSON), `TrialRun` collects what the worker reported,
and `RunRecord` is the plain figures of one run that studies, reports and the measurement
campaign keep (`to_dict`/`from_dict`, JSON-safe). Nothing here imports torch or Optuna.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from autotune.errors import ConfigError

__all__ = ["Protocol", "RunRecord", "TrialRequest", "TrialRun", "check_device"]


@dataclass(frozen=True, kw_only=True)
class Protocol:
    """How a run is measured; the same for every trial and baseline of a study."""

    windows: int = 5
    """Steady-state windows on the fixed batches after warm-up; the pruner sees each one."""
    passes_per_window: int = 1
    """Passes over the fixed batches in one window, at least (more for tiny, fast workloads: see `window_seconds`)."""
    window_seconds: float = 0.5
    """A window runs passes over the fixed batches until it lasts at least this long (64 passes at most):
    longer windows average out more of a shared machine's jitter; shorter ones measure sooner."""
    max_warmup_passes: int = 8
    """Warm-up passes allowed for the fixed batches' shapes to compile; a run still compiling after them fails."""
    fresh_batches: int = 24
    """Batches the run has not seen, each run once after the windows: the throughput figure, recompiles included.
    0 measures the fixed batches only."""
    fresh_seconds: float = 1.0
    """The fresh stream lasts at least this long: a fast model runs the fresh batches again after their first pass."""
    check_accuracy: bool = True
    """Compare loss and gradients (train) or outputs (infer) with eager before measuring."""
    threads: int = 0
    """CPU threads for torch and Inductor's kernels (0: every core this process may use); recorded per run."""

    def __post_init__(self) -> None:
        for name in ("windows", "passes_per_window", "max_warmup_passes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"protocol.{name}: {value!r} must be an integer >= 1.")
        if not _seconds(self.window_seconds) or self.window_seconds <= 0:
            raise ConfigError(f"protocol.window_seconds: {self.window_seconds!r} must be a number of seconds > 0.")
        if not _seconds(self.fresh_seconds) or self.fresh_seconds < 0:
            raise ConfigError(f"protocol.fresh_seconds: {self.fresh_seconds!r} must be a number of seconds >= 0.")
        for name in ("fresh_batches", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"protocol.{name}: {value!r} must be an integer >= 0.")

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Protocol:
        """The inverse of to_dict; keys of other versions are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, kw_only=True)
class TrialRequest:
    """What a worker needs: the workload target, the generated source (None for eager) and how to measure."""

    spec: str
    source: str | None
    device: str = "cpu"
    seed: int = 0
    protocol: dict[str, Any] = field(default_factory=dict)
    uses_cuda_graphs: bool = False
    falls_back_to_eager: bool = False
    """The configuration runs some shapes eagerly on purpose (a recompile limit): hitting the limit is no failure."""
    changes_precision: bool = False
    """The configuration changes numerics: its accuracy is checked against `PRECISION_TOLERANCE`."""
    timeout: float = 900.0
    """Hard wall-clock limit for the whole worker, in seconds."""
    save_cache_path: str | None = None
    """Save the compile artifacts of this run to this file (see `autotune.runtime.compile_cache`)."""
    load_cache_path: str | None = None
    """Load compile artifacts from this file before compiling, as `load_compile_cache` in the generated code does."""
    program: str = "autotune.trial.worker"
    """The module the process runs: the measuring worker, or `autotune.trial.doctor` for the compile doctor."""


@dataclass(kw_only=True)
class TrialRun:
    """How a worker ended: 'complete' with a result, 'failed' with a reason, or 'pruned'."""

    state: str
    reason: str = ""
    message: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    compiled: dict[str, Any] = field(default_factory=dict)
    windows: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    stderr_tail: str = ""
    wall_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)
    """What the worker said about a compile cache it loaded or saved."""
    paused_seconds: float = 0.0
    """Wall time the worker spent stopped by its parent (not part of any figure)."""
    measured_between: list[float] = field(default_factory=list)
    """A worker that shared its device: when (seconds since the epoch) it held the turn to measure."""

    def record(self) -> RunRecord:
        """The plain figures of this run."""
        values: dict[str, Any] = {
            "state": self.state,
            "reason": self.reason,
            "message": self.message[:2000],
            "wall_seconds": round(self.wall_seconds, 3),
            "phase_seconds": {k: round(v, 3) for k, v in self.phase_seconds.items()},
            "windows": [round(w["samples_per_second"], 4) for w in self.windows],
        }
        if self.paused_seconds:
            values["paused_seconds"] = round(self.paused_seconds, 3)
        values.update({k: v for k, v in self.compiled.items() if k in _FIGURES})
        values.update({k: v for k, v in self.result.items() if k in _FIGURES})
        if self.state == "failed":
            values["stderr_tail"] = self.stderr_tail[-3000:]
        return RunRecord.from_dict(values)


@dataclass(kw_only=True)
class RunRecord:
    """The figures of one run of one subject: what a study stores and every report reads."""

    state: str
    """'complete', 'failed' or 'pruned'."""
    reason: str = ""
    """Why it failed or was pruned (e.g. 'accuracy', 'oom', 'timeout')."""
    message: str = ""
    """What the worker said about it, in a line."""
    samples_per_second: float | None = None
    """The run's throughput: on the fresh batches, recompiles included (the fixed ones without a stream)."""
    batches_per_second: float | None = None
    """Steps per second on the same batches as `samples_per_second`."""
    steady_samples_per_second: float | None = None
    """Median of the steady-state windows on the fixed batches, after warm-up."""
    samples_per_second_min: float | None = None
    """The slowest steady-state window."""
    samples_per_second_max: float | None = None
    """The fastest steady-state window."""
    windows: list[float] = field(default_factory=list)
    """Every steady-state window's samples/s, in order."""
    compile_seconds: float | None = None
    """Compile and warm-up on the fixed batches, without the accuracy check's eager reference (nor time stopped while
    another worker measured)."""
    compile_paused_seconds: float | None = None
    """Seconds the compile stood stopped while another worker of the device measured (left out of compile_seconds)."""
    compile_concurrent_seconds: float | None = None
    """Seconds of the compile during which another worker of the device ran too: such a compile is slower than alone."""
    paused_seconds: float | None = None
    """Seconds the whole run stood stopped while other workers of its device measured."""
    warmup_passes: int | None = None
    """Passes over the fixed batches until one compiled nothing."""
    fresh_batches: int | None = None
    """How many fresh batches were measured (a finite data source may have fewer than asked)."""
    fresh_passes: int | None = None
    """Passes over the fresh batches: the first one is fresh; more ran when it was shorter than `fresh_seconds`."""
    fresh_recompiles: int | None = None
    """Frames compiled while running the fresh batches: shapes the fixed batches did not have."""
    fresh_compile_seconds: float | None = None
    """Time spent in fresh-batch steps that compiled something."""
    peak_memory_mb: float | None = None
    """Peak memory of the compiled steps: CUDA's allocator, or the process's resident set on the CPU."""
    memory_kind: str | None = None
    """'cuda_allocated' or 'process_rss'."""
    graphs: int | None = None
    """Graphs dynamo compiled."""
    graph_breaks: int | None = None
    """Graph breaks dynamo counted."""
    recompiles: int | None = None
    """Frames compiled again for new guards."""
    threads: int | None = None
    """CPU threads torch used."""
    probe_seconds: list[float] = field(default_factory=list)
    """The calibration probe, timed before and after measuring: a slower probe means a busier machine."""
    load: list[float] = field(default_factory=list)
    """The 1-minute load average before and after measuring (empty where the system has none)."""
    steal: float | None = None
    """Share of CPU time the hypervisor gave to others while measuring (Linux /proc/stat), or None."""
    noisy: str = ""
    """Why this run's figures are not trusted (a slow probe, spread windows); empty when they are."""
    wall_seconds: float = 0.0
    """The whole worker process, start to exit."""
    phase_seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase: start, build, compile, measure."""
    stderr_tail: str = ""
    """The last lines the worker printed, for a failed run."""

    @property
    def complete(self) -> bool:
        return self.state == "complete" and self.samples_per_second is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON- and YAML-safe plain data (no NaN or infinity)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: _finite(v) for k, v in data.items() if v not in (None, "", [], {}) or k == "state"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Build from `to_dict` output (or a study's trial attributes); unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        values.setdefault("state", "failed")
        return cls(**values)


_FIGURES = {f.name for f in fields(RunRecord)} - {
    "state",
    "reason",
    "message",
    "wall_seconds",
    "phase_seconds",
    "paused_seconds",
}


def _seconds(value: Any) -> bool:
    """Whether `value` is a finite number (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def check_device(device: str | None) -> str:
    """The device trials run on: as given, or cuda when available, else cpu; refused when this torch lacks it."""
    # Whether CUDA exists needs torch; the parent asks only that and never initialises a device.
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cpu" and not re.fullmatch(r"cuda(:\d+)?", device):
        raise ConfigError(f"--device {device!r} is not allowed; use 'cpu', 'cuda' or 'cuda:N'.")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            build = f"torch {torch.__version__}" + ("" if torch.version.cuda else ", a build without CUDA")
            raise ConfigError(f"--device {device!r}: no CUDA device is usable here ({build}); use --device cpu.")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"--device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                f"cuda:0 to cuda:{torch.cuda.device_count() - 1}."
            )
    return device
