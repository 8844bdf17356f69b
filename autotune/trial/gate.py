"""Exclusive measurement for trial processes that share a device: one measures, the others stand still.

Workers on one device compile side by side, but a clock is only honest when nothing else
runs. The parent of a worker that is ready to measure asks the gate for the device's turn
and waits while another worker of the device measures; once it has the turn, every other
worker of the device is stopped (SIGSTOP to its process group, which holds Inductor's
compile workers too) until the measurement ends (SIGCONT). Each member keeps the intervals it spent
stopped, so that its compile time and its time limits can leave them out, and the times it
ran, so that a compile that ran beside another one can be marked as such.

On a GPU a stopped process's queued kernels would still run on the measuring worker's clock. So a
worker that said it can be paused (`Member.pausable`) on a device where pausing must be quiet is
asked first: it gets SIGTSTP, whose handler in the worker synchronises the device and answers on
its pause pipe; then its group is stopped. It keeps the allocator's cached blocks: each worker of a
shared GPU is held to its share of the memory, and blocks released there were allocated again
inside the first window timed after the pause. A worker that does not answer within
QUIET_SECONDS (a long C call) is stopped all the same.

A worker that ran out of memory beside others is run again alone (`alone`): while one thread
holds a device alone, no new worker is admitted there, and it waits for the others to leave.

A parent that is killed cannot continue or end the workers it stopped, so every member is
registered with the process's guard (`autotune.trial.guard`), which kills its process group
once the parent's end of its pipe closes, however the parent died.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from autotune.runtime.device import parse_device
from autotune.trial.guard import process_guard

__all__ = ["QUIET_SECONDS", "GateClosed", "Member", "MeasurementGate", "overlap_seconds", "quiet_on_gpus"]

QUIET_SECONDS = 3.0
"""How long a pausable worker is given to synchronise and release its cached memory before it is stopped anyway."""

Interval = tuple[float, float]
"""(start, end) in seconds since the epoch (time.time())."""


class GateClosed(Exception):
    """The gate was closed (the search is stopping) while a member waited for its turn."""


@dataclass
class Member:
    """One worker process at the gate: its process group, its device, and when it ran or stood still."""

    pgid: int
    device: str
    joined: float = field(default_factory=time.time)
    left: float | None = None
    paused: list[Interval] = field(default_factory=list)
    """Intervals this worker was stopped for another worker's measurement."""
    paused_since: float | None = None
    measured: list[Interval] = field(default_factory=list)
    """Intervals this worker held the turn."""
    waited: float = 0.0
    """Seconds this worker waited for its turn."""
    pausable: bool = False
    """The worker has its pause handler (it said so): it can be asked to go quiet before it is stopped."""
    answers: int | None = None
    """The read end of the worker's pause pipe, on which its handler answers SIGTSTP (None: it has none)."""
    quiet_pauses: int = 0
    """Pauses before which the worker answered that it had gone quiet."""
    late_pauses: int = 0
    """Pauses for which it did not answer within QUIET_SECONDS and was stopped all the same."""

    def paused_seconds(self, now: float | None = None) -> float:
        """Seconds stopped so far, a pause still going on included."""
        ongoing = (now or time.time()) - self.paused_since if self.paused_since is not None else 0.0
        return sum(end - start for start, end in self.paused) + ongoing

    def running(self, now: float | None = None) -> list[Interval]:
        """The intervals this worker was alive and not stopped."""
        end = self.left if self.left is not None else (now or time.time())
        pauses = sorted([*self.paused, *([(self.paused_since, end)] if self.paused_since is not None else [])])
        pieces: list[Interval] = []
        start = self.joined
        for pause_start, pause_end in pauses:
            if pause_start > start:
                pieces.append((start, min(pause_start, end)))
            start = max(start, pause_end)
        if start < end:
            pieces.append((start, end))
        return pieces


def overlap_seconds(intervals: list[Interval], span: Interval) -> float:
    """Seconds of `span` covered by `intervals` (which do not overlap one another)."""
    low, high = span
    return sum(max(0.0, min(end, high) - max(start, low)) for start, end in intervals)


def quiet_on_gpus(device: str) -> bool:
    """Whether a worker of `device` is asked to go quiet before it is stopped: on GPUs, whose queued work and
    cached memory a stopped process keeps (`Device.quiet_before_stop`)."""
    return parse_device(device).quiet_before_stop


class MeasurementGate:
    """The turn to measure, one per device, shared by the threads that run the workers of one search."""

    def __init__(self, quiet: Callable[[str], bool] = quiet_on_gpus) -> None:
        self._condition = threading.Condition()
        self._members: list[Member] = []
        self._holders: dict[str, Member] = {}
        self._alone: dict[str, int] = {}
        """Device -> the thread that holds it alone."""
        self._quiet = quiet
        self._closed = False
        self.history: list[Member] = []
        """Every member that ever joined, in order: the pool's record of who measured and compiled when."""

    # -- membership ------------------------------------------------------------------------------

    def admit(self, device: str) -> None:
        """Wait while another thread holds `device` alone (see `alone`); call before starting a worker there."""
        me = threading.get_ident()
        with self._condition:
            while self._alone.get(device, me) != me and not self._closed:
                self._condition.wait(timeout=0.5)
            if self._closed:
                raise GateClosed("the search is stopping")

    @contextlib.contextmanager
    def alone(self, device: str) -> Iterator[None]:
        """Hold `device` alone: no worker of another thread is admitted there, and those there have left.

        For a run that failed beside other workers for want of memory: run again alone, it says
        whether the configuration itself does not fit.
        """
        me = threading.get_ident()
        with self._condition:
            while self._alone.get(device, me) != me and not self._closed:
                self._condition.wait(timeout=0.5)
            self._alone[device] = me
            while any(m.device == device for m in self._members) and not self._closed:
                self._condition.wait(timeout=0.5)
            if self._closed:
                self._alone.pop(device, None)
                raise GateClosed("the search is stopping")
        try:
            yield
        finally:
            with self._condition:
                self._alone.pop(device, None)
                self._condition.notify_all()

    def join(self, pgid: int, device: str) -> Member:
        """Register a worker's process group; it is stopped at once while another worker of its device measures."""
        member = Member(pgid=pgid, device=device)
        with self._condition:
            process_guard().register(pgid)
            self._members.append(member)
            self.history.append(member)
            holder = self._holders.get(device)
            if self._closed:
                _signal(pgid, signal.SIGKILL)
            elif holder is not None:
                self._pause(member)
        return member

    def leave(self, member: Member) -> None:
        """The worker's process group is gone: give up its turn, if it held one, and forget it."""
        with self._condition:
            if self._holders.get(member.device) is member:
                self._end_turn(member)
            if member.paused_since is not None:
                member.paused.append((member.paused_since, time.time()))
                member.paused_since = None
            member.left = time.time()
            with contextlib.suppress(ValueError):
                self._members.remove(member)
            process_guard().forget(member.pgid)
            self._condition.notify_all()  # a thread waiting to hold the device alone

    # -- turns -----------------------------------------------------------------------------------

    def acquire(self, member: Member) -> None:
        """Wait for the device's turn, then stop the device's other workers. Raises GateClosed when the gate closes."""
        asked = time.time()
        with self._condition:
            while self._holders.get(member.device) is not None and not self._closed:
                self._condition.wait(timeout=0.5)
            if self._closed:
                raise GateClosed("the search is stopping")
            member.waited += time.time() - asked
            self._holders[member.device] = member
            member.measured.append((time.time(), time.time()))
            for other in self._members:
                if other is not member and other.device == member.device:
                    self._pause(other)

    def release(self, member: Member) -> None:
        """End the member's turn, if it holds one: the device's other workers continue."""
        with self._condition:
            if self._holders.get(member.device) is member:
                self._end_turn(member)

    def beside(self, member: Member, span: Interval) -> float:
        """Seconds of `span` during which `member` ran while another worker of its device ran too (not stopped)."""
        with self._condition:
            others = [m for m in self.history if m is not member and m.device == member.device]
            now = time.time()
            concurrent = 0.0
            for start, end in member.running(now):
                piece = (max(start, span[0]), min(end, span[1]))
                if piece[0] < piece[1]:
                    concurrent += max((overlap_seconds(o.running(now), piece) for o in others), default=0.0)
            return concurrent

    def close(self) -> None:
        """Kill every member's process group (stopped or not) and refuse further turns."""
        with self._condition:
            self._closed = True
            for member in self._members:
                _signal(member.pgid, signal.SIGKILL)
            self._condition.notify_all()

    def __enter__(self) -> MeasurementGate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inside the lock -------------------------------------------------------------------------

    def _end_turn(self, member: Member) -> None:
        start, _ = member.measured[-1]
        member.measured[-1] = (start, time.time())
        del self._holders[member.device]
        for other in self._members:
            if other.paused_since is not None and other.device == member.device:
                _signal(other.pgid, signal.SIGCONT)
                other.paused.append((other.paused_since, time.time()))
                other.paused_since = None
        self._condition.notify_all()

    def _pause(self, member: Member) -> None:
        if member.paused_since is None:
            member.paused_since = time.time()
            if member.pausable and member.answers is not None and self._quiet(member.device):
                if _go_quiet(member.pgid, member.answers):
                    member.quiet_pauses += 1
                else:
                    member.late_pauses += 1
            _signal(member.pgid, signal.SIGSTOP)


def _go_quiet(pid: int, answers: int) -> bool:
    """Ask the worker `pid` to finish its device's queued work; whether it answered in time."""
    with contextlib.suppress(BlockingIOError, OSError):
        while os.read(answers, 64):  # answers to earlier asks that came late
            pass
    try:
        os.kill(pid, signal.SIGTSTP)
    except (ProcessLookupError, PermissionError):
        return False
    readable, _, _ = select.select([answers], [], [], QUIET_SECONDS)
    if not readable:
        return False
    with contextlib.suppress(BlockingIOError, OSError):
        os.read(answers, 64)
    return True


def _signal(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
