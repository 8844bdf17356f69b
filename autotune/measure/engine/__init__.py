"""The engine: subjects run in fresh processes, replicates of interleaved paired windows, and the campaign that records them until the question is decided."""

from __future__ import annotations

from autotune.measure.engine._callbacks import COLD_COMPILE, ReplicateCallback, RunCallback, run_label, run_text
from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._engine import measure
from autotune.measure.engine._harness import BASELINES, Harness, Subject, with_protocol
from autotune.measure.engine._proof import CacheProof, Loaded, Saved
from autotune.measure.engine._replicate import (
    Replicate,
    ReplicatePlan,
    batches_for,
    calibrate,
    co_residence,
    expected_replicate_seconds,
    take_turns,
    turn_orders,
)
from autotune.measure.engine._rules import (
    VALIDATION_MAX_REPLICATES,
    VALIDATION_PRECISION,
    VALIDATION_REPLICATES,
    VALIDATION_SECONDS,
    CampaignRules,
    confirmation_rules,
    first_windows,
    validation_rules,
)
from autotune.measure.engine._starts import has_warm_cache

__all__ = [
    "BASELINES",
    "COLD_COMPILE",
    "VALIDATION_MAX_REPLICATES",
    "VALIDATION_PRECISION",
    "VALIDATION_REPLICATES",
    "VALIDATION_SECONDS",
    "CampaignRules",
    "CacheProof",
    "Campaign",
    "Harness",
    "Loaded",
    "Replicate",
    "ReplicateCallback",
    "ReplicatePlan",
    "RunCallback",
    "Saved",
    "Subject",
    "batches_for",
    "calibrate",
    "co_residence",
    "confirmation_rules",
    "expected_replicate_seconds",
    "first_windows",
    "has_warm_cache",
    "measure",
    "run_label",
    "run_text",
    "take_turns",
    "turn_orders",
    "validation_rules",
    "with_protocol",
]
