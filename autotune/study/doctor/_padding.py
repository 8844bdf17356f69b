"""What each padding strategy would do to a workload's varying lengths: the share of positions it wastes
and how many shapes it leaves (each a graph a static compile builds), learned buckets included."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.runtime.batching import padded_length
from autotune.runtime.buckets import choose_buckets, padding_waste

__all__ = ["BUCKET_COUNTS", "padding_rows", "padding_table"]

BUCKET_COUNTS = (2, 4, 8)
"""The bucket counts the bundled spaces search, compared here."""
_MULTIPLE = 8


def padding_rows(lengths: Mapping[str, Sequence[int]]) -> list[dict[str, Any]]:
    """Per group of axes whose lengths agree: each strategy's waste (share of padded positions) and shapes."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for axis, seen in lengths.items():
        if seen:
            groups.setdefault(tuple(seen), []).append(axis)
    rows = []
    for seen, axes in groups.items():
        strategies: list[tuple[str, Any, tuple[int, ...]]] = [
            ("as given", None, ()),
            (f"multiple of {_MULTIPLE}", _MULTIPLE, ()),
            ("pow2", "pow2", ()),
            ("max (longest seen)", "max", ()),
            *((f"buckets ({k})", "buckets", choose_buckets(seen, k)) for k in BUCKET_COUNTS),
        ]
        for name, alignment, bounds in strategies:
            padded = [padded_length(n, alignment, max(seen), bounds) for n in seen]
            rows.append(
                {
                    "inputs": ", ".join(axes),
                    "strategy": name,
                    "waste": round(padding_waste(seen, padded), 4),
                    "shapes": len(set(padded)),
                    "batches": len(seen),
                    **({"buckets": list(bounds)} if bounds else {}),
                }
            )
    return rows


def padding_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rows as text lines, one block per group of inputs."""
    lines: list[str] = []
    for inputs in dict.fromkeys(r["inputs"] for r in rows):
        group = [r for r in rows if r["inputs"] == inputs]
        lines.append(f"  {inputs}, over {group[0].get('batches', 0)} batches:")
        for row in group:
            bounds = f"  at {', '.join(map(str, row['buckets']))}" if row.get("buckets") else ""
            lines.append(
                f"    {row['strategy']:<20} {row['waste']:>6.1%} of positions padding, "
                f"{row['shapes']:>3} shape{'s' if row['shapes'] != 1 else ' '}{bounds}"
            )
    return lines
