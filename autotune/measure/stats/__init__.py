"""What a measurement means: the statistics of paired ratios, the equivalence band and stopping rule, the objective, the method's version."""

from __future__ import annotations

from autotune.measure.stats._method import METHOD, method_change
from autotune.measure.stats._objective import Objective, Objectives, faster, objective_help, objective_kinds
from autotune.measure.stats._statistics import (
    BAND,
    FLOOR_CONFIDENCE,
    FLOOR_RULES,
    FUTILITY_CHANCE,
    FUTILITY_ERROR,
    FUTILITY_RULE,
    FUTILITY_RULES,
    REPLICATE_SD_FLOOR,
    SPREAD_FLOOR_LEAST,
    Components,
    Interval,
    Looks,
    Pooled,
    claim_chance,
    components,
    gain_margin,
    mean_interval,
    measured_floor,
    outcome,
    pooled,
    replicate_interval,
    spaced_looks,
    spread_rule,
    t_quantile,
    upper_bound,
    windows_per_replicate,
)
from autotune.measure.stats.objectives.compile_time import CompileTime
from autotune.measure.stats.objectives.peak_memory import PeakMemory
from autotune.measure.stats.objectives.throughput import Throughput
from autotune.measure.stats.objectives.time_to import TimeTo

__all__ = [
    "BAND",
    "FLOOR_CONFIDENCE",
    "FLOOR_RULES",
    "FUTILITY_CHANCE",
    "FUTILITY_ERROR",
    "FUTILITY_RULE",
    "FUTILITY_RULES",
    "METHOD",
    "REPLICATE_SD_FLOOR",
    "SPREAD_FLOOR_LEAST",
    "Components",
    "Interval",
    "Looks",
    "CompileTime",
    "Pooled",
    "Objective",
    "Objectives",
    "PeakMemory",
    "Throughput",
    "TimeTo",
    "claim_chance",
    "components",
    "faster",
    "gain_margin",
    "mean_interval",
    "measured_floor",
    "method_change",
    "objective_help",
    "objective_kinds",
    "outcome",
    "pooled",
    "replicate_interval",
    "spaced_looks",
    "spread_rule",
    "t_quantile",
    "upper_bound",
    "windows_per_replicate",
]
