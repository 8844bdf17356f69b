"""Fixtures shared by the test modules: the bundled toy workload and its summary."""

from __future__ import annotations

import pytest

from autotune import resolve
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import Workload

TOY = "examples.toy:model"


@pytest.fixture(scope="session")
def toy() -> Workload:
    """The toy workload; tests that train or compile its model work on a copy."""
    return resolve(TOY)


@pytest.fixture(scope="session")
def toy_summary(toy: Workload) -> WorkloadSummary:
    return toy.summary(TOY, toy.draw_batches())
