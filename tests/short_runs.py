"""Shorter measurement for tests whose claims rest on large differences, not on fine ones.

A window lasts about 0.5 s by default; the tiny test workloads reach a steady rate well
within a quarter of that, and most of a test's time would otherwise go to measuring it.
"""

from __future__ import annotations

SHORT = {"window_seconds": 0.25}
"""Protocol fields."""

SHORT_FLAGS = ("--window-seconds", "0.25")
"""The same as `autotune search` flags."""
