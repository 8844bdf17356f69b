"""What crosses the boundary of a trial process: the request, the measuring protocol, and the run's record.

`TrialRequest` goes to the worker (as JSON), `TrialRun` collects the typed records the worker
reported (`autotune.trial.records`) and turns them into the run's figures (`RunRecord`, in
`autotune.trial.run_record`), which studies, reports and the measurement campaign keep.
Nothing here imports torch or Optuna.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from autotune.errors import ConfigError
from autotune.trial.records import (
    CacheLoaded,
    CacheSaved,
    Compiled,
    DoctorFindings,
    FreshPass,
    ReadyReport,
    ResultReport,
    Window,
)
from autotune.trial.run_record import RunRecord

__all__ = [
    "DOCTOR_PROGRAM",
    "PROBE_SLOWDOWN",
    "OTHERS_BUSY",
    "WINDOW_SPREAD",
    "RunProtocol",
    "TrialRequest",
    "TrialRun",
    "WORKER_PROGRAM",
    "check_device",
    "noisy_reason",
    "window_figures",
]

WORKER_PROGRAM = "autotune.trial.worker"
"""The module a measuring worker's process runs."""
DOCTOR_PROGRAM = "autotune.trial.doctor"
"""The module the compile doctor's process runs."""


@dataclass(frozen=True, kw_only=True)
class RunProtocol:
    """How a run is measured; the same for every trial and baseline of a study."""

    windows: int = 5
    """Paired windows a search trial measures beside plain torch.compile; the pruner sees each one."""
    window_seconds: float = 0.5
    """How long a window lasts, about: a window is a slice of the fresh stream (the same slice for every subject it
    is compared with), as many batches as last this long. Longer windows average out more jitter, shorter ones
    follow the machine's drift more closely, which pairing cancels."""
    settle_windows: int = 2
    """Windows on the fixed batches after warm-up, before a subject is ready: one in which anything compiled is
    measured again, so a ready subject has stopped compiling on the batches it has seen."""
    max_warmup_passes: int = 8
    """Warm-up passes allowed for the fixed batches' shapes to compile; a run still compiling after them fails."""
    fresh_batches: int = 24
    """The fresh stream: batches the run has not seen, drawn after the fixed ones. Windows take slices of it in
    turn; the first time a configuration sees a length it compiles inside its window, and that counts.
    0 measures the fixed batches only."""
    check_accuracy: bool = True
    """Compare loss and gradients (train) or outputs (infer) with eager before measuring."""
    threads: int = 0
    """CPU threads for torch and Inductor's kernels (0: every core this process may use); recorded per run."""

    def __post_init__(self) -> None:
        for name in ("windows", "max_warmup_passes", "settle_windows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"protocol.{name}: {value!r} must be an integer >= 1.")
        if not _seconds(self.window_seconds) or self.window_seconds <= 0:
            raise ConfigError(f"protocol.window_seconds: {self.window_seconds!r} must be a number of seconds > 0.")
        for name in ("fresh_batches", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"protocol.{name}: {value!r} must be an integer >= 0.")

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunProtocol:
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
    random_as_eager: bool = False
    """The configuration draws random numbers as eager does: a training step with dropout is checked in train mode."""
    timeout: float = 900.0
    """Hard wall-clock limit, in seconds, for the worker to be ready (build, compile, warm up), and for each window."""
    cache_dir: str | None = None
    """The subject's own Inductor and Triton cache folder, kept between its runs: its first run fills it (cold),
    later runs start from it (warm). None: a temporary folder, removed with the run."""
    save_cache_path: str | None = None
    """Save the compile artifacts of this run to this file (see `autotune.runtime.compile_cache`)."""
    load_cache_path: str | None = None
    """Load compile artifacts from this file before compiling, as `load_compile_cache` in the generated code does."""
    program: str = WORKER_PROGRAM
    """The module the process runs: the measuring worker, or `DOCTOR_PROGRAM` for the compile doctor."""
    measure_compile: bool = False
    """The doctor only: after its analysis, compile with plain torch.compile and split where the time went."""
    cpus: tuple[int, ...] | None = None
    """The host CPUs the worker may use (its affinity, its kernels' threads and Inductor's compile processes).
    Workers on different GPUs get disjoint sets, so one's compile does not take the cores another measures
    with. None: every CPU this process may use."""
    memory_share: float | None = None
    """On a GPU that workers share: the share of its memory this worker may allocate
    (`torch.cuda.set_per_process_memory_fraction`). None: no cap."""


@dataclass(kw_only=True)
class TrialRun:
    """How a worker ended: 'complete' with a result, 'failed' with a reason, or 'pruned'."""

    state: str
    reason: str = ""
    message: str = ""
    ready: ReadyReport | None = None
    """The worker's "ready" record: compiled, checked, warmed up and settled on the fixed batches (its batch rate
    possibly replaced by the parent's calibration)."""
    result: ResultReport | None = None
    """The worker's last word on a run it measured."""
    findings: DoctorFindings | None = None
    """The compile doctor's last word, instead of a result."""
    compiled: Compiled | None = None
    """The worker's "compiled" record, its compile time as the worker measured it."""
    compile_stops: CompileStops | None = None
    """A worker that shared its device: its compile time without the time it stood stopped (the parent's view)."""
    windows: list[Window] = field(default_factory=list)
    """Each window the worker measured on a slice of the fresh stream, in order."""
    fresh: FreshPass | None = None
    """A timed pass over the whole stream (a first run's): recompiles of the stream's new shapes, counted and timed."""
    environment: dict[str, Any] = field(default_factory=dict)
    stderr_tail: str = ""
    wall_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    cache_loaded: CacheLoaded | None = None
    """What the worker said about a compile cache it loaded."""
    cache_saved: CacheSaved | None = None
    """What the worker said about the compile cache it saved (or could not)."""
    paused_seconds: float = 0.0
    """Wall time the worker spent stopped by its parent (not part of any figure)."""
    measured_between: list[float] = field(default_factory=list)
    """A worker that shared its device: when (seconds since the epoch) it held the turn to measure."""
    warm: bool = False
    """The run started from its subject's cache folder, filled by an earlier run."""
    quiet_pauses: list[int] = field(default_factory=list)
    """A worker that shared its device: [pauses before which it went quiet, pauses it was stopped without]."""
    restart_check_seconds: float = 0.0
    """A search trial's run joined with its warm restart: the seconds the restart's check of its first steps took."""

    def record(self) -> RunRecord:
        """The plain figures of this run."""
        values: dict[str, Any] = {
            "state": self.state,
            "reason": self.reason,
            "message": self.message[:2000],
            "wall_seconds": round(self.wall_seconds, 3),
            "phase_seconds": {k: round(v, 3) for k, v in self.phase_seconds.items()},
        }
        if self.paused_seconds:
            values["paused_seconds"] = round(self.paused_seconds, 3)
        if self.warm:
            values["warm"] = True
        if any(self.quiet_pauses):
            values["quiet_pauses"] = list(self.quiet_pauses)
        if self.restart_check_seconds:
            values["restart_check_seconds"] = round(self.restart_check_seconds, 3)
        values.update(self._reported())
        if self.windows:
            values.update(window_figures(self.windows, self.ready))
        if self.fresh is not None:
            values.update(self.fresh.figures())
        if self.state == "failed":
            values["stderr_tail"] = self.stderr_tail[-3000:]
        values.setdefault("state", "failed")
        return RunRecord(**{k: v for k, v in values.items() if v is not None})

    def _reported(self) -> dict[str, Any]:
        """The figures of the worker's compiled, ready and result records, later ones over earlier ones.

        The compile figures are the compiled record's, with the parent's correction for a
        worker that stood stopped while compiling.
        """
        values: dict[str, Any] = {}
        if self.compiled is not None:
            compiled = self.compiled.to_json()
            values.update({k: v for k, v in compiled.items() if k in _FIGURES})
            values.update(self.compiled.counts.figures())
            if self.compiled.check_seconds:
                values["check_seconds"] = round(self.compiled.check_seconds, 3)
            if self.compiled.shared_build_spans:
                values["shared_build_seconds"] = round(self.compiled.shared_build_seconds, 3)
        if self.compile_stops is not None:
            values.update(self.compile_stops.figures())
        for report in (self.ready, self.result):
            if report is not None:
                values.update({k: v for k, v in report.to_json().items() if k in _FIGURES})
                values.update(report.counts.figures())
        return values

    @property
    def compile_seconds(self) -> float | None:
        """The run's compile time: the compiled record's, less the time a sharing worker stood stopped."""
        if self.compile_stops is not None:
            return self.compile_stops.compile_seconds
        return self.compiled.compile_seconds if self.compiled is not None else None


@dataclass(frozen=True, kw_only=True)
class CompileStops:
    """The parent's correction of a sharing worker's compile time: the time it stood stopped, left out."""

    compile_seconds: float
    """The worker's compile time less the time it stood stopped."""
    compile_paused_seconds: float
    """Seconds the compile stood stopped while another worker of the device measured."""
    compile_concurrent_seconds: float
    """Seconds of the compile during which another worker of the device ran too."""

    def figures(self) -> dict[str, float]:
        """Plain data, as a run's record keeps it."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def window_figures(windows: Sequence[Window], ready: ReadyReport | None) -> dict[str, Any]:
    """A run's throughput from its windows on slices of the fresh stream: one pass over the stream, recompiles included.

    Steps that compiled something are timed apart: the steady rate comes from the others,
    and the seconds of the compiling steps are added once, as a run that passes over the
    stream once pays them. So the figure means the same however many windows ran, and the
    windows' drift, which hits every subject of a turn alike, stays paired.
    """
    seconds = sum(w.seconds for w in windows)
    samples = sum(w.samples for w in windows)
    batches = sum(w.batches for w in windows)
    compiling = sum(w.compile_seconds for w in windows)
    steady_seconds = seconds - compiling
    steady_samples = samples - sum(w.compile_samples for w in windows)
    steady_batches = batches - sum(w.compile_batches for w in windows)
    figures: dict[str, Any] = {
        "windows": [round(w.samples / w.seconds, 4) for w in windows],
        "window_probe_ms": [round(w.probe_seconds * 1e3, 3) for w in windows],
        "window_recompiles": [w.recompiles for w in windows],
        "fresh_recompiles": sum(w.recompiles for w in windows),
        "fresh_compile_seconds": round(compiling, 4),
        "load": [w.load for w in windows if w.load is not None][-1:],
    }
    if steady_seconds <= 0 or steady_samples <= 0:
        return figures  # every step compiled: no steady rate to speak of
    steady_sps, steady_bps = steady_samples / steady_seconds, steady_batches / steady_seconds
    # Without a ready record (windows and nothing else), the windows themselves are the stream.
    stream_samples = (ready.stream_samples if ready is not None else 0) or samples
    stream_batches = (ready.stream_batches if ready is not None else 0) or batches
    rates = [w.samples / w.seconds for w in windows if not w.recompiles]
    others = [w.others for w in windows if w.others is not None]
    figures.update(
        {
            "steady_samples_per_second": steady_sps,
            "samples_per_second": stream_samples / (stream_samples / steady_sps + compiling),
            "batches_per_second": stream_batches / (stream_batches / steady_bps + compiling),
            "samples_per_second_min": min(rates, default=None),
            "samples_per_second_max": max(rates, default=None),
        }
    )
    if others:
        figures["window_others"] = [round(v, 3) for v in others]
    if others:
        # The windows' own CPU accounting decides, not the probe (the first work after a stop always
        # finds the caches cold) nor the settle windows, which ran while the other subjects started.
        busy = max(others) > OTHERS_BUSY
        figures["noisy"] = f"other processes used up to {max(others):.0%} of the CPU during its windows" if busy else ""
    return figures


OTHERS_BUSY = 0.25
"""A window during which other processes used more than this share of the machine's CPU saw it busy."""


PROBE_SLOWDOWN = 1.5
"""A calibration probe this many times slower than another of the same run marks the run noisy."""
WINDOW_SPREAD = 1.5
"""Windows without a compile whose fastest is this many times the slowest mark the run noisy."""


def noisy_reason(probes: list[float], rates: list[float]) -> str:
    """Why a run's figures were taken on a busy machine, or '' when they were not.

    Its calibration probes (the same matrix work each time) differ by PROBE_SLOWDOWN or more,
    or its windows that compiled nothing spread by WINDOW_SPREAD or more. Paired ratios do not
    need this (load slows both sides of a pair); it is what the report says about the machine.
    """
    probes = [p for p in probes if p > 0]
    if len(probes) >= 2 and max(probes) > PROBE_SLOWDOWN * min(probes):
        return f"the calibration probe took from {min(probes) * 1e3:.1f} to {max(probes) * 1e3:.1f} ms"
    rates = [r for r in rates if r > 0]
    if len(rates) >= 2 and max(rates) > WINDOW_SPREAD * min(rates):
        return f"its windows ranged from {min(rates):.4g} to {max(rates):.4g} samples/s"
    return ""


_FIGURES = {f.name for f in fields(RunRecord)} - {
    "version",
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


def check_device(device: str | None) -> str:
    """The device trials run on: as given, or cuda when available, else cpu; refused when this torch lacks it."""
    # The device seam imports torch; whether CUDA exists is all the parent asks, and it never initialises a device.
    from autotune.runtime.device import default_device, parse_device

    if device is None:
        return str(default_device())
    found = parse_device(device)
    found.check_usable()
    return str(found)
