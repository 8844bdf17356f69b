"""Why a trial failed: the smallest set of its settings that still fails, the compiler stage, and a reproduction."""

from __future__ import annotations

from autotune.study.explain._explain import (
    BUDGET_FACTOR,
    FAILURES,
    default_budget,
    explain_failure,
    explain_in_folder,
    explain_trial,
)
from autotune.study.explain._narrow import Narrowing, Probe, ProbeOutcome, narrow
from autotune.study.explain._probe import COMPILER_FAILURES, explainable, short_probe
from autotune.study.explain._repro import REPRO, ReproFacts, repro_readme, repro_script, write_repro
from autotune.study.explain._settings import Setting, config_with, settings_of
from autotune.study.explain._stage import BISECTED, STAGE_NAMES, Stage, failing_stage, stage_of

__all__ = [
    "BISECTED",
    "STAGE_NAMES",
    "Stage",
    "failing_stage",
    "stage_of",
    "BUDGET_FACTOR",
    "FAILURES",
    "REPRO",
    "ReproFacts",
    "default_budget",
    "explain_failure",
    "explain_in_folder",
    "explain_trial",
    "repro_readme",
    "repro_script",
    "write_repro",
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
