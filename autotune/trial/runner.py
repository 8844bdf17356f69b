"""Run one trial in a fresh worker process: isolated caches, one device, a hard timeout, a killed process group.

`run_trial` is the one-shot use of a `LiveWorker`: start it, let it get ready, end it with
one timed pass over the fresh stream. The parent reads the worker's JSON-lines events as they
come and may stop the trial at any event (pruning). Whatever happens, the worker's whole
process group is gone and its temporary folder removed when `run_trial` returns.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autotune.trial.forkserver import process_alive
from autotune.trial.gate import MeasurementGate
from autotune.trial.live import WORKDIR_PREFIX, EventMonitor, LiveWorker, oom_kills
from autotune.trial.request import TrialRequest, TrialRun

__all__ = [
    "WORKDIR_PREFIX",
    "EventMonitor",
    "device_turn",
    "live_worker",
    "oom_kills",
    "process_alive",
    "remove_abandoned_workdirs",
    "run_trial",
]


@contextlib.contextmanager
def live_worker(
    request: TrialRequest, monitor: EventMonitor | None = None, gate: MeasurementGate | None = None
) -> Iterator[LiveWorker]:
    """A started worker for `request`, killed with its process group if the block raises (Ctrl-C included).

    The one skeleton of every use of a worker: a one-shot run (`run_trial`), a search trial's
    cold run and its warm restart. The block ends the worker (`LiveWorker.end`) on its way out.
    """
    worker = LiveWorker(request, monitor, gate).start()
    try:
        yield worker
    except BaseException:
        worker.kill()
        raise


@contextlib.contextmanager
def device_turn(gate: MeasurementGate | None, worker: LiveWorker) -> Iterator[None]:
    """The device's measuring turn, held for the block, for a worker that shares its device with others."""
    member = worker.member if gate is not None else None
    if gate is not None and member is not None:
        gate.acquire(member)
    try:
        yield
    finally:
        if gate is not None and member is not None:
            gate.release(member)


def run_trial(
    request: TrialRequest, monitor: EventMonitor | None = None, gate: MeasurementGate | None = None
) -> TrialRun:
    """Run `request` in a fresh `python -m <request.program>` process (the worker) and collect what it reports.

    The worker compiles, checks and settles, then times one pass over the fresh stream. With a
    `gate`, the worker shares its device with others: it may be stopped while another measures,
    it takes the device's turn for its own stream pass, and its compile time and time limit
    leave the stops out (the monitor gets a "paused" event with the seconds each time they grow).
    """
    with live_worker(request, monitor, gate) as worker:
        if not worker.until_ready():
            return worker.end()
        with device_turn(gate, worker):
            return worker.end(stream=True)


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
