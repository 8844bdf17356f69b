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
    read_fd, write_fd = os.pipe()
    turn_read, turn_write = os.pipe() if gate is not None else (-1, -1)
    env = _environment(workdir, request, write_fd)
    if gate is not None:
        env[GATE_FD_VARIABLE] = str(turn_read)
    stderr_path = workdir / "stderr.log"
    started = time.monotonic()
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", request.program, str(workdir / "request.json")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            pass_fds=(write_fd,) if gate is None else (write_fd, turn_read),
            start_new_session=True,  # its own process group, so compile workers die with it
            cwd=os.getcwd(),
        )
    os.close(write_fd)
    member = gate.join(process.pid, request.device) if gate is not None else None
    if gate is not None:
        os.close(turn_read)
    oom_kills_before = oom_kills()
    run = TrialRun(state="failed")
    phase, phase_started = "start", started
    stop_reason: str | None = None
    buffer = b""
    held = 0.0  # seconds stopped by the gate or waiting for a turn, as last told to the monitor

    def standing() -> float:
        return member.paused_seconds() + member.waited if member is not None else 0.0

    try:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while True:
                # Time stopped or waiting for the device is not the trial's: it moves the limit.
                if standing() > held:
                    stop_reason = monitor({"event": "paused", "seconds": standing() - held})
                    held = standing()
                    if stop_reason:
                        break
                remaining = request.timeout - (time.monotonic() - started - held)
                if remaining <= 0:
                    stop_reason = "timeout"
                    break
                ready, _, _ = select.select([pipe], [], [], min(1.0, remaining))
                if not ready:
                    stop_reason = monitor(None)
                    if stop_reason or process.poll() is not None:
                        break
                    continue
                chunk = pipe.read(65536)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = parse_event(line)
                    if event is None:
                        continue
                    if event["event"] == "phase":
                        now = time.monotonic()
                        run.phase_seconds[phase] = run.phase_seconds.get(phase, 0.0) + now - phase_started
                        phase, phase_started = event["phase"], now
                    if gate is not None and member is not None:
                        _gated(gate, member, event, run, turn_write)
                    _absorb(run, event)
                    stop_reason = monitor(event)
                    if stop_reason:
                        break
                if stop_reason:
                    break
    except BaseException:
        # Ctrl-C or an error here: the worker must not outlive this call, nor be waited for.
        _kill_group(process)
        process.wait()
        raise
    finally:
        if stop_reason:
            _kill_group(process)
        if gate is not None and member is not None:
            gate.release(member)
        returncode = _wait(process, request.timeout - (time.monotonic() - started - held))
        _kill_group(process)  # anything the worker left behind
        if gate is not None and member is not None:
            gate.leave(member)
            os.close(turn_write)
            run.paused_seconds = member.paused_seconds()
            run.measured_between = [member.measured[-1][0], member.measured[-1][1]] if member.measured else []
    run.phase_seconds[phase] = run.phase_seconds.get(phase, 0.0) + time.monotonic() - phase_started
    run.wall_seconds = time.monotonic() - started
    run.stderr_tail = _tail(stderr_path)
    if stop_reason == "timeout":
        run.state, run.reason = "failed", "timeout"
        run.message = f"the trial ran past its {request.timeout:.0f} s limit in phase '{phase}' and was killed"
    elif stop_reason:
        run.state, run.reason, run.message = "pruned", "pruned", stop_reason
    elif run.result and returncode == 0:
        run.state = "complete"
    elif not run.reason:
        run.state = "failed"
        if returncode == -signal.SIGKILL and oom_kills() > oom_kills_before:
            run.reason = "oom"
            run.message = (
                f"the worker was killed (SIGKILL) in phase '{phase}' while the kernel's out-of-memory killer "
                "ran (the oom_kill count in /proc/vmstat rose): likely out of memory"
            )
        elif returncode is not None and returncode < 0:
            run.reason = "crash"
            run.message = f"the worker died from signal {signal.Signals(-returncode).name} in phase '{phase}'"
            if returncode == -signal.SIGKILL:
                run.message += " (sent by another process; the kernel counted no out-of-memory kill)"
        else:
            run.reason = "crash"
            run.message = f"the worker exited with code {returncode} in phase '{phase}' without a result"
    return run


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
