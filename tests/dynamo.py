"""A clean dynamo for each test, for modules whose tests compile models that share code.

Use it in a module as `from tests.dynamo import fresh_dynamo  # noqa: F401`: it is an autouse
fixture, so importing it is what makes it run around each test of that module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch._dynamo.utils import counters


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Reset dynamo and its counters before the test, and dynamo after it.

    Models that share forward code (transformers' models, the examples) would otherwise find each other's
    compiled code in dynamo's cache; a clean cache and counters keep each test's compiles and graph breaks its own.
    """
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
