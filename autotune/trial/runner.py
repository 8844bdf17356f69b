"""Run one trial in a fresh worker process: isolated caches, one device, a hard timeout, a killed process group.

The parent reads the worker's JSON-lines events from a pipe as they come and may stop the
trial at any event (pruning). Whatever happens, the worker's whole process group is gone
and its temporary caches removed when `run_trial` returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autotune.trial.events import EVENT_FD_VARIABLE, GATE_FD_VARIABLE, PARENT_PID_VARIABLE, parse_event
from autotune.trial.gate import MeasurementGate, Member, overlap_seconds
from autotune.trial.request import Protocol, TrialRequest, TrialRun

__all__ = ["WORKDIR_PREFIX", "Monitor", "oom_kills", "process_alive", "remove_abandoned_workdirs", "run_trial"]

WORKDIR_PREFIX = "autotune-trial-"
"""A run's temporary folder is WORKDIR_PREFIX + the parent's pid + a random part, in the temp directory."""

STDERR_TAIL_LINES = 25
Monitor = Callable[[dict[str, Any] | None], str | None]
"""Called with each event (and with None about once a second); a returned string stops the trial as PRUNED."""


def run_trial(request: TrialRequest, monitor: Monitor | None = None, gate: MeasurementGate | None = None) -> TrialRun:
    """Run `request` in a fresh `python -m <request.program>` process (the worker) and collect what it reports.

    With a `gate`, the worker shares its device with others: it measures only in its turn,
    may be stopped during another's, and its compile time and time limit leave those stops out
    (the monitor gets a "paused" event with the seconds each time they grow).
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
    try:
        return _run_in(workdir, request, monitor or (lambda event: None), gate)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def remove_abandoned_workdirs() -> int:
    """Remove the run folders that a killed parent left in the temp directory; returns how many.

    A folder whose parent process is alive is left alone, since that run is still going.
    """
    removed = 0
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        owner = folder.name[len(WORKDIR_PREFIX) :].partition("-")[0]
        if not owner.isdigit() or not folder.is_dir() or process_alive(int(owner)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += not folder.exists()
    return removed


def oom_kills() -> int:
    """The kernel's count of out-of-memory kills since boot (/proc/vmstat), or 0 where it does not say."""
    try:
        with open("/proc/vmstat") as stats:
            for line in stats:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_in(workdir: Path, request: TrialRequest, monitor: Monitor, gate: MeasurementGate | None) -> TrialRun:
    worker = _Worker(workdir, request, monitor, gate)
    worker.start()
    try:
        worker.follow()
    except BaseException:
        # Ctrl-C or an error here: the worker must not outlive this call, nor be waited for.
        _kill_group(worker.process)
        worker.process.wait()
        raise
    finally:
        returncode = worker.finish()
    return worker.outcome(returncode)


class _Worker:
    """One worker process seen from the parent: started, followed event by event, ended, judged."""

    def __init__(self, workdir: Path, request: TrialRequest, monitor: Monitor, gate: MeasurementGate | None) -> None:
        self.workdir = workdir
        self.request = request
        self.monitor = monitor
        self.gate = gate
        self.member: Member | None = None
        self.run = TrialRun(state="failed")
        self.phase, self.phase_started = "start", 0.0
        self.stop_reason: str | None = None
        self.held = 0.0
        """Seconds stopped by the gate or waiting for a turn, as last told to the monitor."""

    def start(self) -> None:
        """Write the request and start `python -m <program>` in a session of its own, with its pipes."""
        request, workdir = self.request, self.workdir
        source_path = workdir / "apply_compilation.py"
        payload = {
            "spec": request.spec,
            "device": _device_inside(request.device),
            "seed": request.seed,
            "protocol": request.protocol,
            "uses_cuda_graphs": request.uses_cuda_graphs,
            "falls_back_to_eager": request.falls_back_to_eager,
            "changes_precision": request.changes_precision,
            "source": request.source,
            "source_path": str(source_path),
            "save_cache_path": request.save_cache_path,
            "load_cache_path": request.load_cache_path,
        }
        if request.source is not None:
            source_path.write_text(request.source)
        (workdir / "request.json").write_text(json.dumps(payload))
        self.read_fd, write_fd = os.pipe()
        turn_read, self.turn_write = os.pipe() if self.gate is not None else (-1, -1)
        env = _environment(workdir, request, write_fd)
        if self.gate is not None:
            env[GATE_FD_VARIABLE] = str(turn_read)
        self.stderr_path = workdir / "stderr.log"
        self.started = self.phase_started = time.monotonic()
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", request.program, str(workdir / "request.json")],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                pass_fds=(write_fd,) if self.gate is None else (write_fd, turn_read),
                start_new_session=True,  # its own process group, so compile workers die with it
                cwd=os.getcwd(),
            )
        os.close(write_fd)
        if self.gate is not None:
            self.member = self.gate.join(self.process.pid, request.device)
            os.close(turn_read)
        self.oom_kills_before = oom_kills()

    def standing(self) -> float:
        return self.member.paused_seconds() + self.member.waited if self.member is not None else 0.0

    def remaining(self) -> float:
        return self.request.timeout - (time.monotonic() - self.started - self.held)

    def follow(self) -> None:
        """Read events until the worker ends, the monitor stops it, or its time is up."""
        buffer = b""
        with os.fdopen(self.read_fd, "rb", buffering=0) as pipe:
            while not self.stop_reason:
                # Time stopped or waiting for the device is not the trial's: it moves the limit.
                if self.standing() > self.held:
                    self.stop_reason = self.monitor({"event": "paused", "seconds": self.standing() - self.held})
                    self.held = self.standing()
                    if self.stop_reason:
                        return
                if self.remaining() <= 0:
                    self.stop_reason = "timeout"
                    return
                ready, _, _ = select.select([pipe], [], [], min(1.0, self.remaining()))
                if not ready:
                    self.stop_reason = self.monitor(None)
                    if self.stop_reason or self.process.poll() is not None:
                        return
                    continue
                chunk = pipe.read(65536)
                if not chunk:
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = parse_event(line)
                    if event is not None and self._event(event):
                        return

    def _event(self, event: dict[str, Any]) -> bool:
        """Take one event; True when the monitor stopped the trial."""
        if event["event"] == "phase":
            now = time.monotonic()
            self.run.phase_seconds[self.phase] = self.run.phase_seconds.get(self.phase, 0.0) + now - self.phase_started
            self.phase, self.phase_started = event["phase"], now
        if self.gate is not None and self.member is not None:
            _gated(self.gate, self.member, event, self.run, self.turn_write)
        _absorb(self.run, event)
        self.stop_reason = self.monitor(event)
        return bool(self.stop_reason)

    def finish(self) -> int | None:
        """End the process group (at once when stopped), give up the gate; the worker's exit code."""
        if self.stop_reason:
            _kill_group(self.process)
        if self.gate is not None and self.member is not None:
            self.gate.release(self.member)
        returncode = _wait(self.process, self.remaining())
        _kill_group(self.process)  # anything the worker left behind
        if self.gate is not None and self.member is not None:
            self.gate.leave(self.member)
            os.close(self.turn_write)
            self.run.paused_seconds = self.member.paused_seconds()
            measured = self.member.measured
            self.run.measured_between = [measured[-1][0], measured[-1][1]] if measured else []
        return returncode

    def outcome(self, returncode: int | None) -> TrialRun:
        """The run as the parent records it: complete, pruned, or failed with a reason."""
        run, phase = self.run, self.phase
        run.phase_seconds[phase] = run.phase_seconds.get(phase, 0.0) + time.monotonic() - self.phase_started
        run.wall_seconds = time.monotonic() - self.started
        run.stderr_tail = _tail(self.stderr_path)
        if self.stop_reason == "timeout":
            run.state, run.reason = "failed", "timeout"
            run.message = f"the trial ran past its {self.request.timeout:.0f} s limit in phase '{phase}' and was killed"
        elif self.stop_reason:
            run.state, run.reason, run.message = "pruned", "pruned", self.stop_reason
        elif run.result and returncode == 0:
            run.state = "complete"
        elif not run.reason:
            run.state, run.reason = "failed", "crash"
            run.message = self._died(returncode)
        return run

    def _died(self, returncode: int | None) -> str:
        """What ended a worker that sent no result."""
        phase = self.phase
        if returncode == -signal.SIGKILL and oom_kills() > self.oom_kills_before:
            self.run.reason = "oom"
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


def _gated(gate: MeasurementGate, member: Member, event: dict[str, Any], run: TrialRun, turn: int) -> None:
    """A gated worker's event: its turn to measure, its turn's end, or its compile time without the stops."""
    kind = event["event"]
    if kind == "gate":
        gate.acquire(member)  # blocks while another worker of the device measures
        os.write(turn, b"g")
    elif kind in ("result", "failed"):
        gate.release(member)
    elif kind == "compiled" and isinstance(event.get("compile_span"), list):
        start, end = (float(t) for t in event["compile_span"])
        stopped = overlap_seconds(member.paused, (start, end))
        beside = gate.beside(member, (start, end))
        if isinstance(event.get("check_span"), list):
            # The accuracy check's eager reference is not compile time, stopped or beside another.
            check = tuple(float(t) for t in event["check_span"])
            stopped -= overlap_seconds(member.paused, (check[0], check[1]))
            beside -= gate.beside(member, (check[0], check[1]))
        compile_seconds = max(float(event.get("compile_seconds", 0.0)) - stopped, 0.0)
        event["compile_seconds"] = compile_seconds
        event["compile_paused_seconds"] = round(stopped, 3)
        event["compile_concurrent_seconds"] = round(min(max(beside, 0.0), compile_seconds), 3)
    if kind == "result" and run.compiled:
        # The worker's own figure includes the stops; the corrected one from its "compiled" event counts.
        for key in ("compile_seconds", "compile_paused_seconds", "compile_concurrent_seconds"):
            if key in run.compiled:
                event[key] = run.compiled[key]


def _absorb(run: TrialRun, event: dict[str, Any]) -> None:
    kind = event["event"]
    if kind == "window":
        run.windows.append(event)
    elif kind == "compiled":
        run.compiled = event
    elif kind == "environment":
        run.environment = event.get("environment", {})
    elif kind == "cache":
        run.cache.update({k: v for k, v in event.items() if k not in ("event", "time")})
    elif kind == "result":
        run.result = event
    elif kind == "failed":
        run.state, run.reason, run.message = "failed", str(event.get("reason")), str(event.get("message"))


def _environment(workdir: Path, request: TrialRequest, event_fd: int) -> dict[str, str]:
    device = request.device
    env = dict(os.environ)
    env[PARENT_PID_VARIABLE] = str(os.getpid())
    threads = Protocol.from_dict(request.protocol).threads
    if threads:
        # Inductor's C++ kernels use OpenMP threads, which read this before torch is imported.
        env["OMP_NUM_THREADS"] = str(threads)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor")
    env["TRITON_CACHE_DIR"] = str(workdir / "triton")
    env[EVENT_FD_VARIABLE] = str(event_fd)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    if device.startswith("cuda"):
        index = device.partition(":")[2] or env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        env["CUDA_VISIBLE_DEVICES"] = index
    return env


def _device_inside(device: str) -> str:
    # The worker sees only its own GPU, which CUDA_VISIBLE_DEVICES renumbers to 0.
    return "cuda:0" if device.startswith("cuda") else device


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _wait(process: subprocess.Popen[bytes], seconds: float) -> int | None:
    try:
        return process.wait(timeout=max(seconds, 5.0))
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return process.wait()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-STDERR_TAIL_LINES:])
