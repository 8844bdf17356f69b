"""Fixtures of the measurement tests: a harness for the toy, and `stands.Stand` installed as the engine's lab of processes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autotune.measure import Harness
from autotune.measure.engine import _lab
from autotune.runtime.summary import WorkloadSummary
from tests.measure.stands import Stand


@pytest.fixture
def harness(toy_summary: WorkloadSummary) -> Harness:
    return Harness(spec="examples.toy:model", summary=toy_summary)


@pytest.fixture
def stand(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Stand]:
    def install(rates: dict[str, list[float | None]], failing: tuple[str, ...] = ()) -> Stand:
        fake = Stand(rates, failing)
        monkeypatch.setattr(_lab, "run_trial", fake.first_run)
        monkeypatch.setattr(_lab, "run_replicate", fake.replicate)
        return fake

    return install
