"""Comparing compiled results with eager, and dynamo's counters."""

from __future__ import annotations

import math

import pytest
import torch

from autotune.trial.accuracy import compare, tensor_leaves, tolerance_for, working_dtype

pytestmark = pytest.mark.parallel


def test_compare_accepts_rounding_and_rejects_real_differences() -> None:
    ref = torch.randn(100, dtype=torch.float32)
    assert compare(ref, ref * (1 + 1e-6), tolerance_for(None)) is None
    error = compare(ref, ref + 0.1 * ref.abs().mean(), tolerance_for(None))
    assert error is not None and error > tolerance_for(None)
    assert compare(ref, torch.full_like(ref, math.nan), 1.0) == math.inf


def test_a_zero_in_exact_arithmetic_is_judged_on_the_scale_given() -> None:
    noise = torch.randn(16) * 1e-9
    other = noise + torch.randn(16) * 1e-9
    assert compare(noise, other, 0.05) is not None, "relative to itself, rounding noise looks like a 100% error"
    assert compare(noise, other, 0.05, scale=1e-3) is None


def test_padded_candidates_are_compared_on_the_real_positions() -> None:
    ref = torch.randn(2, 5, 3)
    padded = torch.cat([ref, torch.randn(2, 3, 3)], dim=1)
    assert compare(ref, padded, 1e-6) is None
    assert compare(ref, padded[:, :4], 1e-6) == math.inf


def test_tensor_leaves_walks_nested_outputs() -> None:
    a, b = torch.randn(2), torch.randn(3)
    output = {"loss": a, "rest": (b, torch.ones(1, dtype=torch.long))}
    assert [t.shape for t in tensor_leaves(output)] == [a.shape, b.shape]


def test_a_model_with_low_precision_weights_is_judged_at_low_precision_without_autocast() -> None:
    bf16 = torch.nn.Linear(4, 4).to(torch.bfloat16)
    assert working_dtype(None, bf16) == torch.bfloat16
    assert tolerance_for(working_dtype(None, bf16)) == tolerance_for(torch.bfloat16) > tolerance_for(None)
    assert working_dtype(None, torch.nn.Linear(4, 4)) is None
    assert working_dtype(torch.float16, torch.nn.Linear(4, 4)) == torch.float16
