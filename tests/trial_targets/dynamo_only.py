"""The tiny test workloads, with every compile in a worker process run by dynamo's `eager` backend.

A search, a retune or a validation of these runs end to end as a user's does: real worker
processes, the generated `apply_compilation.py` executed in them, tracing, guards, recompiles,
graph breaks, the accuracy check against eager, windows, replicates, the choice and the export.
Only Inductor's code generation is left out, so that a trial's compile takes a fraction of a
second instead of seconds: the fast tier of the tests searches these, and the full tier searches
the workloads of `tests.trial_targets.workloads` with Inductor.

Importing this module replaces `torch.compile` in the importing process, as a worker (and the
fork server that starts workers) imports a workload's module before building it; never in the
test process (`in_test_process`), which imports it to resolve the workload. The replacement keeps
torch's own compile wherever no worker's event channel is open (in a search's own process), so
nothing but a worker ever runs on the stand-in backend. Inductor's options and modes are dropped
there: the eager backend takes none.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch

from autotune import Workload
from autotune.trial.events import EVENT_FD_VARIABLE
from tests.trial_targets import in_test_process, workloads

BACKEND = "eager"
"""The backend every compile in a worker uses."""


def _dynamo_only(torch_compile: Callable[..., Any]) -> Callable[..., Any]:
    """`torch_compile`, with the backend replaced by BACKEND (and its modes and options dropped) inside a worker."""

    @functools.wraps(torch_compile)
    def compile_in_a_worker(model: Any = None, **kwargs: Any) -> Any:
        if os.environ.get(EVENT_FD_VARIABLE):
            kwargs.pop("mode", None)
            kwargs.pop("options", None)
            kwargs["backend"] = BACKEND
        return torch_compile(model, **kwargs)

    compile_in_a_worker.dynamo_only = True  # type: ignore[attr-defined]
    return compile_in_a_worker


if not in_test_process() and not getattr(torch.compile, "dynamo_only", False):
    torch.compile = _dynamo_only(torch.compile)  # type: ignore[assignment]


def __getattr__(name: str) -> Callable[[], Workload]:
    """Every workload of `tests.trial_targets.workloads`, by its name: `dynamo_only:tiny_train` and so on."""
    factory = getattr(workloads, name, None)
    if not callable(factory) or name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no workload {name!r}")
    return factory
