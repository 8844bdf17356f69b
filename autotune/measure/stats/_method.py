"""The version of the measurement method: what a best.yaml's figures were measured with.

Ratios measured under one method are not comparable with ratios measured under another:
the steady allocator alone moved plain compile's ratio to eager on a CPU, because eager gained
more from it (`outputs/benchmarks/noise.md`, *The allocator*). best.yaml records the method
(`METHOD`), and a retune that finds another one re-measures the incumbent and compares nothing with the recorded figures
(`method_change`), instead of reporting the difference as a regression.

Versions:

1. glibc's adaptive malloc in the workers (files with no `method` section);
2. the steady allocator: malloc's mmap and trim thresholds fixed in every worker;
3. intervals simultaneous over a campaign's looks and candidates, gains beyond the band;
4. workers on a CPU forked from a server that imported Python, torch and the workload's module once;
5. where compile time decides (`time-to:N`, a Pareto front), a cold compile of every configuration before each
   replicate: the compile time a figure counts is that replicate's, not one first run's;
6. a compile's time leaves out the C++ header Inductor precompiles once for every later process of the
   environment (`autotune.trial.shared_builds`): the first subject to compile no longer pays it for the rest.

A confirmation's planned looks, its stop for want of a gain and its look after every replicate changed no
version: they move how many replicates a confirmation takes and how wide its intervals are, not
what a replicate measures, so ratios recorded before them stay comparable and a retune keeps judging against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["METHOD", "method_change"]

METHOD: dict[str, Any] = {
    "version": 6,
    "worker_environment": (
        "one new process per subject and replicate, warm from its own cache folder; on a CPU forked from a server "
        "that imported Python, torch and the workload's module"
    ),
    "allocator": "glibc malloc with fixed thresholds (mmap 32 MiB, trim 256 MiB)",
    "stream": "fresh batches in paired, interleaved windows (ABBA), every subject on the same slices",
    "statistic": "Student t over replicates of paired log-ratios, simultaneous over looks and candidates; a "
    "confirmation's look after every replicate, three quarters of the error at the last, stopped once no gain is left",
    "compile_time": "where it decides, a cold compile per configuration before each replicate; else one, deciding "
    "nothing; the environment's shared precompiled header left out",
}
"""The method this version of autotune measures with; bump `version` whenever a figure would move."""


def method_change(figures: Mapping[str, Any]) -> str:
    """'' when best.yaml's `metrics` were measured with this method, else what changed, in words."""
    recorded = figures.get("method")
    version = recorded.get("version") if isinstance(recorded, Mapping) else None
    if version == METHOD["version"]:
        return ""
    was = f"method version {version}" if version is not None else "an earlier measurement method (no version recorded)"
    return f"best.yaml was measured with {was}; this autotune measures with method version {METHOD['version']}"
