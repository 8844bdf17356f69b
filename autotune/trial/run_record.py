"""`RunRecord`: the figures of one run of one subject, as a study stores them and every report reads them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from autotune.errors import RecordError

__all__ = ["RUN_RECORD_VERSION", "RunRecord"]

RUN_RECORD_VERSION = 4
"""The form of a run's record. Change it whenever a field is added, removed or renamed, or changes its meaning, and
say in `from_dict` how the records of the versions before are read."""
READ_VERSIONS = (1, 2, 3, RUN_RECORD_VERSION)
"""Versions read as this one: 1 had no `notes`, which it reads as none; 1 and 2 had no `restart_check_seconds`,
read as none (their warm restarts' checks were not recorded apart); 1 to 3 had no `device_figures`, read as none."""


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """The figures of one run of one subject: what a study stores and every report reads."""

    version: int = RUN_RECORD_VERSION
    """The form the record was written in (`RUN_RECORD_VERSION`)."""
    state: str
    """'complete', 'failed' or 'pruned'."""
    reason: str = ""
    """Why it failed or was pruned (e.g. 'accuracy', 'oom', 'timeout')."""
    message: str = ""
    """What the worker said about it, in a line."""
    samples_per_second: float | None = None
    """The run's throughput over one pass of the fresh stream, recompiles of new shapes included (see
    `window_figures`); the fixed batches' rate when there is no stream."""
    batches_per_second: float | None = None
    """Steps per second on the same batches as `samples_per_second`."""
    steady_samples_per_second: float | None = None
    """The rate of the steps that compiled nothing: on the stream's windows, or the fixed batches' settle windows."""
    samples_per_second_min: float | None = None
    """The slowest window that compiled nothing."""
    samples_per_second_max: float | None = None
    """The fastest window that compiled nothing."""
    windows: list[float] = field(default_factory=list)
    """Every window's samples/s, in order: slices of the fresh stream in a session (turn by turn), else the
    settle windows on the fixed batches."""
    window_probe_ms: list[float] = field(default_factory=list)
    """The calibration probe timed just before each window, in milliseconds: the machine's state, window by window."""
    window_recompiles: list[int] = field(default_factory=list)
    """Frames compiled inside each window (a new shape of the stream)."""
    window_others: list[float] = field(default_factory=list)
    """Share of the machine's CPU that other processes used during each window (Linux /proc/stat)."""
    settle_windows: list[float] = field(default_factory=list)
    """The windows on the fixed batches before the run was ready, samples/s."""
    windows_redone: int | None = None
    """Settle windows measured again because something compiled inside them."""
    stream_samples: int | None = None
    """Samples in one pass over the fresh stream."""
    stream_batches: int | None = None
    """Batches in the fresh stream."""
    warm: bool = False
    """This run started from the subject's cache folder, filled by its first (cold) run: its compile time is the
    warm one, not the subject's."""
    compile_seconds: float | None = None
    """Compile and warm-up on the fixed batches, without the accuracy check's eager reference (nor time stopped while
    another worker measured)."""
    compile_paused_seconds: float | None = None
    """Seconds the compile stood stopped while another worker of the device measured (left out of compile_seconds)."""
    shared_build_seconds: float | None = None
    """Seconds the compile spent building what every later process of the environment reuses (Inductor's
    precompiled C++ header): the environment's first compile pays it once; left out of compile_seconds."""
    compile_concurrent_seconds: float | None = None
    """Seconds of the compile during which another worker of the device ran too: such a compile is slower than alone."""
    paused_seconds: float | None = None
    """Seconds the whole run stood stopped while other workers of its device measured."""
    quiet_pauses: list[int] | None = None
    """On a shared GPU: [pauses before which the worker went quiet (its queued work done),
    pauses it was stopped without answering in time]."""
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
    """Peak memory of the compiled steps once compiled: CUDA's allocator, or the process's resident set on the CPU."""
    peak_reserved_mb: float | None = None
    """On CUDA, the steady peak the caching allocator reserved (CUDA-graph pools and slack included)."""
    compile_peak_memory_mb: float | None = None
    """Peak memory while compiling and warming up (as `peak_memory_mb` counts it), the accuracy check left out."""
    compile_peak_reserved_mb: float | None = None
    """On CUDA, the peak reserved while compiling and warming up."""
    compile_split: dict[str, float] = field(default_factory=dict)
    """Where the compile time went, in seconds per part (`autotune.trial.compile_split`), from torch's metrics."""
    memory_kind: str | None = None
    """'cuda_allocated' or 'process_rss'."""
    graphs: int | None = None
    """Graphs dynamo compiled."""
    graph_breaks: int | None = None
    """Graph breaks dynamo counted."""
    recompiles: int | None = None
    """Frames compiled again for new guards."""
    cuda_graph_recordings: int | None = None
    """CUDA graphs recorded (warm-up and each new shape's recording count as compiling)."""
    cuda_graph_skips: int | None = None
    """Graphs torch ran without CUDA graphs although the configuration asked for them."""
    threads: int | None = None
    """CPU threads torch used."""
    device_free_mb: float | None = None
    """Free memory of the device when the run was ready (CUDA: the driver's count), for choosing which subjects
    can be alive together."""
    device_figures: dict[str, Any] = field(default_factory=dict)
    """What the run's figures rest on, read by its worker once ready (`Device.figures`): the hardware's name, the
    float32 precision and TF32 settings the configuration left in force, torch's threads; on a GPU its compute
    capability and the clocks, power limit and temperature the driver reported."""
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
    check_seconds: float | None = None
    """Seconds the accuracy check took inside the compile span (eager's reference and the compared steps, or a later
    run's check of its first steps): what checking costs beside the compile."""
    restart_check_seconds: float | None = None
    """A search trial's: seconds its warm restart spent checking its first steps against what eager computed in its
    first run (part of `phase_seconds['restart']`); `check_seconds` is the first run's."""
    notes: list[str] = field(default_factory=list)
    """What the accuracy check found that passes but is worth saying, a line each (a recompile of the optimizer's step
    when the schedule first changed a float)."""

    @property
    def complete(self) -> bool:
        return self.state == "complete" and self.samples_per_second is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON- and YAML-safe plain data (no NaN or infinity)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: _finite(v) for k, v in data.items() if v not in (None, "", [], {}) or k == "state"}

    @classmethod
    def from_figures(cls, data: Mapping[str, Any]) -> RunRecord:
        """The run's record inside a mapping that keeps more figures beside it (a baseline's ratio to eager): its
        own fields, read as `from_dict` reads them; the rest is the caller's."""
        known = {f.name for f in fields(cls)}
        return cls.from_dict({k: v for k, v in data.items() if k in known})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record `to_dict` wrote. One of this version with a key it does not know, or of another version, is a
        `RecordError` that names it; one written before records had a version is read as it always was, its keys
        of that time that no longer exist left out."""
        if not isinstance(data, Mapping):
            raise RecordError(f"a run's record must be a mapping, got {type(data).__name__}: {data!r:.200}")
        known = {f.name for f in fields(cls)}
        version = data.get("version")
        if version is not None and version not in READ_VERSIONS:
            raise RecordError(
                f"a run's record of version {version!r}: this autotune reads versions "
                f"{', '.join(map(str, READ_VERSIONS))} and the records written before versions were kept; a newer "
                "autotune wrote it"
            )
        unknown = sorted(set(data) - known)
        if version is not None and unknown:
            raise RecordError(
                f"a run's record of version {version} has unknown key(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        values = {k: v for k, v in data.items() if k in known and v is not None}
        values["version"] = RUN_RECORD_VERSION
        values.setdefault("state", "failed")
        return cls(**values)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
