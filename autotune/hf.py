"""Workloads for bare transformers models: batches synthesised from the model's config."""

from __future__ import annotations

from typing import Any

__all__ = ["is_pretrained_model", "workload_for"]


def is_pretrained_model(obj: Any) -> bool:
    """Whether `obj` is a transformers PreTrainedModel (without importing transformers when it is not loaded)."""
    import sys

    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(obj, transformers.PreTrainedModel)


def workload_for(model: Any) -> Any:
    """A Workload for a bare PreTrainedModel."""
    from autotune.errors import WorkloadError

    raise WorkloadError(f"cannot synthesise batches for {type(model).__name__} yet")
