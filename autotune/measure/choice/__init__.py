"""What a campaign decides: the never-worse choice of what is exported, the Pareto front and `--pick`, the retune decision."""

from __future__ import annotations

from autotune.measure.choice._choice import Choice, baseline_figures, choose, metrics, pay_back_sentence
from autotune.measure.choice._decision import DECISIONS, Decision, decide, recorded_ratios
from autotune.measure.choice._pareto import (
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

__all__ = [
    "DECISIONS",
    "DEFAULT_PICK",
    "Choice",
    "Decision",
    "Pick",
    "Point",
    "baseline_figures",
    "choose",
    "choose_point",
    "decide",
    "front",
    "metrics",
    "parse_pick",
    "pay_back_sentence",
    "point_figures",
    "points",
    "recorded_ratios",
    "subjects_to_confirm",
]
