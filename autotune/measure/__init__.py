"""The one measurement engine: subjects measured against each other, statistics, stopping, and the never-worse choice of what is exported. No Optuna."""

from __future__ import annotations

from autotune.measure._baselines import Baselines, measure_baselines
from autotune.measure._cache import record_compile_cache
from autotune.measure._campaign import BASELINES, PROBE_SLOWDOWN, Campaign, Harness, Subject, with_protocol
from autotune.measure._choice import BASELINE_FIELDS, Choice, baseline_figures, choose, metrics
from autotune.measure._decision import DECISIONS, Decision, decide, recorded_ratios
from autotune.measure._engine import Budget, ReplicateCallback, RunCallback, first_blocks, measure
from autotune.measure._objective import OBJECTIVE_HELP, Objective, Objectives, faster
from autotune.measure._pairing import Paired, Reference, measure_trial, pair_windows, start_reference
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
from autotune.measure._session import (
    DESIGNS,
    Replicate,
    batches_for,
    block_orders,
    co_residence,
    expected_replicate_seconds,
    run_replicate,
)
from autotune.measure._statistics import (
    OUTCOMES,
    Components,
    Interval,
    components,
    outcome,
    paired_interval,
    replicate_interval,
    t975,
    windows_per_replicate,
)
from autotune.measure._tables import confirmation_cells, confirmation_rows, confirmation_table, table
from autotune.measure._validate import ValidationReport, design_text, read_config_file, validate

__all__ = [
    "BASELINES",
    "BASELINE_FIELDS",
    "Baselines",
    "Budget",
    "Campaign",
    "Choice",
    "Components",
    "DECISIONS",
    "DEFAULT_PICK",
    "DESIGNS",
    "Decision",
    "Harness",
    "Interval",
    "OBJECTIVE_HELP",
    "OUTCOMES",
    "Objective",
    "Objectives",
    "PROBE_SLOWDOWN",
    "Paired",
    "Pick",
    "Point",
    "Recipe",
    "Reference",
    "Replicate",
    "ReplicateCallback",
    "RunCallback",
    "Subject",
    "ValidationReport",
    "baseline_figures",
    "batches_for",
    "block_orders",
    "choose",
    "choose_point",
    "co_residence",
    "components",
    "confirmation_cells",
    "confirmation_rows",
    "confirmation_table",
    "decide",
    "design_text",
    "expected_replicate_seconds",
    "faster",
    "first_blocks",
    "front",
    "measure",
    "measure_baselines",
    "measure_trial",
    "metrics",
    "outcome",
    "pair_windows",
    "paired_interval",
    "parse_pick",
    "point_figures",
    "points",
    "read_config_file",
    "read_recipe",
    "read_recipes",
    "record_compile_cache",
    "recorded_ratios",
    "replicate_interval",
    "run_replicate",
    "start_reference",
    "subjects_to_confirm",
    "t975",
    "table",
    "validate",
    "windows_per_replicate",
    "with_protocol",
    "without_cuda_graphs",
]
