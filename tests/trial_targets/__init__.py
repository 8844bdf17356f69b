"""Workload modules for the tests, each imported by the worker (and fork server) processes that build it.

A module here that patches PyTorch for its workers does so only where `in_test_process()` is false: the
test process imports these modules too (resolving a workload to generate a configuration's source,
searching in-process), and a patch made there would reach every test that runs after it.
"""

from __future__ import annotations

import sys


def in_test_process() -> bool:
    """Whether pytest runs in this process: the tests' own, never a worker or fork server they started."""
    return "_pytest" in sys.modules
