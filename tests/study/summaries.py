"""Workload summaries the space tests adapt spaces to, without building a model."""

from __future__ import annotations

from autotune.runtime.summary import WorkloadSummary

TOY_LIKE = WorkloadSummary(
    spec="examples.toy:model",
    task="train",
    modules=("embed", "encoder", "head"),
    blocks=("encoder.blocks",),
    dynamic_dims={"input_ids": (1,), "attention_mask": (1,), "labels": (1,)},
    pad_values={"labels": -100},
)
"""The toy's shape: training, three modules, repeated blocks, three inputs of one varying length."""
SHARED = [[("input_ids", 1), ("attention_mask", 1), ("labels", 1)]]
"""The toy's inputs whose lengths always agree."""
