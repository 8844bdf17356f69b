"""The one measurement engine: subjects measured against each other, statistics, stopping, and the never-worse choice of what is exported. No Optuna."""

from __future__ import annotations

from autotune.measure._cache import record_compile_cache
from autotune.measure._campaign import (
    BASELINES,
    PROBE_SLOWDOWN,
    Campaign,
    Harness,
    Interval,
    Subject,
    measure,
    paired_interval,
    rotation,
    with_protocol,
)
from autotune.measure._choice import BASELINE_FIELDS, Choice, baseline_figures, choose, metrics
from autotune.measure._decision import DECISIONS, Decision, decide, recorded_ratios
from autotune.measure._objective import OBJECTIVE_HELP, Objective, Objectives, faster
from autotune.measure._pareto import (
    DEFAULT_PICK,
    Pick,
    Point,
    choose_point,
    front,
    parse_pick,
    point_figures,
    points,
    subjects_to_confirm,
)
from autotune.measure._recipes import Recipe, read_recipe, read_recipes, without_cuda_graphs
from autotune.measure._tables import confirmation_cells, confirmation_rows, confirmation_table, table
from autotune.measure._validate import ValidationReport, read_config_file, validate

__all__ = [
    "BASELINES",
    "BASELINE_FIELDS",
    "Campaign",
    "Choice",
    "DECISIONS",
    "DEFAULT_PICK",
    "Decision",
    "Harness",
    "Interval",
    "OBJECTIVE_HELP",
    "Objective",
    "Objectives",
    "PROBE_SLOWDOWN",
    "Pick",
    "Point",
    "Recipe",
    "Subject",
    "ValidationReport",
    "baseline_figures",
    "choose",
    "choose_point",
    "confirmation_cells",
    "confirmation_rows",
    "confirmation_table",
    "decide",
    "faster",
    "front",
    "measure",
    "metrics",
    "paired_interval",
    "parse_pick",
    "point_figures",
    "points",
    "read_config_file",
    "read_recipe",
    "read_recipes",
    "record_compile_cache",
    "recorded_ratios",
    "rotation",
    "subjects_to_confirm",
    "table",
    "validate",
    "with_protocol",
    "without_cuda_graphs",
]
