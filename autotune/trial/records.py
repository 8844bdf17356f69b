"""The typed records a trial process sends its parent, and their versioned JSON wire form.

Each event line a worker writes is `{"v": EVENT_VERSION, "event": KIND, "time": t, "record": {...}}`,
where the record is one of the frozen dataclasses below, written by `to_json` and read back by
`from_json`: plain JSON, every field present, no pickle. The parent refuses a line of another
version, of an unknown kind, or with a missing or unknown field, so that a worker from another
autotune install, or a renamed field, fails loudly instead of turning into a default.

Nothing here imports torch: the parent reads these without it.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin

from autotune.errors import RecordError

__all__ = [
    "COMMANDS",
    "WorkerOrder",
    "EVENT_VERSION",
    "CacheLoaded",
    "CacheSaved",
    "Compiled",
    "DoctorFindings",
    "DynamoCounts",
    "EndCommand",
    "EnvironmentReport",
    "Event",
    "Failure",
    "FreshPass",
    "GoCommand",
    "Held",
    "Pausable",
    "Paused",
    "PhaseChange",
    "ReadyReport",
    "ResultReport",
    "SettleWindow",
    "StreamCommand",
    "Window",
    "WindowCommand",
    "WireRecord",
    "command_line",
    "event_line",
    "parse_command",
    "parse_event",
]

EVENT_VERSION = 4
"""The wire form's version, carried by every event line. Change it whenever a record below gains, loses or renames a
field or changes a field's meaning: a worker and a parent of different versions then refuse each other at once."""

R = TypeVar("R", bound="WireRecord")


class WireRecord:
    """A record that crosses the process boundary: `to_json` gives plain data, `from_json` reads it back, strictly."""

    KIND: ClassVar[str]
    """The event name the record travels under."""
    SENDER: ClassVar[str] = "the worker"
    """Who writes it, as an error reading it says."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able data: every field, nested records as dicts."""
        assert is_dataclass(self)
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record `to_json` wrote; a missing or unknown field is a `RecordError` that names it."""
        if not isinstance(data, Mapping):
            raise RecordError(f"a {cls.KIND!r} record must be a JSON object, got {type(data).__name__}: {data!r:.200}")
        assert is_dataclass(cls)
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        missing = [name for name in names if name not in data]
        if unknown or missing:
            said = "; ".join(
                part
                for part in (
                    f"unknown field(s) {', '.join(unknown)}" if unknown else "",
                    f"missing field(s) {', '.join(missing)}" if missing else "",
                )
                if part
            )
            raise RecordError(f"a {cls.KIND!r} record from {cls.SENDER} has {said}; its fields are {', '.join(names)}.")
        hints = typing.get_type_hints(cls)
        return cls(**{name: _revive(hints[name], data[name], f"{cls.KIND}.{name}") for name in names})


def _plain(value: Any) -> Any:
    if isinstance(value, WireRecord):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _revive(hint: Any, value: Any, where: str) -> Any:
    """`value` as the field's type wants it: nested records are read back; everything else is plain JSON already."""
    options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    for option in options:
        if isinstance(option, type) and issubclass(option, WireRecord):
            try:
                return option.from_json(value)
            except RecordError as error:
                raise RecordError(f"{where}: {error}") from None
    return value


@dataclass(frozen=True, kw_only=True)
class WorkerOrder(WireRecord):
    """What the parent asks of a worker process, as `request.json` carries it: every field, read back strictly.

    The parent's `TrialRequest` holds more (its time limit, cache folder, CPUs, the program to run); this is the
    part the worker itself reads, with the device as the worker sees it and where to write the generated file.
    """

    KIND: ClassVar[str] = "order"
    SENDER: ClassVar[str] = "the parent"
    spec: str
    """The workload target, "pkg.mod:attr"."""
    device: str
    """The device as the worker sees it (its own GPU is its cuda:0)."""
    seed: int
    protocol: dict[str, Any]
    """The `RunProtocol`, as its `to_dict` gives it."""
    uses_cuda_graphs: bool
    falls_back_to_eager: bool
    changes_precision: bool
    random_as_eager: bool = False
    """The configuration draws random numbers as eager does: a training step with dropout is checked in train mode,
    eager's and the compiled steps drawing from the same seed."""
    source: str | None
    """The generated apply_compilation.py; None: eager."""
    source_path: str
    """Where the worker writes `source` before importing it."""
    save_cache_path: str | None
    load_cache_path: str | None
    measure_compile: bool
    """The doctor only: compile with plain torch.compile after its analysis and split where the time went."""
    memory_share: float | None


@dataclass(frozen=True, kw_only=True)
class DynamoCounts(WireRecord):
    """What dynamo has counted so far in the worker (`autotune.trial.compile_counts.dynamo_counts`)."""

    KIND: ClassVar[str] = "counts"
    graphs: int
    """Graphs dynamo compiled."""
    graph_breaks: int
    """Graph breaks dynamo counted."""
    recompiles: int
    """Frames compiled again for new guards."""
    frames: int
    """Frames dynamo compiled, in all."""
    cuda_graph_recordings: int
    """CUDA graphs recorded."""
    cuda_graph_skips: int
    """Graphs run without CUDA graphs although the configuration asked for them."""

    def figures(self) -> dict[str, int]:
        """The counts a run's record keeps (all but `frames`)."""
        return {k: v for k, v in self.to_json().items() if k != "frames"}


@dataclass(frozen=True, kw_only=True)
class Pausable(WireRecord):
    """The worker answers SIGTSTP on its pause descriptor once it has gone quiet."""

    KIND: ClassVar[str] = "pausable"


@dataclass(frozen=True, kw_only=True)
class Held(WireRecord):
    """A worker started beside others has imported and waits for its parent's go."""

    KIND: ClassVar[str] = "held"


@dataclass(frozen=True, kw_only=True)
class PhaseChange(WireRecord):
    """The worker entered a phase (build, compile, settle, ready, measure; the doctor's own)."""

    KIND: ClassVar[str] = "phase"
    phase: str
    """The phase it entered."""


@dataclass(frozen=True, kw_only=True)
class EnvironmentReport(WireRecord):
    """Where the run ran: `autotune.runtime.environment.fingerprint`."""

    KIND: ClassVar[str] = "environment"
    environment: dict[str, Any]
    """The fingerprint: torch, Python, device name and the rest."""


@dataclass(frozen=True, kw_only=True)
class CacheLoaded(WireRecord):
    """The worker loaded a compile-cache file before compiling."""

    KIND: ClassVar[str] = "cache_loaded"
    loaded: dict[str, int]
    """Artifacts torch loaded, by kind; empty when nothing was loaded."""
    load_seconds: float
    """Seconds the load took (inside the compile clock)."""


@dataclass(frozen=True, kw_only=True)
class CacheSaved(WireRecord):
    """The worker saved (or could not save) what it compiled to a compile-cache file."""

    KIND: ClassVar[str] = "cache_saved"
    saved: bool
    """Whether a file was written."""
    message: str = ""
    """Why nothing was saved."""
    bytes: int = 0
    """The payload's size."""
    sha256: str = ""
    """The payload's SHA-256."""
    fingerprint: dict[str, Any] = field(default_factory=dict)
    """The environment the file is valid for."""
    artifacts: dict[str, int] = field(default_factory=dict)
    """Artifacts saved, by kind."""


@dataclass(frozen=True, kw_only=True)
class Compiled(WireRecord):
    """Compiled, checked against eager and warmed up on the fixed batches."""

    KIND: ClassVar[str] = "compiled"
    compile_seconds: float
    """Compile and warm-up, the accuracy check's eager reference left out (0 for eager)."""
    warmup_passes: int
    """Passes over the fixed batches until one compiled nothing."""
    compile_peak_memory_mb: float
    """Peak memory while compiling and warming up."""
    compile_peak_reserved_mb: float | None
    """On CUDA, the peak the caching allocator reserved meanwhile; None elsewhere."""
    compile_split: dict[str, float]
    """Where the compile time went, seconds per part."""
    compile_span: list[float]
    """When the compile started and ended, seconds since the epoch: a parent that stopped the worker leaves that out."""
    check_span: list[float] | None
    """When the accuracy check's eager reference ran inside the compile span; None when none ran."""
    shared_build_spans: list[list[float]]
    """When the compile built what every later process of the environment reuses (Inductor's precompiled C++
    header, `autotune.trial.shared_builds`): left out of compile_seconds and of the split's Inductor part."""
    counts: DynamoCounts
    """Dynamo's counts once compiled."""
    check_seconds: float
    """Seconds of the accuracy check outside the compile time: eager's reference, and the compared steps that compiled
    nothing (or a later run's check of its first steps)."""
    notes: list[str]
    """What the accuracy check found that passes but is worth saying, in a line each (a recompile of the optimizer's
    step when the schedule first changed a float)."""

    @property
    def shared_build_seconds(self) -> float:
        """Seconds of `shared_build_spans`."""
        return sum(end - start for start, end in self.shared_build_spans)


@dataclass(frozen=True, kw_only=True)
class SettleWindow(WireRecord):
    """One settle window: passes over the fixed batches, measured once nothing compiled in it."""

    KIND: ClassVar[str] = "settle"
    index: int
    """Its place among the settle windows kept."""
    seconds: float
    """Its duration."""
    passes: int
    """Passes over the fixed batches it made."""
    samples_per_second: float
    """Its rate in samples."""
    batches_per_second: float
    """Its rate in batches."""


@dataclass(frozen=True, kw_only=True)
class ReadyReport(WireRecord):
    """Settled on the fixed batches: the worker waits for its parent's commands."""

    KIND: ClassVar[str] = "ready"
    settle_windows: list[float]
    """Each settle window's samples/s."""
    settle_passes: int
    """Passes over the fixed batches per settle window."""
    windows_redone: int
    """Settle windows measured again because something compiled in them."""
    steady_samples_per_second: float
    """The settle windows' median samples/s."""
    samples_per_second: float
    """The same median: the fixed batches' rate, until windows or a stream pass say more."""
    batches_per_second: float
    """The settle windows' median batches/s (a parent may replace it with a calibrated rate)."""
    stream_samples: int
    """Samples in one pass over the stream (the fresh batches, or the fixed ones without)."""
    stream_batches: int
    """Batches in the stream."""
    threads: int
    """CPU threads torch uses."""
    device_free_mb: float | None
    """Free memory of the device once ready; None where the system does not say."""
    device_figures: dict[str, Any]
    """What the figures rest on, read by the worker once ready, the device just run (`Device.figures`)."""
    counts: DynamoCounts
    """Dynamo's counts once ready."""


@dataclass(frozen=True, kw_only=True)
class Window(WireRecord):
    """One timed window on a slice of the stream; the steps that compiled timed apart."""

    KIND: ClassVar[str] = "window"
    index: int
    """The turn it belongs to; -1 for a calibration window, which counts for nothing else."""
    seconds: float
    """Its duration, compiling steps included."""
    samples: int
    """Samples it ran."""
    batches: int
    """Batches (steps) it ran."""
    recompiles: int
    """Frames compiled inside it (new shapes)."""
    compile_seconds: float
    """Seconds of the steps that compiled something."""
    compile_samples: int
    """Samples of those steps."""
    compile_batches: int
    """Batches of those steps."""
    probe_seconds: float
    """The calibration probe timed just before it."""
    others: float | None
    """Share of the machine's CPU other processes used meanwhile; None where the system does not say."""
    load: float | None
    """The 1-minute load average after it; None where the system has none."""


@dataclass(frozen=True, kw_only=True)
class FreshPass(WireRecord):
    """One timed pass over the whole fresh stream, its compiles of new shapes included (a first run's figure)."""

    KIND: ClassVar[str] = "fresh"
    samples_per_second: float
    """The pass's rate in samples."""
    batches_per_second: float
    """The pass's rate in batches."""
    fresh_batches: int
    """Batches it ran."""
    fresh_recompiles: int
    """Frames compiled during it."""
    fresh_compile_seconds: float
    """Seconds of its steps that compiled something."""

    def figures(self) -> dict[str, Any]:
        """The `fresh_*` figures a run's record keeps."""
        return {k: v for k, v in self.to_json().items() if k.startswith("fresh_")}


@dataclass(frozen=True, kw_only=True)
class ResultReport(WireRecord):
    """The worker's last word on a run it measured: its rate, dynamo's counts, memory and the machine's state."""

    KIND: ClassVar[str] = "result"
    samples_per_second: float
    """The final stream pass's rate, or the settle windows' median without one."""
    batches_per_second: float
    """The same, in batches."""
    counts: DynamoCounts
    """Dynamo's counts at the end."""
    peak_memory_mb: float
    """Steady peak memory of the compiled steps (CUDA's allocator, or the resident set on the CPU)."""
    peak_reserved_mb: float | None
    """On CUDA, the steady peak the caching allocator reserved; None elsewhere."""
    memory_kind: str
    """'cuda_allocated' or 'process_rss'."""
    probe_seconds: list[float]
    """The calibration probe before and after the end's measurements."""
    load: list[float]
    """The load average when ready and at the end (where the system has one)."""
    steal: float | None
    """Share of CPU time the hypervisor gave to others meanwhile; None where unknown."""
    noisy: str
    """Why the figures are not trusted; empty when they are."""


@dataclass(frozen=True, kw_only=True)
class Failure(WireRecord):
    """The run failed for a reason the parent records."""

    KIND: ClassVar[str] = "failed"
    reason: str
    """accuracy, oom, compile_error, recompile_limit, ..."""
    message: str
    """What went wrong, in a line."""
    phase: str
    """The phase it failed in."""


@dataclass(frozen=True, kw_only=True)
class DoctorFindings(WireRecord):
    """What the compile doctor (`autotune.trial.doctor`) found running the workload under dynamo."""

    KIND: ClassVar[str] = "findings"
    blocks: list[str]
    """Paths of the repeated blocks found in the model."""
    breaks: list[dict[str, Any]]
    """Each graph break dynamo logged: file, line, summary, explanation, context, stack, torch_hints."""
    recompiles: list[dict[str, Any]]
    """Each recompile: function, file, line, reason and the phase it happened in."""
    graphs: int
    """Graphs dynamo compiled."""
    frames: int
    """Frames dynamo compiled."""
    fixed_batches: int
    """Fixed batches run."""
    fresh_batches: int
    """Fresh batches run."""
    recompile_limit: int
    """dynamo's recompile limit."""
    task: str
    """The workload's task, as `Workload.task` names it."""
    dynamic_dims: dict[str, list[int]]
    """The workload's declared dynamic axes, by input."""
    lengths: dict[str, list[int]]
    """Each declared axis's length in every batch, keyed 'input:axis'."""
    inputs: list[str]
    """The batch's inputs."""
    torch: str
    """torch's version."""
    compile_seconds: float | None
    """Plain torch.compile's compile time, when it was measured; None when not."""
    compile_split: dict[str, float]
    """Where that compile time went; empty when it was not measured."""


@dataclass(frozen=True, kw_only=True)
class Paused(WireRecord):
    """Not from the worker: the parent tells its monitor that the worker stood stopped this much longer."""

    KIND: ClassVar[str] = "paused"
    seconds: float
    """Seconds stopped since the last such record."""


_WORKER_RECORDS: dict[str, type[WireRecord]] = {
    r.KIND: r
    for r in (
        Pausable,
        Held,
        PhaseChange,
        EnvironmentReport,
        CacheLoaded,
        CacheSaved,
        Compiled,
        SettleWindow,
        ReadyReport,
        Window,
        FreshPass,
        ResultReport,
        Failure,
        DoctorFindings,
    )
}
"""What a worker may send, by event name."""


@dataclass(frozen=True)
class Event:
    """One record as the parent received it, with when the worker sent it."""

    record: WireRecord
    """What the worker said."""
    time: float = 0.0
    """When it said it, seconds since the epoch (0 for the parent's own records)."""


def event_line(record: WireRecord, time: float) -> str:
    """One event line, without its newline: the record in its wire form, the version and the time."""
    return json.dumps({"v": EVENT_VERSION, "event": record.KIND, "time": time, "record": record.to_json()})


def parse_event(line: bytes | str) -> Event | None:
    """The event of a line a worker wrote; None for anything else (a stray print, a partial line).

    Raises `RecordError` for an event of another version, of an unknown kind, or whose record
    lacks a field or has one it should not: nothing a worker says is half-understood.
    """
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "event" not in message:
        return None
    version = message.get("v")
    if version != EVENT_VERSION:
        raise RecordError(
            f"the worker speaks event version {version!r}, this autotune reads version {EVENT_VERSION} "
            f"(its {message['event']!r} event): the worker comes from another autotune install; "
            "run the same autotune in the parent and the worker."
        )
    kind = _WORKER_RECORDS.get(str(message["event"]))
    if kind is None:
        raise RecordError(
            f"the worker sent an unknown event {message['event']!r}; known: {', '.join(sorted(_WORKER_RECORDS))}."
        )
    time = message.get("time")
    if not isinstance(time, (int, float)) or isinstance(time, bool):
        raise RecordError(f"the worker's {kind.KIND!r} event has no time (got {time!r}).")
    record = message.get("record")
    if not isinstance(record, dict):
        raise RecordError(f"the worker's {kind.KIND!r} event carries no record object (got {record!r:.200}).")
    return Event(record=kind.from_json(record), time=float(time))


# -- the parent's commands to a worker, one JSON line each on the command channel: {"do": KIND, **fields} -----------


@dataclass(frozen=True, kw_only=True)
class GoCommand(WireRecord):
    """A held worker (see `hold`) goes on: it builds, compiles and settles."""

    KIND: ClassVar[str] = "go"
    SENDER: ClassVar[str] = "the parent"


@dataclass(frozen=True, kw_only=True)
class WindowCommand(WireRecord):
    """Measure one window: `passes` passes over stream batches `start` .. `start + count - 1`."""

    KIND: ClassVar[str] = "window"
    SENDER: ClassVar[str] = "the parent"
    index: int
    """The turn the window belongs to, which the worker's `Window` record carries back."""
    start: int
    """The first batch of the fresh stream it times (modulo the stream's length)."""
    count: int
    """How many batches it times."""
    passes: int = 1
    """Passes over those batches."""


@dataclass(frozen=True, kw_only=True)
class StreamCommand(WireRecord):
    """One timed pass over the whole fresh stream."""

    KIND: ClassVar[str] = "stream"
    SENDER: ClassVar[str] = "the parent"


@dataclass(frozen=True, kw_only=True)
class EndCommand(WireRecord):
    """Say the run's last word and end; `stream`: a first run's pass over the fresh stream before it."""

    KIND: ClassVar[str] = "end"
    SENDER: ClassVar[str] = "the parent"
    stream: bool
    """Run the timed pass over the fresh stream first."""


COMMANDS: dict[str, type[WireRecord]] = {
    kind.KIND: kind for kind in (GoCommand, WindowCommand, StreamCommand, EndCommand)
}
"""The commands a worker understands, by the name they travel under."""


def command_line(command: WireRecord) -> str:
    """One command line, without its newline."""
    return json.dumps({"do": command.KIND, **command.to_json()})


def parse_command(line: bytes | str) -> WireRecord | None:
    """The command of a line the parent wrote; None for a line that is not a JSON object. A command of an unknown
    kind, or that lacks a field or has one it should not, is a `RecordError` that names it."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    kind = COMMANDS.get(str(message.pop("do", None)))
    if kind is None:
        raise RecordError(f"the parent sent an unknown command {line!r:.200}; known: {', '.join(sorted(COMMANDS))}.")
    return kind.from_json(message)
