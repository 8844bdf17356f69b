"""The measurement gate: workers of one device measure one at a time, the others stopped; nothing outlives a search.

The trial processes here are `tests.trial_targets.gated`, which "compile" and "measure" by
the clock, so that the gate's rules are checked in seconds rather than real compiles.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from autotune.trial.gate import GateClosed, MeasurementGate, Member, overlap_seconds
from autotune.trial.live import WORKDIR_PREFIX
from autotune.trial.records import Compiled, Event
from autotune.trial.request import TrialRequest, TrialRun
from autotune.trial.runner import remove_abandoned_workdirs, run_trial
from tests.processes import alive, children, command_line, state

PROGRAM = "tests.trial_targets.gated"


def _request(
    folder: Path, compile_seconds: float, measure_seconds: float, device: str = "cpu", flags: str = ""
) -> TrialRequest:
    folder.mkdir(parents=True, exist_ok=True)
    return TrialRequest(
        spec=f"{compile_seconds},{measure_seconds},{folder}{flags}", source=None, program=PROGRAM, device=device,
        timeout=120,
    )  # fmt: skip


def _run_together(
    requests: list[TrialRequest], gate: MeasurementGate, seen: dict[int, list[float]] | None = None
) -> list[TrialRun]:
    """Run the requests side by side; `seen` gets, per request, the compile seconds its monitor was told."""
    runs: list[TrialRun | None] = [None] * len(requests)

    def one(index: int) -> None:
        told = seen.setdefault(index, []) if seen is not None else []

        def monitor(event: Event | None) -> None:
            if event is not None and isinstance(event.record, Compiled):
                told.append(event.record.compile_seconds)

        runs[index] = run_trial(requests[index], monitor=monitor, gate=gate)

    threads = [threading.Thread(target=one, args=(index,)) for index in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(run is not None for run in runs)
    return runs  # type: ignore[return-value]


def _ticks(folder: Path) -> dict[int, list[float]]:
    """Each fake worker's compile ticks, by pid."""
    return {
        int(path.name.split("-")[1]): [float(line) for line in path.read_text().split()]
        for path in folder.glob("ticks-*")
    }


def _measured(folder: Path) -> list[tuple[float, float]]:
    """Each fake worker's measurement, (start, end), in order."""
    spans = [path.read_text().split() for path in folder.glob("measured-*")]
    return sorted((float(start), float(end)) for start, end in spans)


@pytest.mark.parallel  # waits on no clock
def test_intervals_overlap_and_a_member_runs_between_its_pauses() -> None:
    assert overlap_seconds([(0.0, 1.0), (2.0, 3.0)], (0.5, 2.5)) == pytest.approx(1.0)
    assert overlap_seconds([(0.0, 1.0)], (1.0, 2.0)) == 0.0
    member = Member(pgid=1, device="cpu", joined=10.0, left=20.0, paused=[(12.0, 13.0), (15.0, 16.5)])
    assert member.running() == [(10.0, 12.0), (13.0, 15.0), (16.5, 20.0)]
    assert member.paused_seconds() == pytest.approx(2.5)


def test_workers_of_one_device_measure_one_at_a_time_while_the_others_stand_still(tmp_path: Path) -> None:
    # Three workers; each finishes compiling at another time, so each measures while others still compile.
    requests = [_request(tmp_path, seconds, 1.0) for seconds in (0.3, 1.0, 1.6)]
    told: dict[int, list[float]] = {}
    with MeasurementGate() as gate:
        runs = _run_together(requests, gate, told)
    assert [run.state for run in runs] == ["complete"] * 3, [(run.reason, run.message, run.stderr_tail) for run in runs]
    measured = _measured(tmp_path)
    assert len(measured) == len(runs)
    for (_, end), (start, _) in zip(measured, measured[1:], strict=False):
        assert end <= start, f"two measurements overlapped: {measured}"
    # No other worker ticked while one measured: they were stopped (10 ms ticks; 50 ms of slack at the edges).
    ticks = _ticks(tmp_path)
    for start, end in measured:
        busy = [pid for pid, times in ticks.items() if any(start + 0.05 < t < end - 0.05 for t in times)]
        assert not busy, f"workers {busy} ran during a measurement {start:.2f}-{end:.2f}"
    # The later workers stood still during the first measurement; their compile time leaves that out.
    stops = [run.compile_stops for run in runs]
    assert all(stop is not None for stop in stops), "every worker shared the device"
    paused = [stop for stop in stops if stop is not None and stop.compile_paused_seconds > 0.5]
    assert paused, stops
    for run, request in zip(runs, requests, strict=True):
        assert run.compiled is not None and run.compile_stops is not None
        span, stop = run.compiled.compile_span, run.compile_stops
        # What the worker saw of itself: its ticks, and where they stopped for a while (a stop, not a busy machine's
        # delay, which is a few ms). On a busy machine both its compile time and its ticks' span stretch alike.
        times = min(ticks.values(), key=lambda t: abs(t[0] - span[0]) + abs(t[-1] - span[1]))  # its own
        stood = sum(b - a for a, b in zip(times, times[1:], strict=False) if b - a > 0.5)
        assert stop.compile_paused_seconds == pytest.approx(stood, abs=0.3), (stop, stood)
        assert stop.compile_seconds == pytest.approx(times[-1] - times[0] - stood, abs=0.3), (stop, times[0], stood)
        assert stop.compile_seconds == pytest.approx(span[1] - span[0] - stop.compile_paused_seconds, abs=0.05)
        assert stop.compile_concurrent_seconds > 0, "every worker compiled beside another"
        assert run.record().compile_seconds == stop.compile_seconds
        # The compile budget is judged on the same figure: a worker stood still is not over budget for it.
        assert told[requests.index(request)] == [stop.compile_seconds]
    assert any(run.record().paused_seconds for run in runs)


def test_workers_of_different_devices_never_stop_each_other(tmp_path: Path) -> None:
    # Each measures until the other measures too, however long each took to start: at the same time, unless one
    # was stopped until the other had ended (then the first gives up after 30 s, and they do not overlap).
    requests = [
        _request(tmp_path, 0.2, 30.0, device="cuda:0", flags=",together"),
        _request(tmp_path, 0.6, 30.0, device="cuda:1", flags=",together"),
    ]
    with MeasurementGate() as gate:
        runs = _run_together(requests, gate)
    assert [run.state for run in runs] == ["complete"] * 2, [run.stderr_tail for run in runs]
    assert all(not run.paused_seconds for run in runs)
    (a_start, a_end), (b_start, b_end) = _measured(tmp_path)
    assert b_start < a_end, "each device has its own turn: the two measured at the same time"


def test_a_stopped_worker_is_continued_and_its_time_limit_leaves_the_stop_out(tmp_path: Path) -> None:
    # The second worker's whole run (starting, 1.5 s of compile, 0.5 s of measuring) fits its limit, twice what
    # it takes alone on this machine, only if the time it stands still during the first worker's longer
    # measurement does not count.
    alone = run_trial(_request(tmp_path / "alone", 1.5, 0.5))
    assert alone.state == "complete", alone.message
    limit = 2 * alone.wall_seconds + 1.0
    first = _request(tmp_path, 0.1, limit + 1.0)
    second = TrialRequest(spec=f"1.5,0.5,{tmp_path}", source=None, program=PROGRAM, timeout=limit)
    with MeasurementGate() as gate:
        runs = _run_together([first, second], gate)
    assert runs[1].state == "complete", (runs[1].reason, runs[1].message)
    assert runs[1].paused_seconds > limit - alone.wall_seconds
    assert runs[1].wall_seconds > limit


_PARENT = textwrap.dedent(
    """
    import sys, threading
    from autotune.trial.gate import MeasurementGate
    from autotune.trial.request import TrialRequest
    from autotune.trial.runner import run_trial
    folder = sys.argv[1]
    gate = MeasurementGate()
    for spec in (f"0.1,600,{folder}", f"600,1,{folder}"):
        request = TrialRequest(spec=spec, source=None, program="tests.trial_targets.gated", timeout=900)
        threading.Thread(target=run_trial, args=(request,), kwargs={"gate": gate}, daemon=True).start()
    threading.Event().wait()
    """
)


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _started_by(parent: int, program: str) -> list[int]:
    """Live children of `parent` running `program` (a module run with -m)."""
    return [pid for pid in children(parent) if any(program in part for part in command_line(pid)) and alive(pid)]


def _start_parent(folder: Path) -> tuple[subprocess.Popen, int, int]:
    """A search stand-in with one worker measuring for 600 s and one stopped meanwhile: (parent, measuring, stopped).

    The second worker may be stopped before it has run a line (it joined while the first measured).
    """
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(folder)], start_new_session=True)
    _wait_for(lambda: len(_started_by(parent.pid, PROGRAM)) == 2, 60, "the two workers never started")
    workers = _started_by(parent.pid, PROGRAM)
    _wait_for(lambda: any(state(pid) == "T" for pid in workers), 30, "neither worker was ever stopped")
    stopped = next(pid for pid in workers if state(pid) == "T")
    measuring = next(pid for pid in workers if pid != stopped)
    return parent, measuring, stopped


def test_a_killed_search_leaves_no_worker_behind_not_even_a_stopped_one(tmp_path: Path) -> None:
    parent, measuring, stopped = _start_parent(tmp_path)
    (guard,) = _started_by(parent.pid, "autotune.trial.guard")
    parent.kill()
    parent.wait()
    _wait_for(lambda: not alive(measuring) and not alive(stopped), 10, "a worker outlived the killed search")
    _wait_for(lambda: not alive(guard), 10, "the guard outlived its work")
    # Its run folders stay behind, as a killed process leaves them; the next search removes them (and so does this).
    left = list(Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}{parent.pid}-*"))
    assert len(left) == 2, left
    assert remove_abandoned_workdirs() >= 2
    assert not any(folder.exists() for folder in left)


@pytest.mark.parallel  # waits on no clock
def test_closing_the_gate_kills_every_worker_and_refuses_turns(tmp_path: Path) -> None:
    gate = MeasurementGate()
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    member = gate.join(sleeper.pid, "cpu")
    gate.close()
    assert sleeper.wait(timeout=10) == -signal.SIGKILL
    with pytest.raises(GateClosed, match="stopping"):
        gate.acquire(member)
    gate.leave(member)
