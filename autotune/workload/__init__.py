"""The workload layer: the `Workload` contract, resolving `"pkg.mod:attr"` targets, transformers conveniences.

It imports the runtime layer (for `WorkloadSummary` and input-key rules) and nothing above it.
"""

from autotune.workload.contract import (
    AUTOCAST_DTYPES,
    Batch,
    Workload,
    find_repeated_blocks,
    has_dropout,
    input_keys,
    input_of,
    samples_in,
    seed_everything,
)
from autotune.workload.resolve import preimport, resolve

__all__ = [
    "AUTOCAST_DTYPES",
    "Batch",
    "Workload",
    "find_repeated_blocks",
    "has_dropout",
    "input_keys",
    "input_of",
    "preimport",
    "resolve",
    "samples_in",
    "seed_everything",
]
