"""The objectives, one module each: every registered one is read back from its own spelling, says its direction
and unit, and takes its figure from a run's record; a trade-off alone, a list that does not start with a speed
objective, and a misspelling are refused naming what is allowed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune.errors import SearchError
from autotune.measure.stats import (
    CompileTime,
    Objective,
    Objectives,
    PeakMemory,
    Throughput,
    TimeTo,
    objective_help,
    objective_kinds,
)
from autotune.trial.run_record import RunRecord

pytestmark = pytest.mark.parallel

RECORD = RunRecord.from_dict(
    {
        "state": "complete",
        "samples_per_second": 400.0,
        "batches_per_second": 50.0,
        "compile_seconds": 30.0,
        "peak_memory_mb": 900.0,
    }
)


def test_the_registry_holds_one_objective_per_module() -> None:
    folder = Path(Objective.__module__.replace(".", "/")).parent / "objectives"
    modules = sorted(p.stem for p in (Path(__file__).parents[2] / folder).glob("[!_]*.py"))
    assert [kind.__module__.rsplit(".", 1)[1] for kind in objective_kinds()] == modules
    assert [kind.name for kind in objective_kinds()] == ["compile-time", "peak-memory", "throughput", "time-to"]


@pytest.mark.parametrize(
    ("objective", "figure", "direction"),
    [
        (Throughput(), 400.0, "maximize"),
        (TimeTo(100), 30.0 + 100 / 50.0, "minimize"),
        (CompileTime(), 30.0, "minimize"),
        (PeakMemory(), 900.0, "minimize"),
    ],
)
def test_each_objective_reads_back_from_its_spelling_and_takes_its_figure_from_a_record(
    objective: Objective, figure: float, direction: str
) -> None:
    assert Objective.one(str(objective)) == objective
    assert objective.of(RECORD) == pytest.approx(figure) and objective.direction == direction
    assert objective.unit and objective.better(*((2.0, 1.0) if direction == "maximize" else (1.0, 2.0)))
    if objective.speed:
        assert Objective.parse(str(objective)) == objective
        assert objective.speed_value(400.0, 50.0, 30.0) == pytest.approx(figure)
    else:
        with pytest.raises(SearchError, match=f"alone would make eager .* 'throughput,{objective}'"):
            Objective.parse(str(objective))


def test_only_time_to_runs_a_horizon_and_only_throughput_is_per_sample() -> None:
    assert [o.horizon for o in (Throughput(), TimeTo(7), CompileTime(), PeakMemory())] == [None, 7, None, None]
    assert [o.per_sample for o in (Throughput(), TimeTo(7), CompileTime(), PeakMemory())] == [True, False, False, False]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("latency", "'latency' is not allowed; use 'throughput' or 'time-to:N (N >= 1 steps)'"),
        ("time-to:0", "'time-to:0' is not allowed"),
        ("compile-time,throughput", "a list starts with one speed objective"),
        ("throughput,time-to:3", "a list starts with one speed objective"),
        ("throughput,peak-memory,peak-memory", "names an objective twice"),
    ],
)
def test_what_is_not_an_objective_is_refused_naming_what_is(text: str, error: str) -> None:
    with pytest.raises(SearchError, match=re.escape(error)):
        Objectives.parse(text)


def test_the_help_names_every_registered_objective() -> None:
    for kind in objective_kinds():
        assert f"'{kind.spelled}'" in objective_help()
    assert str(Objectives.parse("time-to:5,compile-time,peak-memory")) == "time-to:5,compile-time,peak-memory"
