"""The one measurement engine: subjects measured against each other, statistics, stopping, and the never-worse choice of what is exported. No Optuna.

The engine lives in rooms, each importing only the rooms below it (an import-linter contract):
`stats` (what a measurement means: paired ratios, the band, the stopping rule, the objective),
`engine` (subjects in fresh processes, replicates, the campaign), `report` (a campaign's rows and
tables), `choice` (what is exported, the Pareto front, the retune decision) and `tasks` (what
search, validate and retune ask of it); `format` writes figures for people. This package names
what the layers above use most; the rest is imported from its room.
"""

from __future__ import annotations

from autotune.measure.choice import DEFAULT_PICK, Choice, baseline_figures, choose, metrics, parse_pick
from autotune.measure.engine import BASELINES, Campaign, CampaignRules, Harness, Subject, confirmation_rules, measure
from autotune.measure.report import confirmation_table
from autotune.measure.stats import Objective, Objectives, Throughput, TimeTo, outcome
from autotune.measure.tasks import Paired, record_compile_cache, validate

__all__ = [
    "BASELINES",
    "DEFAULT_PICK",
    "CampaignRules",
    "Campaign",
    "Choice",
    "Harness",
    "Objective",
    "Objectives",
    "Throughput",
    "TimeTo",
    "Paired",
    "Subject",
    "baseline_figures",
    "choose",
    "confirmation_rules",
    "confirmation_table",
    "measure",
    "metrics",
    "outcome",
    "parse_pick",
    "record_compile_cache",
    "validate",
]
