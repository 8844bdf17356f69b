"""What search, validate and retune ask of the engine: baselines, trials paired with a live reference, validation, the winner's compile cache, recipes."""

from __future__ import annotations

from autotune.measure.tasks._baselines import Baselines, measure_baselines
from autotune.measure.tasks._cache import record_compile_cache
from autotune.measure.tasks._pairing import (
    LiveReference,
    Paired,
    anchor_reference,
    first_run,
    measure_trial,
    restart_reference,
    start_reference,
    worth_more_pairs,
)
from autotune.measure.tasks._recipes import Recipe, read_recipe, read_recipes, recipe_from, without_cuda_graphs
from autotune.measure.tasks._validate import ValidationReport, design_text, read_config_file, validate

__all__ = [
    "Baselines",
    "Paired",
    "Recipe",
    "LiveReference",
    "ValidationReport",
    "anchor_reference",
    "design_text",
    "first_run",
    "measure_baselines",
    "measure_trial",
    "read_config_file",
    "read_recipe",
    "read_recipes",
    "recipe_from",
    "record_compile_cache",
    "restart_reference",
    "start_reference",
    "validate",
    "without_cuda_graphs",
    "worth_more_pairs",
]
