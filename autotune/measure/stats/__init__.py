"""What a measurement means: the statistics of paired ratios, the equivalence band and stopping rule, the objective, the method's version."""

from __future__ import annotations

from autotune.measure.stats._method import METHOD, method_change
from autotune.measure.stats._objective import Objective, Objectives, faster
from autotune.measure.stats._statistics import (
    BAND,
    FUTILITY_ERROR,
    REPLICATE_SD_FLOOR,
    Components,
    Interval,
    Looks,
    components,
    gain_margin,
    mean_interval,
    outcome,
    replicate_interval,
    spaced_looks,
    t_quantile,
    upper_bound,
    windows_per_replicate,
)

__all__ = [
    "BAND",
    "FUTILITY_ERROR",
    "METHOD",
    "REPLICATE_SD_FLOOR",
    "Components",
    "Interval",
    "Looks",
    "Objective",
    "Objectives",
    "components",
    "faster",
    "gain_margin",
    "mean_interval",
    "method_change",
    "outcome",
    "replicate_interval",
    "spaced_looks",
    "t_quantile",
    "upper_bound",
    "windows_per_replicate",
]
