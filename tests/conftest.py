"""Fixtures shared by the test modules: the bundled toy workload and its summary, a PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from autotune import resolve
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import Workload
from tests.postgres import PostgresMissing, running_server

TOY = "examples.toy:model"

collect_ignore = [] if torch.cuda.is_available() else ["gpu"]
"""tests/gpu needs a CUDA device: `bash .ci/gpu` runs it where there is one; elsewhere it is not collected."""


@pytest.fixture(scope="session")
def toy() -> Workload:
    """The toy workload; tests that train or compile its model work on a copy."""
    return resolve(TOY)


@pytest.fixture(scope="session")
def toy_summary(toy: Workload) -> WorkloadSummary:
    return toy.summary(TOY, toy.draw_batches())


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server on 127.0.0.1 for the session's shared-study tests, stopped at the end.

    A server that cannot start fails those tests, naming what is missing: they test what
    several hosts rely on, so they must not pass by being skipped.
    """
    try:
        with running_server() as url:
            yield url
    except PostgresMissing as exc:
        # Never a skip: these tests must be able to fail. `.ci/test` installs the server as root.
        pytest.fail(f"the shared-study tests need a PostgreSQL server: {exc}")
