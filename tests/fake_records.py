"""Worker records with plausible defaults, for tests that stand in for a worker: name only what the test is about."""

from __future__ import annotations

from typing import Any

from autotune.trial.records import Compiled, DynamoCounts, ReadyReport, ResultReport, Window

COUNTS = DynamoCounts(graphs=1, graph_breaks=0, recompiles=0, frames=1, cuda_graph_recordings=0, cuda_graph_skips=0)


def ready(**fields: Any) -> ReadyReport:
    """A ready record: one settle window of 100 samples/s, a stream of 10 batches of 10 samples."""
    values: dict[str, Any] = {
        "settle_windows": [100.0],
        "settle_passes": 1,
        "windows_redone": 0,
        "steady_samples_per_second": 100.0,
        "samples_per_second": 100.0,
        "batches_per_second": 10.0,
        "stream_samples": 100,
        "stream_batches": 10,
        "threads": 1,
        "device_free_mb": None,
        "device_figures": {},
        "counts": COUNTS,
    }
    return ReadyReport(**{**values, **fields})


def result(**fields: Any) -> ResultReport:
    """A result record of 100 samples/s on a quiet machine."""
    values: dict[str, Any] = {
        "samples_per_second": 100.0,
        "batches_per_second": 10.0,
        "counts": COUNTS,
        "peak_memory_mb": 1.0,
        "peak_reserved_mb": None,
        "memory_kind": "process_rss",
        "probe_seconds": [],
        "load": [],
        "steal": None,
        "noisy": "",
    }
    return ResultReport(**{**values, **fields})


def compiled(**fields: Any) -> Compiled:
    """A compiled record of a 2-second compile."""
    values: dict[str, Any] = {
        "compile_seconds": 2.0,
        "warmup_passes": 2,
        "compile_peak_memory_mb": 1.0,
        "compile_peak_reserved_mb": None,
        "compile_split": {},
        "compile_span": [0.0, 2.0],
        "check_span": None,
        "shared_build_spans": [],
        "counts": COUNTS,
        "check_seconds": 0.0,
        "notes": [],
    }
    return Compiled(**{**values, **fields})


def window(seconds: float, samples: int = 100, **fields: Any) -> Window:
    """A window of `samples` samples in 10 batches that compiled nothing."""
    values: dict[str, Any] = {
        "index": 0,
        "seconds": seconds,
        "samples": samples,
        "batches": 10,
        "recompiles": 0,
        "compile_seconds": 0.0,
        "compile_samples": 0,
        "compile_batches": 0,
        "probe_seconds": 0.0,
        "others": None,
        "load": None,
    }
    return Window(**{**values, **fields})
