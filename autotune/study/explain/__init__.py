"""Why a trial failed: the smallest set of its settings that still fails, the compiler stage, and a reproduction."""

from __future__ import annotations

from autotune.study.explain._narrow import Narrowing, Probe, ProbeOutcome, narrow
from autotune.study.explain._probe import COMPILER_FAILURES, explainable, short_probe
from autotune.study.explain._settings import Setting, config_with, settings_of

__all__ = [
    "COMPILER_FAILURES",
    "Narrowing",
    "Probe",
    "ProbeOutcome",
    "Setting",
    "config_with",
    "explainable",
    "narrow",
    "settings_of",
    "short_probe",
]
