"""How numbers, ratios, intervals and timestamps are written for people: one place for every table and message."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

__all__ = ["interval", "number", "ratio", "seconds", "span", "utc_now"]


def utc_now() -> str:
    """The current UTC time to the second, ISO 8601 (what best.yaml and the generated header record)."""
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def number(value: Any, suffix: str = "") -> str:
    """Three significant figures (thousands separated above 1000); '–' for a missing value."""
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value}{suffix}"
    if abs(value) >= 1000:
        return f"{value:,.0f}{suffix}"
    return f"{value:.3g}{suffix}"


def ratio(value: float | None) -> str:
    """A speed ratio such as '1.23x'; '–' for a missing one."""
    return "–" if value is None else f"{value:.2f}x"


def seconds(value: float | None) -> str:
    """Seconds with one decimal; '–' for a missing value."""
    return "–" if value is None else f"{value:.1f} s"


def interval(stat: Mapping[str, Any] | None) -> str:
    """A ratio with its interval and replicates, e.g. '1.23x [1.10, 1.31] (3 replicates)'; '–' when there is none."""
    if not stat or stat.get("median") is None:
        return "–"
    text = ratio(stat["median"])
    replicates = stat.get("replicates", stat.get("rounds")) or 0  # rounds: files of earlier versions
    if stat.get("low") is not None and stat.get("high") is not None and replicates > 1:
        text += f" [{stat['low']:.2f}, {stat['high']:.2f}]"
    if replicates:
        # Files of earlier versions measured rotated rounds of fresh processes; these measure replicates.
        unit = "replicate" if "windows" in stat or "replicates" in stat else "round"
        text += f" ({replicates} {unit}{'s' if replicates != 1 else ''})"
    return text


def span(stat: Mapping[str, Any] | None, suffix: str = "", missing: str = "–") -> str:
    """A recorded range such as {'min': 1.7, 'max': 2.45} as '1.7 to 2.45' (one figure when they agree)."""
    if not stat or stat.get("min") is None or stat.get("max") is None:
        return missing
    low, high = number(stat["min"]), number(stat["max"])
    return f"{low}{suffix}" if low == high else f"{low} to {high}{suffix}"
