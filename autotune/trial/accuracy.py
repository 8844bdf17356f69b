"""Accuracy against eager inside the worker: which tensors are compared, at which tolerance, and how.

Nothing here knows about trials or studies; the worker runs the eager reference and the
candidate and asks `compare` about each pair of tensors.
"""

from __future__ import annotations

import math

import torch

from autotune.workload.steps import tensor_leaves

__all__ = ["PRECISION_TOLERANCE", "compare", "tensor_leaves", "tolerance_for", "working_dtype"]


def working_dtype(autocast: torch.dtype | None, model: torch.nn.Module) -> torch.dtype | None:
    """The lowest floating-point precision a step computes in: the autocast dtype, else the parameters' lowest."""
    if autocast is not None:
        return autocast
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    for low in (torch.float16, torch.bfloat16):
        if low in dtypes:
            return low
    return None


PRECISION_TOLERANCE = 5e-2
"""Relative-error tolerance for a configuration that changes numerics (TF32/bf16 matmuls, unsafe math)."""


def tolerance_for(dtype: torch.dtype | None) -> float:
    """Relative-error tolerance: float32 work lands far below 1e-3; bf16/fp16 between 1e-3 and 1e-2."""
    if dtype in (torch.bfloat16, torch.float16):
        return 5e-2
    return 5e-3


def compare(reference: torch.Tensor, candidate: torch.Tensor, tolerance: float, scale: float = 0.0) -> float | None:
    """Relative error ‖candidate − reference‖ / max(‖reference‖, scale), or None if within tolerance.

    `scale` keeps tensors that are zero in exact arithmetic (the gradient of an attention
    key bias, say) from being judged on rounding noise relative to itself. A candidate
    that is longer along some axis (padded inputs) is cut to the reference's shape:
    padding at the end must leave the real positions unchanged.
    """
    if candidate.shape != reference.shape:
        if candidate.dim() != reference.dim() or any(
            c < r for c, r in zip(candidate.shape, reference.shape, strict=False)
        ):
            return math.inf
        candidate = candidate[tuple(slice(0, n) for n in reference.shape)]
    ref = reference.detach().double()
    cand = candidate.detach().double()
    if not torch.isfinite(cand).all():
        return math.inf
    error = float(torch.linalg.vector_norm(cand - ref) / max(float(torch.linalg.vector_norm(ref)), scale, 1e-12))
    return None if error <= tolerance else error
