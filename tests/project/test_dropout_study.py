"""The dropout study's arithmetic: each configuration's medians over its complete first runs, failures left out."""

from __future__ import annotations

import pytest

from examples.dropout_study import FIGURES, summary

pytestmark = pytest.mark.parallel


def run(name: str, wall: float, recompiles: int, state: str = "complete") -> dict:
    return {
        "configuration": name,
        "state": state,
        **dict.fromkeys(FIGURES, 1.0),
        "wall_seconds": wall,
        "recompiles": recompiles,
    }


def test_each_configuration_s_medians_leave_failed_runs_out() -> None:
    out = summary(
        [
            run("as it is", 60.0, 2),
            run("as it is", 70.0, 2),
            run("as it is", 90.0, 2),
            run("random_as_eager", 40.0, 0),
            run("random_as_eager", 44.0, 0),
            run("random_as_eager", 1.0, 0, "failed"),
        ]
    )
    assert out["as it is"]["wall_seconds"] == 70.0 and out["as it is"]["recompiles"] == 2
    assert out["random_as_eager"]["wall_seconds"] == 42.0 and out["random_as_eager"]["recompiles"] == 0
