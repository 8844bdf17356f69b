"""The search: the space, where a study starts, one trial (ask, run, prune, tell), several at once, and the session that drives them."""

from __future__ import annotations

from autotune.runtime.features import FEATURES, has_feature
from autotune.study.search._budget import SearchBudget
from autotune.study.search._culprits import Culprits, holds
from autotune.study.search._dry_run import DryRun, Estimate, dry_run, estimate
from autotune.study.search._effort import EFFORTS, Effort, effort
from autotune.study.search._known import (
    INFERENCE_ONLY_OPTIONS,
    KNOWN_MODES,
    KNOWN_OPTIONS,
    KnownOption,
    known_option_needs,
)
from autotune.study.search._ledger import FINISHED, StudyLedger
from autotune.study.search._lengths import observed_lengths, shared_length_groups
from autotune.study.search._loop import DETERMINISTIC_FAILURES, TrialLoop
from autotune.study.search._monitor import MIN_COMPILE_BUDGET, LoopOptions, Monitor, Watched, compile_limit
from autotune.study.search._opening import forget_new_study, open_search_study
from autotune.study.search._options import PRUNERS, SAMPLERS, SearchOptions, default_study_name
from autotune.study.search._params import params_for
from autotune.study.search._pool import TrialPool, worker_devices
from autotune.study.search._prepare import Prepared, prepare_workload
from autotune.study.search._seeds import (
    PAD_MULTIPLE,
    expert_recipes,
    seed_params,
    seed_study,
    space_recipes,
    stacked_recipes,
    study_seeds,
)
from autotune.study.search._session import CACHES_FOLDER, explore, search
from autotune.study.search._space import SearchSpace, adapt
from autotune.study.search._space_file import BUNDLED_DIR, MAX_CHOICES, bundled_spaces, load_space, resolve_space_path

__all__ = [
    "Culprits",
    "holds",
    "known_option_needs",
    "BUNDLED_DIR",
    "CACHES_FOLDER",
    "DETERMINISTIC_FAILURES",
    "DryRun",
    "EFFORTS",
    "Effort",
    "Estimate",
    "FEATURES",
    "FINISHED",
    "INFERENCE_ONLY_OPTIONS",
    "KNOWN_MODES",
    "KNOWN_OPTIONS",
    "KnownOption",
    "LoopOptions",
    "MAX_CHOICES",
    "MIN_COMPILE_BUDGET",
    "Monitor",
    "PAD_MULTIPLE",
    "PRUNERS",
    "Prepared",
    "SAMPLERS",
    "SearchOptions",
    "SearchSpace",
    "StudyLedger",
    "SearchBudget",
    "TrialLoop",
    "TrialPool",
    "Watched",
    "adapt",
    "bundled_spaces",
    "compile_limit",
    "default_study_name",
    "dry_run",
    "effort",
    "estimate",
    "expert_recipes",
    "explore",
    "forget_new_study",
    "has_feature",
    "load_space",
    "open_search_study",
    "params_for",
    "prepare_workload",
    "resolve_space_path",
    "search",
    "seed_params",
    "seed_study",
    "space_recipes",
    "stacked_recipes",
    "study_seeds",
    "observed_lengths",
    "shared_length_groups",
    "worker_devices",
]
