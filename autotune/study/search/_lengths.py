"""The lengths of a workload's declared dynamic inputs: which (input, axis) pairs always agree, the lengths each one
takes (what 'buckets' padding learns from), and the groups a space marks dynamic together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.runtime.config import InputKey
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import input_of

__all__ = ["group_name", "length_groups", "mark_groups", "observed_lengths", "shared_length_groups"]


def observed_lengths(summary: WorkloadSummary, batches: Sequence[Any]) -> dict[tuple[InputKey, int], list[int]]:
    """Each declared (input, axis) pair's length in every batch: what 'buckets' padding learns from."""
    return {
        (key, axis): [int(input_of(b, key).shape[axis]) for b in batches]
        for key, axes in summary.dynamic_dims.items()
        for axis in axes
    }


def shared_length_groups(summary: WorkloadSummary, batches: Sequence[Any]) -> list[list[tuple[InputKey, int]]]:
    """Declared (input, axis) pairs grouped by equal lengths in every batch (e.g. input_ids/labels/attention_mask)."""
    signature: dict[tuple[int, ...], list[tuple[InputKey, int]]] = {}
    for key, axes in summary.dynamic_dims.items():
        for axis in axes:
            lengths = tuple(int(input_of(b, key).shape[axis]) for b in batches)
            signature.setdefault(lengths, []).append((key, axis))
    return list(signature.values())


def length_groups(
    workload: WorkloadSummary,
    shared: Sequence[Sequence[tuple[InputKey, int]]] | None,
    lengths: Mapping[tuple[InputKey, int], Sequence[int]],
) -> tuple[tuple[tuple[tuple[InputKey, int], ...], tuple[int, ...]], ...]:
    """Each group of equal-length pairs (each pair alone without groups) with its first pair's lengths."""
    pairs = [(k, a) for k, axes in workload.dynamic_dims.items() for a in axes]
    groups = [tuple(g) for g in shared] if shared else [(pair,) for pair in pairs]
    return tuple((group, tuple(lengths[group[0]])) for group in groups if group and lengths.get(group[0]))


def mark_groups(
    workload: WorkloadSummary, shared: Sequence[Sequence[tuple[InputKey, int]]] | None
) -> tuple[tuple[tuple[InputKey, int], ...], ...]:
    pairs = [(key, axis) for key, axes in workload.dynamic_dims.items() for axis in axes]
    if shared is None:
        return tuple((pair,) for pair in pairs)
    groups: list[tuple[tuple[InputKey, int], ...]] = []
    placed: set[tuple[InputKey, int]] = set()
    for group in shared:
        members = tuple(p for p in group if p in pairs and p not in placed)
        if members:
            groups.append(members)
            placed.update(members)
    groups.extend((p,) for p in pairs if p not in placed)
    return tuple(groups)


def group_name(group: Sequence[tuple[InputKey, int]], index: int) -> str:
    key, axis = group[0]
    return f"{key}:{axis}" if len(group) == 1 else f"{key}:{axis}+{len(group) - 1}"
