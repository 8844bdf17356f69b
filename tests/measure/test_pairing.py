"""A search trial's two runs, cold and then warm, joined into the one run the study records."""

from __future__ import annotations

import pytest

from autotune.measure.tasks._pairing import joined_run
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
