"""Why a trial failed: `TrialFailure`, raised where the reason is known, and `classify` for any other exception."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import torch

from autotune.errors import WorkloadError

__all__ = ["TrialFailure", "classify", "one_line", "raised_at"]


class TrialFailure(Exception):
    """A trial failed for a reason the parent records (accuracy, recompile_limit, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def classify(exc: BaseException, phase: str) -> str:
    """The FAIL reason for an exception raised in `phase`."""
    text = f"{type(exc).__name__}: {exc}".lower()
    name = type(exc).__name__
    if (
        isinstance(exc, (torch.OutOfMemoryError, MemoryError))
        or "out of memory" in text
        or "can't allocate memory" in text
    ):
        return "oom"  # building the workload included: beside other workers of a device, it may be run again alone
    if isinstance(exc, WorkloadError):
        return "workload_error"  # the user's code said what is wrong with it, in whichever phase it ran
    if name == "FailOnRecompileLimitHit" or "recompile limit" in text or "recompile_limit" in text:
        return "recompile_limit"
    if name in ("Unsupported", "UserError") or "graph break" in text:
        return "graph_break"
    if phase == "compile" or "torch._dynamo" in type(exc).__module__ or "torch._inductor" in type(exc).__module__:
        return "compile_error"
    if phase == "build":
        return "workload_error"
    return "runtime_error"


def one_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    detail = " ".join(lines[:3])[:600]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised, as 'file:line in function': the innermost frame of the user's code, outside autotune
    and torch (a model's `forward`, a loss, a step), else the innermost frame of all; '?' without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    libraries = tuple(f"{folder}{os.sep}" for folder in (Path(__file__).parents[1], Path(torch.__file__).parent))
    own = [frame for frame in frames if not frame.filename.startswith(libraries)]
    frame = (own or frames)[-1]
    here = f"{os.getcwd()}{os.sep}"
    return f"{frame.filename.removeprefix(here)}:{frame.lineno} in {frame.name}"
