"""Why a model compiles badly: its graph breaks and recompiles, each with where, why and the fix."""

from __future__ import annotations

from autotune.study.doctor._doctor import Diagnosis, GraphBreak, Recompile, diagnose
from autotune.study.doctor._hints import (
    BreakCause,
    SizeChange,
    break_cause,
    guard_hint,
    guard_text,
    size_change,
    value_guard,
)
from autotune.study.doctor._padding import BUCKET_COUNTS, padding_rows

__all__ = [
    "BUCKET_COUNTS",
    "BreakCause",
    "Diagnosis",
    "GraphBreak",
    "Recompile",
    "SizeChange",
    "break_cause",
    "diagnose",
    "guard_hint",
    "guard_text",
    "padding_rows",
    "size_change",
    "value_guard",
]
