"""Padding buckets learned from a workload's own lengths: the K boundaries that waste the least padding.

A batch whose axis has length `l` is padded to the smallest boundary `b >= l`; with K
boundaries a static graph is compiled at most K times, whatever the lengths. The choice is
exact: dynamic programming over the distinct observed lengths (an optimal boundary is always
an observed length, and the last one is the longest), minimising the total padded positions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

__all__ = ["MAX_BUCKETS", "choose_buckets", "padding_waste"]

MAX_BUCKETS = 32
"""The most boundaries a configuration may hold (each is a graph a static configuration compiles)."""


def choose_buckets(lengths: Iterable[int], count: int) -> tuple[int, ...]:
    """At most `count` boundaries that minimise the padding of `lengths` (every length fits the last one).

    Fewer are returned when fewer distinct lengths were seen. Raises ValueError for no lengths
    or a count below 1.
    """
    seen = Counter(int(n) for n in lengths)
    if not seen:
        raise ValueError("buckets need at least one observed length")
    if count < 1:
        raise ValueError(f"a bucket count of {count} is not allowed; use 1 or more")
    values = sorted(seen)
    if len(values) <= count:
        return tuple(values)
    weights = [seen[v] for v in values]
    # prefix[i]: how many lengths, and their sum, among values[:i]; the padding of values[i:j+1] padded to values[j]
    # is values[j] * count - sum.
    counts, sums = [0], [0]
    for value, weight in zip(values, weights, strict=True):
        counts.append(counts[-1] + weight)
        sums.append(sums[-1] + value * weight)

    def waste(first: int, last: int) -> int:
        return values[last] * (counts[last + 1] - counts[first]) - (sums[last + 1] - sums[first])

    size = len(values)
    infinity = float("inf")
    # best[k][j]: the least waste covering values[:j+1] with k boundaries, the last at values[j].
    best = [[infinity] * size for _ in range(count + 1)]
    cut = [[-1] * size for _ in range(count + 1)]
    for last in range(size):
        best[1][last] = waste(0, last)
    for k in range(2, count + 1):
        for last in range(k - 1, size):
            for previous in range(k - 2, last):
                cost = best[k - 1][previous] + waste(previous + 1, last)
                if cost < best[k][last]:
                    best[k][last], cut[k][last] = cost, previous
    k = min(range(1, count + 1), key=lambda used: (best[used][size - 1], used))
    chosen, last = [], size - 1
    while k >= 1 and last >= 0:
        chosen.append(values[last])
        last, k = cut[k][last], k - 1
    return tuple(sorted(chosen))


def padding_waste(lengths: Iterable[int], padded: Iterable[int]) -> float:
    """The share of padded positions: 1 - (sum of lengths) / (sum of what they were padded to)."""
    total, after = 0, 0
    for length, target in zip(lengths, padded, strict=True):
        total, after = total + length, after + target
    return 1.0 - total / after if after else 0.0
