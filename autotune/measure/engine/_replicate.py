"""One replicate: subjects alive side by side, taking turns window by window on the same slices of the fresh stream.

Every subject of a group is started from its own warm cache folder, made ready and stopped
(nothing is timed then). Their processes start together and import side by side (Python, torch
and the workload's module take one core each), then hold; how many then go on at once to build,
compile and settle follows from the host's cores (`starts_at_once`): on a small CPU host one
after the other, since those steps overlapping there fight over the cores (OpenMP threads spin
while their partners are descheduled) and took twice as long as the same steps in a row. Then
the turns: a turn is every subject measuring one window, one after the other, on the turn's
slice of the stream while all the others stand stopped (SIGSTOP), so nothing else of ours runs
on its clock. The order inside a turn is a random permutation, and the next turn runs it
backwards (ABBA), so that drift during a pair of turns hits every subject alike and no subject
is always first. The parent waits on a pipe while a window runs: it reads nothing, draws nothing
and starts nothing meanwhile.

Which subjects may live together (`co_residence`) follows from the memory each one used in
its first run against what the machine has free: everything at once, pairs of a subject and
the reference, or one at a time; the campaign records which design ran.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.runtime.device import parse_device
from autotune.trial.events import MAX_PASSES
from autotune.trial.live import LiveWorker
from autotune.trial.records import ReadyReport, Window
from autotune.trial.request import TrialRequest, TrialRun
from autotune.trial.run_record import RunRecord

__all__ = [
    "DESIGNS",
    "Replicate",
    "ReplicatePlan",
    "batches_for",
    "take_turns",
    "turn_orders",
    "co_residence",
    "expected_replicate_seconds",
    "run_replicate",
    "starts_at_once",
]

DESIGNS = ("together", "pairs", "one at a time")
"""Who lives together in a replicate: every subject, a subject and the reference, or one subject alone."""
MEMORY_MARGIN = 1.25
"""Subjects live together only when their first runs' peak memory, times this, fits in what is free."""

WindowCallback = Callable[[str, int, Window], None]
"""Called after each window with the subject, the turn and the window's record."""


@dataclass
class Replicate:
    """How one replicate ran: its design, windows and slices, how long it took."""

    design: str
    """One of DESIGNS."""
    windows: int
    """Windows each subject measured (one per turn)."""
    batches_per_window: int
    """The slice of the stream one window covers, the same for every subject."""
    orders: list[list[str]] = field(default_factory=list)
    """The order of the subjects in each turn."""
    started: float = 0.0
    """When it started (seconds since the epoch)."""
    ready_seconds: float = 0.0
    """Seconds from starting each group's processes until all were ready, summed: the cost of a new replicate."""
    seconds: float = 0.0
    """Its whole wall time."""
    cold_seconds: float = 0.0
    """Seconds its subjects' cold compiles took before it (`CampaignRules.cold_compiles`; 0 without)."""
    loaded_cache: bool = False
    """A subject of it started from a saved compile-cache file, not its warm folder (`CacheProof`): its start-up
    compiled again what the file does not hold, so it is not what a later replicate's start-up costs."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "windows": self.windows,
            "batches_per_window": self.batches_per_window,
            "orders": self.orders,
            "started": round(self.started, 3),
            "ready_seconds": round(self.ready_seconds, 3),
            "seconds": round(self.seconds, 3),
            **({"cold_seconds": round(self.cold_seconds, 3)} if self.cold_seconds else {}),
            **({"loaded_cache": True} if self.loaded_cache else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Replicate:
        return cls(
            design=str(data.get("design", "together")),
            windows=int(data.get("windows", data.get("blocks", 0))),  # "blocks" in records written before the rename
            batches_per_window=int(data.get("batches_per_window", 0)),
            orders=[list(o) for o in data.get("orders", [])],
            started=float(data.get("started", 0.0)),
            ready_seconds=float(data.get("ready_seconds", 0.0)),
            seconds=float(data.get("seconds", 0.0)),
            cold_seconds=float(data.get("cold_seconds", 0.0)),
            loaded_cache=bool(data.get("loaded_cache", False)),
        )


@dataclass(frozen=True)
class ReplicatePlan:
    """What one replicate runs: who lives together, and how many windows of what length each subject measures."""

    groups: Sequence[Sequence[str]]
    """The subjects alive together, group by group (`co_residence`)."""
    design: str
    """One of DESIGNS."""
    windows: int
    """Windows each subject measures."""
    batches_per_window: int | Callable[[Mapping[str, ReadyReport]], int]
    """The slice of the stream a window covers, or how to choose it from the subjects' ready records."""
    window_seconds: float


def turn_orders(names: Sequence[str], turns: int, rng: random.Random) -> list[list[str]]:
    """The order of the subjects in each of `turns` turns: a random permutation, then the same backwards (ABBA), and so on."""
    orders: list[list[str]] = []
    while len(orders) < turns:
        forward = list(names)
        rng.shuffle(forward)
        orders += [forward, forward[::-1]]
    return orders[:turns]


def co_residence(
    names: Sequence[str], memory_mb: Mapping[str, float | None], free_mb: float | None, reference: str
) -> tuple[str, list[list[str]]]:
    """Which subjects live together: (design, groups), from their first runs' peak memory and the free memory.

    Unknown figures (a first run that did not say) count as fitting: the design is then 'together'.
    """

    def fits(group: Sequence[str]) -> bool:
        known = [memory_mb.get(n) for n in group]
        if free_mb is None or any(m is None for m in known):
            return True
        return sum(m or 0.0 for m in known) * MEMORY_MARGIN <= free_mb

    if fits(names):
        return "together", [list(names)]
    others = [n for n in names if n != reference]
    if reference in names and all(fits([reference, n]) for n in others):
        return "pairs", [[reference, n] for n in others]
    return "one at a time", [[n] for n in names]


def run_replicate(
    requests: Mapping[str, TrialRequest],
    groups: Sequence[Sequence[str]],
    *,
    design: str,
    windows: int,
    batches_per_window: int | Callable[[Mapping[str, ReadyReport]], int],
    window_seconds: float,
    rng: random.Random,
    on_window: WindowCallback | None = None,
) -> tuple[Replicate, dict[str, TrialRun], dict[str, TrialRun]]:
    """Run one replicate: each group's subjects alive together, as many windows each.

    Returns its record, each subject's run, and, where groups share a subject (the reference of
    the 'pairs' design), that subject's run in each other subject's group, under the other's
    name: the partner that subject's windows were paired with. The groups run in a random
    order, so that drift over the replicate lands on no subject in particular.

    `batches_per_window` may be a function of the subjects' ready events (chosen once the
    first group is ready, from how fast they ran their settle windows).
    """
    replicate = Replicate(design=design, windows=windows, batches_per_window=0, started=time.time())
    runs: dict[str, TrialRun] = {}
    partners: dict[str, TrialRun] = {}
    shared = set.intersection(*(set(g) for g in groups)) if len(groups) > 1 else set()
    groups = [list(g) for g in groups]
    rng.shuffle(groups)
    started = time.monotonic()
    for group in groups:
        group_started = time.monotonic()
        # Started in a random order: a process started first or last may keep an edge for its whole
        # life (memory placed first, a core of its own for a while), which must not always be one subject's.
        order = [name for name in group if name not in runs or name in shared]
        rng.shuffle(order)
        workers: dict[str, LiveWorker] = {}
        ended: dict[str, TrialRun] = {}
        try:
            ready = _make_ready(requests, order, workers, ended)
            replicate.ready_seconds += time.monotonic() - group_started
            rates = calibrate(workers)
            if not replicate.batches_per_window:
                chosen = batches_per_window(rates) if callable(batches_per_window) else batches_per_window
                replicate.batches_per_window = max(1, int(chosen))
            orders = turn_orders(list(workers), windows, rng)
            _turns(workers, ready, orders, replicate.batches_per_window, window_seconds, on_window)
            replicate.orders += orders
        finally:
            for name, worker in workers.items():
                ended[name] = worker.end()
        for name, run in ended.items():
            runs.setdefault(name, run)
            if name in shared:
                partners.update({other: run for other in group if other not in shared})
    replicate.seconds = time.monotonic() - started
    return replicate, runs, partners


def expected_replicate_seconds(
    firsts: Mapping[str, RunRecord | None], windows: int, window_seconds: float, *, starts_together: bool = False
) -> float:
    """A guess at one replicate's seconds before any has run, from each subject's first (cold) run.

    A warm start repeats what the caches do not hold: the process start and imports, dynamo's
    tracing and AOTAutograd (their parts of the first run's compile split), and two settle
    windows; then come the subject's `windows` windows. Without a split, a third of the first
    run's compile time stands for the warm compile.

    The processes of a replicate import side by side (`_make_ready`): `starts_together` counts
    the longest start once, the closer guess (a progress display's). Without it every start
    counts, the cautious guess a campaign plans its looks from: a look planned that the budget
    cannot reach costs power, one not planned costs nothing.
    """
    total, longest_start = 0.0, 0.0
    for record in firsts.values():
        phases = record.phase_seconds if record is not None else {}
        split = record.compile_split if record is not None else {}
        if split:
            warm = split.get("tracing", 0.0) + split.get("aot_autograd", 0.0)
        else:
            warm = (record.compile_seconds or 0.0) / 3 if record is not None else 0.0
        start = phases.get("start", 2.0)
        longest_start = max(longest_start, start)
        total += (0.0 if starts_together else start) + phases.get("build", 0.0) + warm + (2 + windows) * window_seconds
    return total + (longest_start if starts_together else 0.0)


def starts_at_once(device: str, cores: int | None = None) -> int:
    """How many subjects of a replicate start side by side: their start-ups must not fight over the cores.

    A warm start traces with dynamo and loads compiled graphs (mostly one Python thread), then
    runs settle windows, which on a CPU device use every core. So on a CPU device they start one
    at a time; beside a GPU each may have about four cores of the host (`Device.starts_at_once`).
    """
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return parse_device(device).starts_at_once(cores)


def _make_ready(
    requests: Mapping[str, TrialRequest],
    order: Sequence[str],
    workers: dict[str, LiveWorker],
    runs: dict[str, TrialRun],
) -> dict[str, ReadyReport]:
    """Start `order`'s workers into `workers`, each stopped once ready; a worker that fails is ended.

    All start at once but hold after their imports, which take one core each; then they are let
    go on a few at a time (`starts_at_once`) to build, compile and settle.
    """
    ready: dict[str, ReadyReport] = {}
    at_once = starts_at_once(requests[order[0]].device) if order else 1
    hold = len(order) > at_once
    for name in order:
        workers[name] = LiveWorker(requests[name]).start(hold=hold)
    if hold:
        for name in order:
            if not workers[name].until_held():
                runs[name] = workers.pop(name).end()
    order = [name for name in order if name in workers]
    for first in range(0, len(order), at_once):
        batch = order[first : first + at_once]
        for name in batch:
            if hold:
                workers[name].release()
        for name in batch:
            worker = workers[name]
            if worker.until_ready() and worker.run.ready is not None:
                ready[name] = worker.run.ready
                worker.pause()
            else:
                runs[name] = worker.end()
                del workers[name]
    return ready


WindowSeen = Callable[[str, int, Window | None], bool]
"""Hears each window with its subject and turn (None: that worker has stopped); True ends the turns."""


def take_turns(
    workers: Mapping[str, LiveWorker],
    orders: Sequence[Sequence[str]],
    *,
    stream: int,
    batches: int,
    passes: Mapping[str, int],
    seen: WindowSeen,
) -> None:
    """The one window loop: turn by turn, each worker in the turn's order measures one window, the others stopped.

    Every worker of a turn measures the same slice of the stream (`batches` batches from
    `turn * batches`, modulo the stream's `stream` batches), in `passes` passes of its own, so
    that each window lasts about as long; a worker is woken for its window and stopped again
    after it. A worker that has ended is not woken: `seen` hears None for it.
    """
    for turn, order in enumerate(orders):
        start = (turn * batches) % max(stream, 1)
        for name in order:
            worker = workers.get(name)
            window = None
            if worker is not None and worker.alive:
                worker.resume()
                window = worker.window(turn, start, batches, passes[name])
                worker.pause()
            if seen(name, turn, window):
                return


def _turns(
    workers: dict[str, LiveWorker],
    ready: Mapping[str, ReadyReport],
    orders: list[list[str]],
    batches: int,
    window_seconds: float,
    on_window: WindowCallback | None,
) -> None:
    """A replicate's windows: a subject that stops leaves the others to go on."""

    def seen(name: str, turn: int, window: Window | None) -> bool:
        if window is not None and on_window is not None:
            on_window(name, turn, window)
        return False

    take_turns(
        workers,
        orders,
        stream=min((r.stream_batches for r in ready.values()), default=0) or 1,
        batches=batches,
        passes={name: worker.passes_for(batches, window_seconds) for name, worker in workers.items()},
        seen=seen,
    )


CALIBRATION_SECONDS = 0.05
"""A calibration window lasts at least this long: long enough to time a step, short enough to cost nothing."""


def calibrate(workers: Mapping[str, LiveWorker]) -> dict[str, ReadyReport]:
    """Each subject's step rate, timed alone once all are ready (their settle windows ran beside others' start-ups).

    One short window per subject on the stream's first batches, the others stopped; it is not
    counted (its index is -1), and it also wakes the subject after its stop. The rate goes
    into a new ready record of the run (the worker's own is left as it said it), where the
    window's slice and passes are chosen from.
    """
    rates: dict[str, ReadyReport] = {}
    for name, worker in workers.items():
        ready = worker.run.ready
        if ready is None:
            continue  # not ready: nothing to calibrate (its run says why)
        worker.resume()
        count, passes = min(ready.stream_batches or 1, 8), 1
        window = None
        for _ in range(3):
            window = worker.window(-1, 0, count, passes)
            if window is None or window.seconds >= CALIBRATION_SECONDS:
                break
            passes = min(MAX_PASSES, passes * max(2, math.ceil(CALIBRATION_SECONDS / max(window.seconds, 1e-6))))
        worker.pause()
        if window is not None and window.seconds > 0:
            ready = replace(ready, batches_per_second=window.batches / window.seconds)
            worker.run.ready = ready
        rates[name] = ready
    return rates


def batches_for(window_seconds: float) -> Callable[[Mapping[str, ReadyReport]], int]:
    """A window's slice from the subjects' settle rates: as many batches as the slowest subject runs in that time.

    Faster subjects pass over the slice several times (`LiveWorker.passes_for`), so every
    window lasts about `window_seconds`.
    """

    def choose(ready: Mapping[str, ReadyReport]) -> int:
        rates = [r.batches_per_second for r in ready.values()]
        rates = [r for r in rates if r > 0]
        if not rates:
            return 1
        return max(1, math.ceil(window_seconds * min(rates)))

    return choose
