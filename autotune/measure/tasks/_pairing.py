"""Search-time figures paired with a warm plain torch.compile: what the pruner and the sampler see.

A search keeps one plain-compile worker alive per device: the reference. Every trial first
runs cold (its compile time, checks and a pass over the stream, which fills its cache folder),
then starts again warm from that folder, as each replicate of the confirmation will, and
takes turns with the reference (the engine's `take_turns`): in each turn the two measure one
window each on the same slice of the fresh stream (a paired window), each stopped while the
other runs, ABBA. A trial's figure is then a ratio to plain compile measured at the same
moments, which load on the machine does not bias, scaled by the reference's rate
(`LiveReference.samples_per_second`, which a search sets to the study's scale: the rate when
the study began) so that it reads as samples per second (`Paired.samples_per_second`). The
reference's windows start from the same slice for every trial; it has seen the stream before,
and so has the trial's cache: a new shape costs either side dynamo's tracing, not Inductor's
code generation, as it does in the confirmation.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.measure.engine import Harness, calibrate, take_turns, turn_orders
from autotune.measure.stats import t_quantile
from autotune.runtime.config import CompileConfig
from autotune.trial.gate import MeasurementGate
from autotune.trial.live import EventMonitor, LiveWorker
from autotune.trial.records import ReadyReport, Window
from autotune.trial.request import TrialRequest, TrialRun, window_figures
from autotune.trial.runner import device_turn, live_worker

__all__ = [
    "Paired",
    "LiveReference",
    "anchor_reference",
    "first_run",
    "joined_run",
    "measure_trial",
    "pair_windows",
    "restart_reference",
    "restart_request",
    "start_reference",
    "worth_more_pairs",
]

PairedWindowCallback = Callable[["Paired"], str | None]
"""Called after each paired window with the figures so far; a returned reason stops the trial (pruning)."""

MoreWindows = Callable[["Paired"], bool]
"""Asked after each paired window past the first `windows`: whether the pairing should go on (`worth_more_pairs`)."""

CONTENDER_FLOOR = 0.95
"""A trial whose anchored ratio to plain compile is at least this is a contender: it may be confirmed, so its figure must be as precise as the confirmation's."""

LEVEL_Z = statistics.NormalDist().inv_cdf(0.975)
"""How many of the anchors' standard errors their mean log ratio must lie from 0 for a reference's level to be taken out."""

PAIRING_PRECISION = 0.025
"""The standard error of a pairing's mean log ratio (about +/-5% at 95%) past which more windows add nothing worth their seconds."""


@dataclass
class LiveReference:
    """The live plain-compile worker of a device, the rate its ratios are scaled by, and its ratio to eager."""

    worker: LiveWorker
    samples_per_second: float
    """Plain compile's rate in the baseline session (one pass over the stream, recompiles included); a search puts
    the study's scale here, the rate of the session that began the study (`autotune.study.storage.adopt_scale`)."""
    batches_per_second: float
    batches_per_window: int
    """The slice of the stream a window covers, for every trial of the search."""
    window_seconds: float = 0.5
    """How long a window lasts, about: a fast subject passes over the slice more often."""
    over_eager: float | None = None
    """How many times faster than eager plain compile ran in the baseline session (paired), if eager ran."""
    levels: list[float] = field(default_factory=list)
    """Fresh warm restarts of plain compile, each paired with this worker: their ratios to it (`anchor_reference`)."""
    level_errors: list[float | None] = field(default_factory=list)
    """Each of `levels`' standard error of its mean window log ratio (None below two paired windows)."""
    paired_trials: int = 0
    """Trials paired with this worker so far."""
    anchors_started: int = 0
    anchor_seconds: list[float] = field(default_factory=list)
    """How long each anchor took, start-up to its last window: what an ETA counts per anchor ahead."""

    @property
    def measured_level(self) -> float:
        """How fast a fresh plain-compile process ran against this one: the geometric mean of `levels`, else 1."""
        return math.exp(statistics.fmean(math.log(x) for x in self.levels)) if self.levels else 1.0

    @property
    def level_error(self) -> float | None:
        """The standard error of the anchors' mean log ratio; None before any, or where one has no error of its own.

        Each anchor's own error is its windows' (`Paired.standard_error`); with two anchors or more,
        their spread about their mean, where larger, stands in for them.
        """
        errors = [e for e in self.level_errors if e is not None]
        if not self.levels or len(errors) != len(self.levels):
            return None
        error = math.sqrt(sum(e * e for e in errors)) / len(errors)
        if len(self.levels) >= 2:
            error = max(error, statistics.stdev(math.log(x) for x in self.levels) / math.sqrt(len(self.levels)))
        return error

    @property
    def level_band(self) -> float | None:
        """The half-width of the anchors' 95% band on their mean log ratio (`LEVEL_Z` errors); None without one."""
        error = self.level_error
        return LEVEL_Z * error if error is not None else None

    @property
    def level_decided(self) -> bool:
        """Whether the anchors tell this worker's level from 1: their mean log ratio outside `level_band`."""
        band = self.level_band
        return band is not None and abs(math.log(self.measured_level)) > band

    @property
    def level(self) -> float:
        """What a trial's ratio to plain compile is divided by: `measured_level` where it is decided, else 1.

        A process can settle at a level of its own, and every trial paired with this worker
        would share it; dividing by one factor keeps the trials' order and reads their ratios
        against plain compile as a fresh process runs it, as the confirmation measures. But an
        anchor is one short restart: measured, the references sat within the anchors' own noise,
        and dividing by two anchors would add their error to every trial's figure
        (`outputs/benchmarks/noise.md`, *Does the live reference sit at a level of its own?*).
        So the level is taken out only where the anchors decide it differs from 1.
        """
        return self.measured_level if self.level_decided else 1.0

    @property
    def anchoring_worth(self) -> bool:
        """Whether another anchor could still change a figure: before any anchor has read a level, or while the
        anchors so far read one at least half their band from 1 (decided, or one more anchor could decide it).

        Anchors that read their reference within their own noise change nothing (`level` stays 1), and in the
        recorded searches of the toy that was every anchor: each further one costs a warm restart and its windows.
        """
        band = self.level_band
        if not self.levels or band is None:
            return True
        return abs(math.log(self.measured_level)) > band / 2

    def anchor_due(self, every: int) -> bool:
        """Whether a new anchor is due: one before the first trial, then one more after each `every` trials for as
        long as they could change a figure (`anchoring_worth`)."""
        if self.anchors_started > self.paired_trials // every:
            return False
        if self.anchors_started and not self.anchoring_worth:
            return False
        self.anchors_started += 1
        return True

    def anchors_ahead(self, trials: int, every: int) -> int:
        """How many anchors `trials` more paired trials will start (`anchor_due`'s schedule), for an ETA."""
        if trials <= 0 or (self.anchors_started and not self.anchoring_worth):
            return 0
        last = self.paired_trials + trials - 1
        return max(last // every + 1 - self.anchors_started, 0)


@dataclass
class Paired:
    """A trial's windows beside the reference's, turn by turn, and what they say so far."""

    reference: LiveReference
    trial_windows: list[Window] = field(default_factory=list)
    reference_windows: list[Window] = field(default_factory=list)
    ready: ReadyReport | None = None
    """The trial's ready record: the stream its windows' figures are for."""
    common_pairs: int = 0
    """The paired windows every trial measures; past them, only a contender goes on (`worth_more_pairs`); 0: all are."""

    @property
    def pairs(self) -> int:
        """The windows of the trial's with one of the reference's beside them on the same slice: its paired windows."""
        return min(len(self.trial_windows), len(self.reference_windows))

    def _figures(self) -> tuple[dict[str, Any], dict[str, Any]]:
        n = self.pairs
        return window_figures(self.trial_windows[:n], self.ready), window_figures(
            self.reference_windows[:n], self.ready
        )

    @property
    def ratio(self) -> float | None:
        """How many times faster than plain compile the trial ran over the paired windows so far (same slices, same time)."""
        trial, reference = self._figures()
        if not trial.get("samples_per_second") or not reference.get("samples_per_second"):
            return None
        return float(trial["samples_per_second"]) / float(reference["samples_per_second"])

    def window_log_ratios(self) -> list[float]:
        """Each paired window's log ratio of the trial's rate to the reference's (samples per second)."""
        return [
            math.log((t.samples / t.seconds) / (r.samples / r.seconds))
            for t, r in zip(self.trial_windows, self.reference_windows, strict=False)
            if t.seconds > 0 and r.seconds > 0 and t.samples > 0 and r.samples > 0
        ]

    @property
    def standard_error(self) -> float | None:
        """The standard error of the mean window log ratio, or None below two paired windows."""
        logs = self.window_log_ratios()
        return statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) >= 2 else None

    @property
    def anchored_ratio(self) -> float | None:
        """The ratio to plain compile with the reference's own level taken out (`LiveReference.level`)."""
        ratio = self.ratio
        return ratio / self.reference.level if ratio is not None else None

    @property
    def batch_ratio(self) -> float | None:
        trial, reference = self._figures()
        if not trial.get("batches_per_second") or not reference.get("batches_per_second"):
            return None
        return float(trial["batches_per_second"]) / float(reference["batches_per_second"])

    @property
    def samples_per_second(self) -> float | None:
        """The trial's rate on the reference's scale (`LiveReference.samples_per_second`): ratio times that rate."""
        ratio = self.ratio
        return ratio * self.reference.samples_per_second if ratio is not None else None

    @property
    def batches_per_second(self) -> float | None:
        ratio = self.batch_ratio
        return ratio * self.reference.batches_per_second if ratio is not None else None

    @property
    def over_eager(self) -> float | None:
        """The trial's ratio to eager, through plain compile's paired ratio to eager."""
        ratio = self.ratio
        if ratio is None or self.reference.over_eager is None:
            return None
        return ratio * self.reference.over_eager

    def over_eager_at_most(self, confidence: float) -> float | None:
        """The one-sided `confidence` upper bound of the trial's ratio to eager, or None below two paired windows.

        From the paired windows' mean log ratio and its standard error, with Student's t on their
        degrees of freedom: two windows that disagree, as windows do beside a process that takes
        the machine, say little, and the bound stays wide until more windows agree.
        """
        logs = self.window_log_ratios()
        error = self.standard_error
        if error is None or self.reference.over_eager is None:
            return None
        upper = statistics.fmean(logs) + t_quantile(confidence, len(logs) - 1) * error
        return math.exp(upper) * self.reference.over_eager

    def figures(self) -> dict[str, Any]:
        """What a trial records of its pairing."""
        return {
            "paired_ratio": round(self.ratio, 4) if self.ratio is not None else None,
            "reference_level": round(self.reference.level, 4),
            "reference_anchors": len(self.reference.levels),
            "paired_windows": self.pairs,
            "reference_samples_per_second": round(self.reference.samples_per_second, 4),
        }


def worth_more_pairs(paired: Paired) -> bool:
    """Whether a pairing past its first windows should go on: a contender whose figure is not yet precise.

    Five paired windows leave a trial's ratio imprecise (a window's rate varies from one window to the
    next, `outputs/benchmarks/noise.md`): enough to tell a trial far behind plain compile,
    not to rank the ones near the top as their confirmation will. A trial at `CONTENDER_FLOOR`
    or better goes on until its standard error is `PAIRING_PRECISION` or less; a quiet device
    gets there in its first windows and pays nothing.
    """
    ratio = paired.anchored_ratio
    return ratio is not None and ratio >= CONTENDER_FLOOR and _imprecise(paired)


def pair_windows(
    trial: LiveWorker,
    reference: LiveReference,
    *,
    windows: int,
    rng: random.Random,
    on_window: PairedWindowCallback | None = None,
    more_windows: int = 0,
    go_on: MoreWindows | None = None,
) -> tuple[Paired, str | None]:
    """`windows` windows of a ready trial, each beside one of the reference on the same slice; (figures, stop reason).

    Both workers are stopped while the other measures, in the engine's one window loop
    (`take_turns`): one window of each per turn, ABBA, each pair of turns in a random order
    (`turn_orders`), and the slices start from the stream's beginning for every trial. Up to
    `more_windows` more follow while `go_on` says so (`worth_more_pairs`); ending there is no
    stop reason.
    """
    calibrate({"trial": trial})  # its step rate, timed alone: what its windows' passes follow
    paired = Paired(reference=reference, ready=trial.run.ready, common_pairs=windows)
    batches = reference.batches_per_window
    workers = {"trial": trial, "reference": reference.worker}
    stopped: list[str | None] = []

    def seen(who: str, turn: int, window: Window | None) -> bool:
        if window is None:
            stopped.append(None if who == "trial" else "the plain torch.compile reference stopped")
            return True
        (paired.trial_windows if who == "trial" else paired.reference_windows).append(window)
        if len(paired.trial_windows) != turn + 1 or len(paired.reference_windows) != turn + 1:
            return False
        if on_window is not None and (why := on_window(paired)):
            stopped.append(why)
            return True
        return turn + 1 >= windows and (go_on is None or not go_on(paired))

    take_turns(
        workers,
        turn_orders(list(workers), windows + more_windows, rng),
        stream=(trial.run.ready.stream_batches if trial.run.ready is not None else 0) or 1,
        batches=batches,
        passes={who: worker.passes_for(batches, reference.window_seconds) for who, worker in workers.items()},
        seen=seen,
    )
    return paired, stopped[0] if stopped else None


def measure_trial(
    request: TrialRequest,
    *,
    monitor: EventMonitor | None,
    on_window: PairedWindowCallback | None,
    gate: MeasurementGate | None,
    reference: LiveReference | None,
    windows: int,
    rng: random.Random,
    restart_monitor: EventMonitor | None = None,
    more_windows: int = 0,
) -> tuple[TrialRun, Paired | None]:
    """A search trial as the confirmation will see it; (its run, its paired figures).

    Its first, cold run compiles, checks and settles, then passes once over the whole stream:
    its compile time, its failures and its first-run figures, and a cache folder that holds
    every shape of the stream. Then a warm restart from that folder, a new process as each
    replicate of the confirmation starts, measures `windows` windows paired with the reference:
    the figure the pruner and the sampler see. A first run may be slower than the same
    configuration's warm restarts by several percent (`outputs/benchmarks/noise.md`), which
    would rank trials by a figure the confirmation does not measure.

    `monitor` watches the cold run (the compile budget), `restart_monitor` the restart. A
    worker that shares its device holds the device's turn while it measures. Without a
    reference (both baselines failed) there is nothing to pair with: the first run is the trial.
    """
    first = first_run(request, monitor, gate)
    if reference is None or first.state != "complete":
        return first, None
    with live_worker(restart_request(request), restart_monitor, gate) as worker:
        paired: Paired | None = None
        if worker.until_ready():
            with device_turn(gate, worker):
                paired, why = pair_windows(
                    worker,
                    reference,
                    windows=windows,
                    rng=rng,
                    on_window=on_window,
                    more_windows=more_windows,
                    go_on=worth_more_pairs,
                )
            if why:
                worker.stop(why)
        return joined_run(first, worker.end()), paired


def anchor_reference(
    reference: LiveReference,
    *,
    windows: int,
    rng: random.Random,
    gate: MeasurementGate | None = None,
    more_windows: int = 0,
) -> float | None:
    """A fresh warm restart of plain compile paired with the reference: its ratio, kept in `reference.levels`.

    The restart starts from the reference's own cache folder, as a replicate of the confirmation
    starts plain compile, and measures `windows` windows beside it as a trial would, then up to
    `more_windows` more until its standard error is `PAIRING_PRECISION`: every trial's ratio is
    divided by what the anchors say. None when it did not get ready or its pairing stopped.
    """
    started = time.monotonic()
    with live_worker(reference.worker.request, None, gate) as worker:
        ratio, error = None, None
        if worker.until_ready():
            with device_turn(gate, worker):
                paired, why = pair_windows(
                    worker, reference, windows=windows, rng=rng, more_windows=more_windows, go_on=_imprecise
                )
            if why is None:
                ratio, error = paired.ratio, paired.standard_error
        worker.end()
    reference.anchor_seconds.append(time.monotonic() - started)
    if ratio:
        reference.levels.append(ratio)
        reference.level_errors.append(error)
    return ratio


def _imprecise(paired: Paired) -> bool:
    """Whether the pairing's standard error is still above `PAIRING_PRECISION` (False below two paired windows)."""
    error = paired.standard_error
    return error is not None and error > PAIRING_PRECISION


def first_run(request: TrialRequest, monitor: EventMonitor | None, gate: MeasurementGate | None) -> TrialRun:
    """The trial's cold run: ready, then one pass over the stream, holding the device's turn while it passes."""
    with live_worker(request, monitor, gate) as worker:
        if worker.until_ready():
            with device_turn(gate, worker):
                worker.stream()
        return worker.end()


def restart_request(request: TrialRequest) -> TrialRequest:
    """The request of a warm restart after `request`'s first run: the same code, from the same cache folder.

    It checks its first steps against what eager computed in the first run (`autotune.trial.recorded`), as a
    replicate of the confirmation does, rather than running eager's reference again: what it loads from the folder
    is not what the first run compiled, and a fault there fails it by name ("a run started from the
    configuration's warm cache folder").
    """
    protocol = {**request.protocol, "check_accuracy": False}
    return replace(request, save_cache_path=None, load_cache_path=None, protocol=protocol)


def joined_run(first: TrialRun, restart: TrialRun) -> TrialRun:
    """The trial's run: its first run's compile, checks and stream pass, with the restart's windows and outcome.

    A restart pruned or failed makes the trial so, its message saying where; its seconds are
    counted under `restart` (start-up to ready, its check of its first steps included, which
    `restart_check_seconds` keeps apart) and `measure` (the paired windows).
    """
    joined = replace(first, windows=list(restart.windows), measured_between=list(restart.measured_between))
    joined.restart_check_seconds = restart.compiled.check_seconds if restart.compiled is not None else 0.0
    joined.phase_seconds = dict(first.phase_seconds)
    phases = dict(restart.phase_seconds)
    joined.phase_seconds["measure"] = phases.pop("measure", 0.0)
    joined.phase_seconds["restart"] = sum(phases.values())
    joined.paused_seconds = first.paused_seconds + restart.paused_seconds
    joined.wall_seconds = first.wall_seconds + restart.wall_seconds
    if restart.state == "pruned":
        joined.state, joined.reason, joined.message = restart.state, restart.reason, restart.message
    elif restart.state != "complete":
        joined.state, joined.reason = "failed", restart.reason or "crash"
        joined.message = f"its warm restart, after a complete first run: {restart.message}".rstrip(": ")
        joined.stderr_tail = restart.stderr_tail
    return joined


def restart_reference(reference: LiveReference) -> LiveReference | None:
    """A new warm restart of a reference whose worker ended, from the cache folder it compiled into, with the same
    rates (the study's scale) and none of the old process's levels; None when it does not get ready either."""
    worker = LiveWorker(reference.worker.request, serving=True).start()
    if not worker.until_ready():
        worker.end()
        return None
    worker.pause()
    return dataclasses.replace(
        reference, worker=worker, levels=[], level_errors=[], paired_trials=0, anchors_started=0, anchor_seconds=[]
    )


def start_reference(harness: Harness, like: LiveReference, cache_dir: str) -> LiveReference:
    """A reference for another device: plain compile's first run there, then its warm restart, with the first's figures."""
    request = harness.request(CompileConfig(), cache_dir=cache_dir)
    first_run(request, None, None)
    worker = LiveWorker(restart_request(request), serving=True).start()
    worker.until_ready()
    worker.pause()
    return LiveReference(
        worker=worker,
        samples_per_second=like.samples_per_second,
        batches_per_second=like.batches_per_second,
        batches_per_window=like.batches_per_window,
        window_seconds=like.window_seconds,
        over_eager=like.over_eager,
    )
