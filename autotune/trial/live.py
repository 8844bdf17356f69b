"""A worker process kept alive between measurements: started, made ready, asked for windows, paused, ended.

The parent starts `python -m autotune.trial.worker` in a session of its own, with a pipe for
the worker's JSON-lines events and one for commands. It follows the events until the worker
is ready (compiled, checked and settled), may then ask it for windows on slices of the fresh
stream, stop it (SIGSTOP to its whole process group, Inductor's compile workers included)
while others measure and continue it, and finally end it. Whatever happens, the process group
is gone and the run's temporary folder removed when `end` or `kill` returns; the subject's own
cache folder (`TrialRequest.cache_dir`) is kept for its next run.

A monitor sees every event (and None about once a second) and may stop the run by returning
why (pruning, a compile budget). Time the worker stood stopped is not counted against its
time limits.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.runtime import allocator
from autotune.runtime.device import parse_device
from autotune.runtime.processes import kill_descendants, signal_group
from autotune.trial.events import (
    COMMAND_FD_VARIABLE,
    EVENT_FD_VARIABLE,
    HOLD_VARIABLE,
    MAX_PASSES,
    PARENT_PID_VARIABLE,
    PAUSE_FD_VARIABLE,
)
from autotune.trial.forkserver import WorkerProcess, start_process
from autotune.trial.gate import GateClosed, MeasurementGate, Member, overlap_seconds
from autotune.trial.guard import process_guard
from autotune.trial.records import (
    CacheLoaded,
    CacheSaved,
    Compiled,
    DoctorFindings,
    EndCommand,
    EnvironmentReport,
    Event,
    Failure,
    FreshPass,
    GoCommand,
    Held,
    Pausable,
    Paused,
    PhaseChange,
    ReadyReport,
    ResultReport,
    StreamCommand,
    Window,
    WindowCommand,
    WireRecord,
    WorkerOrder,
    command_line,
    parse_event,
)
from autotune.trial.request import CompileStops, RunProtocol, TrialRequest, TrialRun

__all__ = ["WORKDIR_PREFIX", "LiveWorker", "EventMonitor", "oom_kills"]

WORKDIR_PREFIX = "autotune-trial-"
"""A run's temporary folder is WORKDIR_PREFIX + the parent's pid + a random part, in the temp directory."""
STDERR_TAIL_LINES = 25
EventMonitor = Callable[[Event | None], str | None]
"""Called with each event (and with None about once a second); a returned string stops the trial as PRUNED."""


class LiveWorker:
    """One worker process seen from its parent; see the module docstring."""

    def __init__(
        self,
        request: TrialRequest,
        monitor: EventMonitor | None = None,
        gate: MeasurementGate | None = None,
        *,
        serving: bool = False,
    ) -> None:
        self.request = request
        self.serving = serving
        """A live reference, which serves windows to trial after trial for as long as a search runs: its limit holds
        for each thing asked of it. Any other run's limit holds for all its phases together (`worked`)."""
        self.worked = 0.0
        """Seconds the worker has worked on what was asked of it so far (stops and waits for a turn left out)."""
        self.monitor: EventMonitor = monitor or (lambda event: None)
        self.gate = gate
        self.member: Member | None = None
        self.run = TrialRun(state="failed")
        self.phase, self.phase_started = "start", time.monotonic()
        self.stop_reason: str | None = None
        self.ended = False
        self.held = 0.0
        """Seconds stopped by the gate or by `pause`, as last told to the monitor."""
        self.paused_since: float | None = None
        self.paused_total = 0.0
        self._buffer = b""
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))

    # -- the process -----------------------------------------------------------------------------

    def start(self, *, hold: bool = False) -> LiveWorker:
        """Write the request and start the worker in a session of its own, with its event and command pipes.

        With `hold`, the worker imports, says "held" and waits for `release` before it builds anything.
        """
        request, workdir = self.request, self.workdir
        cache = Path(request.cache_dir) if request.cache_dir else workdir
        self.run.warm = cache.is_dir() and any((cache / "inductor").glob("*"))
        (workdir / "request.json").write_text(json.dumps(_payload(request, workdir)))
        if request.source is not None:
            (workdir / "apply_compilation.py").write_text(request.source)
        if self.gate is not None:
            try:
                self.gate.admit(request.device)  # not while another thread holds the device alone
            except GateClosed:
                shutil.rmtree(workdir, ignore_errors=True)  # nothing started: nothing else will remove it
                raise
        self.events_fd, event_write = os.pipe()
        command_read, command_write = os.pipe()
        self.answers, answer_write = os.pipe()
        os.set_blocking(self.answers, False)
        env = _environment(cache, request, event_write)
        env[COMMAND_FD_VARIABLE] = str(command_read)
        env[PAUSE_FD_VARIABLE] = str(answer_write)
        if hold:
            env[HOLD_VARIABLE] = "1"
        self.stderr_path = workdir / "stderr.log"
        self.started = self.phase_started = time.monotonic()
        with open(self.stderr_path, "wb") as stderr:
            # A new process in a session of its own (so compile workers die with its group), forked from a
            # pre-imported server where the device allows it (`autotune.trial.forkserver`).
            self.process: WorkerProcess = start_process(
                request.program,
                [str(workdir / "request.json")],
                env=env,
                cwd=os.getcwd(),
                stdout=stderr.fileno(),
                fds={
                    EVENT_FD_VARIABLE: event_write,
                    COMMAND_FD_VARIABLE: command_read,
                    PAUSE_FD_VARIABLE: answer_write,
                },
                fork=parse_device(request.device).forks_workers,
                preload=request.spec,
                cpus=request.cpus or (),
            )
        os.close(event_write)
        os.close(command_read)
        os.close(answer_write)
        self.commands = os.fdopen(command_write, "w", buffering=1)
        self.pipe = os.fdopen(self.events_fd, "rb", buffering=0)
        if self.gate is not None:
            self.member = self.gate.join(self.process.pid, request.device)
            self.member.answers = self.answers
        # A worker may be stopped (SIGSTOP) while it waits: only a guard can end it if this process is killed.
        process_guard().register(self.process.pid)
        self.oom_kills_before = oom_kills()
        return self

    def passes_for(self, batches: int, window_seconds: float) -> int:
        """Passes over a slice of `batches` that last about `window_seconds` at this worker's settle rate."""
        rate = self.run.ready.batches_per_second if self.run.ready is not None else 0.0
        return max(1, min(MAX_PASSES, round(window_seconds * rate / max(batches, 1))))

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return not self.ended and self.process.poll() is None

    # -- following events ------------------------------------------------------------------------

    def until_ready(self) -> bool:
        """Follow the worker until it is ready; False when it failed, ended or was stopped before."""
        return self.follow({ReadyReport}, self.request.timeout) is not None

    def until_held(self) -> bool:
        """Follow a worker started with `hold` until it has imported and waits; False when it failed or ended."""
        return self.follow({Held}, self.request.timeout) is not None

    def release(self) -> bool:
        """Let a held worker go on to build, compile and settle; False when it is gone."""
        return self._send(GoCommand())

    def window(self, index: int, start: int, count: int, passes: int = 1) -> Window | None:
        """Measure one window: `passes` passes over stream batches start .. start+count-1; its record, or None."""
        if not self._send(WindowCommand(index=index, start=start, count=count, passes=passes)):
            return None
        found = self.follow({Window}, self.request.timeout)
        return found if isinstance(found, Window) else None

    def stream(self) -> FreshPass | None:
        """One timed pass over the whole fresh stream (it fills the subject's cache); its record, or None."""
        if not self._send(StreamCommand()):
            return None
        found = self.follow({FreshPass}, self.request.timeout)
        return found if isinstance(found, FreshPass) else None

    def follow(self, until: Collection[type[WireRecord]], limit: float) -> WireRecord | None:
        """Read records until one of a type in `until` (returned), or the run ends, is stopped or runs out of time:
        `limit` seconds of work for all it was asked together (`worked`), or for this alone where it is `serving`.

        A line of another wire version, or a record that does not parse, raises `RecordError`.
        """
        deadline_base = time.monotonic()
        held_base = self._standing()
        before = 0.0 if self.serving else self.worked
        try:
            return self._follow(until, limit - before, deadline_base, held_base)
        finally:
            self.worked = before + max(time.monotonic() - deadline_base - (self._standing() - held_base), 0.0)

    def _follow(
        self, until: Collection[type[WireRecord]], limit: float, deadline_base: float, held_base: float
    ) -> WireRecord | None:
        while not self.stop_reason:
            if self._standing() > self.held:
                self.stop_reason = self.monitor(Event(Paused(seconds=self._standing() - self.held)))
                self.held = self._standing()
                if self.stop_reason:
                    return None
            remaining = limit - (time.monotonic() - deadline_base - (self._standing() - held_base))
            if remaining <= 0:
                self.stop_reason = "timeout"
                return None
            ready, _, _ = select.select([self.pipe], [], [], min(1.0, remaining))
            if not ready:
                self.stop_reason = self.monitor(None)
                if self.process.poll() is not None:
                    return None
                continue
            chunk = self.pipe.read(65536)
            if not chunk:
                return None
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            found = None
            for line in lines:
                event = parse_event(line)
                if event is None:
                    continue
                self._take(event)
                if self.stop_reason:
                    return None
                if isinstance(event.record, Failure):
                    return None
                if type(event.record) in until and found is None:
                    found = event.record
            if found is not None:
                return found
        return None

    def _take(self, event: Event) -> None:
        record = event.record
        if isinstance(record, PhaseChange):
            # When the worker entered the phase, not when this process read it: a worker stopped
            # right after it said "ready" is read much later, and that wait is no part of settling.
            late = max(0.0, time.time() - event.time)
            now = time.monotonic() - late
            self.run.phase_seconds[self.phase] = self.run.phase_seconds.get(self.phase, 0.0) + now - self.phase_started
            self.phase, self.phase_started = record.phase, now
        watched = event
        if isinstance(record, Compiled) and self.gate is not None and self.member is not None:
            self.run.compile_stops = _without_stops(self.gate, self.member, record)
            # The monitor judges the compile budget by the compile time the trial reports: without its stops.
            watched = replace(event, record=replace(record, compile_seconds=self.run.compile_stops.compile_seconds))
        if isinstance(record, Pausable) and self.member is not None:
            self.member.pausable = True
        _absorb(self.run, record)
        self.stop_reason = self.monitor(watched)

    # -- turns -----------------------------------------------------------------------------------

    def pause(self) -> None:
        """Stop the worker's whole process group (it waits for a command, or compiles); see `resume`."""
        if self.paused_since is None and self.alive:
            signal_group(self.process.pid, signal.SIGSTOP)
            self.paused_since = time.monotonic()

    def resume(self) -> None:
        if self.paused_since is not None:
            signal_group(self.process.pid, signal.SIGCONT)
            self.paused_total += time.monotonic() - self.paused_since
            self.paused_since = None

    def _standing(self) -> float:
        """Seconds this worker stood stopped (by `pause` or the gate) or waited for a turn, so far."""
        ongoing = time.monotonic() - self.paused_since if self.paused_since is not None else 0.0
        gated = self.member.paused_seconds() + self.member.waited if self.member is not None else 0.0
        return self.paused_total + ongoing + gated

    def stop(self, reason: str) -> None:
        """Stop the run for `reason` (pruning): `end` then kills the worker and records the run as pruned."""
        self.stop_reason = reason

    def snapshot(self) -> TrialRun:
        """The run so far, as if it ended now: complete once ready (and not failed), with its windows and stream pass."""
        run = copy.deepcopy(self.run)
        run.wall_seconds = time.monotonic() - self.started
        if run.ready is not None and not run.reason:
            run.state = "complete"
        return run

    # -- ending ----------------------------------------------------------------------------------

    def end(self, *, stream: bool = False) -> TrialRun:
        """Tell the worker to end (after one pass over the stream, with `stream`), collect its result, clean up."""
        self.resume()
        if self.alive and not self.stop_reason and self._send(EndCommand(stream=stream)):
            self.follow({ResultReport, DoctorFindings}, self.request.timeout)
        return self._finish()

    def kill(self) -> TrialRun:
        """End the worker at once (its figures so far are kept), and clean up."""
        self.stop_reason = self.stop_reason or "killed"
        return self._finish()

    def _send(self, command: WireRecord) -> bool:
        try:
            self.commands.write(command_line(command) + "\n")
            self.commands.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def _finish(self) -> TrialRun:
        if self.ended:
            return self.run
        self.ended = True
        if self.stop_reason:
            _kill_run(self.process)
        self.resume()
        with contextlib.suppress(OSError, ValueError):
            self.commands.close()  # end of input: a worker still reading commands ends by itself
        returncode = _wait(self.process, max(self.request.timeout - (time.monotonic() - self.started), 5.0))
        _kill_group(self.process)  # anything the worker left behind
        process_guard().forget(self.process.pid)
        with contextlib.suppress(OSError):
            self.pipe.close()
        if self.gate is not None and self.member is not None:
            self.gate.leave(self.member)
            self.run.quiet_pauses = [self.member.quiet_pauses, self.member.late_pauses]
            self.run.paused_seconds = self.member.paused_seconds()
            measured = self.member.measured
            self.run.measured_between = [measured[0][0], measured[-1][1]] if measured else []
        with contextlib.suppress(OSError):
            os.close(self.answers)
        self.run.paused_seconds += self.paused_total
        try:
            return _outcome(self, returncode)
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _outcome(worker: LiveWorker, returncode: int | None) -> TrialRun:
    """The run as the parent records it: complete, pruned, or failed with a reason."""
    run, phase = worker.run, worker.phase
    run.phase_seconds[phase] = run.phase_seconds.get(phase, 0.0) + time.monotonic() - worker.phase_started
    run.wall_seconds = time.monotonic() - worker.started
    run.stderr_tail = _tail(worker.stderr_path)
    if worker.stop_reason == "timeout":
        run.state, run.reason = "failed", "timeout"
        run.message = (
            f"the trial ran past its {worker.request.timeout:.0f} s limit (all its phases together) in phase "
            f"'{phase}' and was killed"
        )
    elif worker.stop_reason == "killed":
        if run.state != "failed" or not run.reason:
            run.state, run.reason, run.message = "failed", "killed", f"stopped by the search in phase '{phase}'"
    elif worker.stop_reason:
        run.state, run.reason, run.message = "pruned", "pruned", worker.stop_reason
    elif (run.result is not None or run.findings is not None) and returncode == 0 and not run.reason:
        run.state = "complete"
    elif not run.reason:
        run.state, run.reason = "failed", "crash"
        run.message = _died(worker, returncode)
    return run


def _died(worker: LiveWorker, returncode: int | None) -> str:
    """What ended a worker that sent no result."""
    phase = worker.phase
    if returncode == -signal.SIGKILL and oom_kills() > worker.oom_kills_before:
        worker.run.reason = "oom"
        return (
            f"the worker was killed (SIGKILL) in phase '{phase}' while the kernel's out-of-memory killer "
            "ran (the oom_kill count in /proc/vmstat rose): likely out of memory"
        )
    if returncode is not None and returncode < 0:
        message = f"the worker died from signal {signal.Signals(-returncode).name} in phase '{phase}'"
        if returncode == -signal.SIGKILL:
            message += " (sent by another process; the kernel counted no out-of-memory kill)"
        return message
    return f"the worker exited with code {returncode} in phase '{phase}' without a result"


def _without_stops(gate: MeasurementGate, member: Member, compiled: Compiled) -> CompileStops:
    """A gated worker's compile time, without the time it stood stopped while another worker measured."""
    start, end = compiled.compile_span
    stopped = overlap_seconds(member.paused, (start, end))
    beside = gate.beside(member, (start, end))
    # Neither the accuracy check's eager reference nor a build the environment shares is compile time (the worker
    # left both out already): time stopped or beside another inside them is not taken out again.
    for left_out in ([compiled.check_span] if compiled.check_span is not None else []) + compiled.shared_build_spans:
        left_start, left_end = left_out
        stopped -= overlap_seconds(member.paused, (left_start, left_end))
        beside -= gate.beside(member, (left_start, left_end))
    compile_seconds = max(compiled.compile_seconds - stopped, 0.0)
    return CompileStops(
        compile_seconds=compile_seconds,
        compile_paused_seconds=round(stopped, 3),
        compile_concurrent_seconds=round(min(max(beside, 0.0), compile_seconds), 3),
    )


def _absorb(run: TrialRun, record: WireRecord) -> None:
    """Keep what a record says in the run: the records themselves, never changed."""
    if isinstance(record, Window):
        if record.index >= 0:  # a calibration window (index -1) times a step, and counts for nothing else
            run.windows.append(record)
    elif isinstance(record, Compiled):
        run.compiled = record
    elif isinstance(record, ReadyReport):
        run.ready = record
    elif isinstance(record, EnvironmentReport):
        run.environment = record.environment
    elif isinstance(record, CacheLoaded):
        run.cache_loaded = record
    elif isinstance(record, CacheSaved):
        run.cache_saved = record
    elif isinstance(record, FreshPass):
        run.fresh = record
    elif isinstance(record, ResultReport):
        run.result = record
    elif isinstance(record, DoctorFindings):
        run.findings = record
    elif isinstance(record, Failure):
        run.state, run.reason, run.message = "failed", record.reason, record.message


def _payload(request: TrialRequest, workdir: Path) -> dict[str, Any]:
    return WorkerOrder(
        spec=request.spec,
        # The device as the worker sees it under `_environment` (its own GPU is its cuda:0).
        device=str(parse_device(request.device).in_worker()),
        seed=request.seed,
        protocol=dict(request.protocol),
        uses_cuda_graphs=request.uses_cuda_graphs,
        falls_back_to_eager=request.falls_back_to_eager,
        changes_precision=request.changes_precision,
        random_as_eager=request.random_as_eager,
        source=request.source,
        source_path=str(workdir / "apply_compilation.py"),
        save_cache_path=request.save_cache_path,
        load_cache_path=request.load_cache_path,
        measure_compile=request.measure_compile,
        memory_share=request.memory_share,
    ).to_json()


def _environment(cache: Path, request: TrialRequest, event_fd: int) -> dict[str, str]:
    env = dict(os.environ)
    env[PARENT_PID_VARIABLE] = str(os.getpid())
    threads = RunProtocol.from_dict(request.protocol).threads
    if threads:
        # Inductor's C++ kernels use OpenMP threads, which read this before torch is imported.
        env["OMP_NUM_THREADS"] = str(threads)
    # The subject's own caches: Inductor's FX graph and AOTAutograd caches, autotuning results, Triton's kernels.
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
    env["TRITON_CACHE_DIR"] = str(cache / "triton")
    if request.cpus:
        # The worker's share of the host's cores: its kernels' threads and Inductor's compile processes.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(len(request.cpus))
        if not threads:
            env["OMP_NUM_THREADS"] = str(len(request.cpus))
    # glibc's malloc with fixed thresholds from the first allocation on: with its adaptive ones, a small CPU
    # training step faults its memory in anew each time, by an amount that differs from process to process.
    env.update(allocator.worker_environment(env))
    env[EVENT_FD_VARIABLE] = str(event_fd)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    # Which of the parent's devices the worker sees (on a GPU: its own, as CUDA_VISIBLE_DEVICES).
    env.update(parse_device(request.device).worker_environment(os.environ))
    return env


def oom_kills(vmstat: str = "/proc/vmstat") -> int:
    """The kernel's count of out-of-memory kills since boot (`vmstat`), or 0 where it does not say."""
    try:
        with open(vmstat) as stats:
            for line in stats:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _kill_group(process: WorkerProcess) -> None:
    signal_group(process.pid, signal.SIGKILL)


def _kill_run(process: WorkerProcess) -> None:
    """Kill a worker that still runs, with its process group and what it adopted outside that group.

    A daemon that detached from the worker's group (a session of its own) is the worker's while the
    worker lives (`end_detached`): killed first, before it would pass to init with the worker's death.
    """
    kill_descendants(process.pid, outside_group=process.pid)
    _kill_group(process)


def _wait(process: WorkerProcess, seconds: float) -> int | None:
    try:
        return process.wait(timeout=max(seconds, 5.0))
    except subprocess.TimeoutExpired:
        _kill_run(process)
        return process.wait()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-STDERR_TAIL_LINES:])
