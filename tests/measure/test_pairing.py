"""A search trial's two runs, cold and then warm, joined into the one run the study records; its paired windows."""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from autotune.measure.tasks._pairing import (
    CONTENDER_FLOOR,
    PAIRING_PRECISION,
    LiveReference,
    Paired,
    anchor_reference,
    joined_run,
    pair_windows,
    worth_more_pairs,
)
from autotune.trial.records import Window
from autotune.trial.request import TrialRun
from tests import fake_records

pytestmark = pytest.mark.parallel  # nothing here is timed


def first_run() -> TrialRun:
    return TrialRun(
        state="complete",
        result=fake_records.result(samples_per_second=30.0, batches_per_second=3.0),
        phase_seconds={"start": 3.0, "build": 1.0, "compile": 40.0, "settle": 1.0, "ready": 2.0},
        wall_seconds=47.0,
    )


def test_the_trial_keeps_its_first_run_s_compile_and_takes_the_restart_s_windows() -> None:
    restart = TrialRun(
        state="complete",
        windows=[fake_records.window(0.5), fake_records.window(0.4)],
        phase_seconds={"start": 3.0, "build": 1.0, "compile": 4.0, "settle": 1.0, "ready": 0.5, "measure": 2.0},
        wall_seconds=11.5,
        measured_between=[1.0, 2.0],
    )
    joined = joined_run(first_run(), restart)
    assert joined.state == "complete" and joined.result is not None and joined.result.samples_per_second == 30.0
    assert joined.windows == restart.windows and joined.measured_between == [1.0, 2.0]
    assert joined.phase_seconds["compile"] == 40.0, "the compile time is the cold one"
    assert joined.phase_seconds["restart"] == 9.5 and joined.phase_seconds["measure"] == 2.0
    assert joined.wall_seconds == 58.5


def test_a_restart_pruned_or_failed_makes_the_trial_so_and_says_where() -> None:
    pruned = joined_run(first_run(), TrialRun(state="pruned", reason="pruned", message="the median pruner stopped it"))
    assert (pruned.state, pruned.reason, pruned.message) == ("pruned", "pruned", "the median pruner stopped it")
    crashed = joined_run(first_run(), TrialRun(state="failed", reason="crash", message="exit -11", stderr_tail="boom"))
    assert (crashed.state, crashed.reason) == ("failed", "crash")
    assert crashed.message == "its warm restart, after a complete first run: exit -11" and crashed.stderr_tail == "boom"
    assert joined_run(first_run(), TrialRun(state="failed")).reason == "crash", "a failure without a reason is a crash"


class StandIn:
    """A live worker that answers every window in the next of `seconds` (100 samples each), and counts them."""

    def __init__(self, seconds: Iterator[float]) -> None:
        self.seconds = seconds
        self.run = SimpleNamespace(ready=fake_records.ready())
        self.request = None
        self.alive = True
        self.windows = 0

    def resume(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def passes_for(self, batches: int, window_seconds: float) -> int:
        return 1

    def window(self, index: int, start: int, batches: int, passes: int) -> Window:
        if index < 0:
            return fake_records.window(1.0, index=index)  # calibration: long enough to be taken at once
        self.windows += 1
        return fake_records.window(next(self.seconds), index=index)


def reference_of(seconds: Iterator[float]) -> LiveReference:
    return LiveReference(
        worker=StandIn(seconds),  # type: ignore[arg-type]
        samples_per_second=200.0,
        batches_per_second=20.0,
        batches_per_window=10,
    )


def noisy(ratio: float, spread: float, seed: int) -> Iterator[float]:
    """Window seconds of a subject `ratio` times as fast as one that takes 1 s, each off by a lognormal `spread`."""
    rng = random.Random(seed)
    while True:
        yield rng.lognormvariate(0.0, spread) / ratio


def test_a_contender_with_a_noisy_figure_gets_more_paired_windows_and_one_far_behind_or_quiet_does_not() -> None:
    steady = itertools.repeat(1.0)
    cases = {
        # (the trial's windows, the reference's): what each pairing measured
        "a contender on a noisy machine": (noisy(1.0, 0.1, 1), noisy(1.0, 0.1, 2)),
        "a trial far behind plain compile": (noisy(0.7, 0.1, 3), noisy(1.0, 0.1, 4)),
        "a contender on a quiet device": (noisy(1.1, 0.002, 5), steady),
    }
    counted = {}
    for name, (mine, theirs) in cases.items():
        trial = StandIn(mine)
        paired, why = pair_windows(
            trial,  # type: ignore[arg-type]
            reference_of(theirs),
            windows=5,
            rng=random.Random(0),
            more_windows=10,
            go_on=worth_more_pairs,
        )
        assert why is None, "ending the extra windows is no stop reason"
        assert paired.common_pairs == 5 and trial.windows == paired.pairs
        counted[name] = paired.pairs
        if paired.pairs < 15:
            assert not worth_more_pairs(paired)
    assert counted["a contender on a noisy machine"] > 5
    assert counted["a trial far behind plain compile"] == 5
    assert counted["a contender on a quiet device"] == 5


def measured_beside_a_steady_reference(spread: float, seed: int, more_windows: int) -> Paired:
    """A contender as fast as a steady reference, its windows off by a lognormal `spread`: its pairing."""
    paired, _ = pair_windows(
        StandIn(noisy(1.0, spread, seed)),  # type: ignore[arg-type]
        reference_of(itertools.repeat(1.0)),
        windows=5,
        rng=random.Random(0),
        more_windows=more_windows,
        go_on=worth_more_pairs,
    )
    return paired


def test_more_paired_windows_stop_once_the_figure_is_precise_or_at_the_limit() -> None:
    error = measured_beside_a_steady_reference(0.1, 7, more_windows=200).standard_error
    assert error is not None and error <= PAIRING_PRECISION < 0.1 / 5**0.5
    assert measured_beside_a_steady_reference(0.3, 8, more_windows=4).pairs == 9, "never past the limit"
    assert CONTENDER_FLOOR < 1.0


def test_a_pruned_contender_stops_where_it_was_pruned() -> None:
    said: list[int] = []

    def prune_at_seven(paired) -> str | None:
        said.append(paired.pairs)
        return "pruned" if paired.pairs == 7 else None

    paired, why = pair_windows(
        StandIn(noisy(1.0, 0.1, 9)),  # type: ignore[arg-type]
        reference_of(noisy(1.0, 0.1, 10)),
        windows=5,
        rng=random.Random(0),
        on_window=prune_at_seven,
        more_windows=10,
        go_on=lambda paired: True,
    )
    assert why == "pruned" and paired.pairs == 7 and said == list(range(1, 8))


def test_an_anchor_measures_until_its_level_is_precise_and_its_seconds_are_kept(monkeypatch) -> None:
    from autotune.measure.tasks import _pairing

    restarts = iter(range(100))

    @contextlib.contextmanager
    def restart(request, monitor, gate):
        worker = StandIn(noisy(1.0, 0.1, next(restarts)))
        worker.until_ready = lambda: True  # type: ignore[attr-defined]
        worker.end = lambda: None  # type: ignore[attr-defined]
        yield worker
        counted.append(worker.windows)

    counted: list[int] = []
    monkeypatch.setattr(_pairing, "live_worker", restart)
    reference = reference_of(noisy(1.0, 0.1, 50))
    for seed in range(3):
        assert anchor_reference(reference, windows=5, rng=random.Random(seed), more_windows=25) is not None
    assert len(reference.levels) == len(reference.anchor_seconds) == 3
    assert all(n > 5 for n in counted), f"a 10% window spread needs more than 5 paired windows for its level: {counted}"
