"""Where a study's records live: opening Optuna storages, the liveness of a shared study's trials, the scale of its
search-time figures, and the retune history file."""

from __future__ import annotations

from autotune.study.storage._heartbeat import (
    ABANDONED,
    MAX_RETRIES,
    Heartbeat,
    Liveness,
    beats,
    fail_stale,
    failure_of,
    grace_period,
    retried_numbers,
    trial_id,
)
from autotune.study.storage._history import HISTORY_FILE, append_history, read_history
from autotune.study.storage._scale import (
    REFERENCES,
    VALUE_SCALE,
    ValueScale,
    adopt_scale,
    scaled_baselines,
    study_scale,
)
from autotune.study.storage._storage import (
    check_storage_url,
    create_study,
    discard_study,
    load_search_study,
    open_storage,
    opened_in,
    shown,
    storage_failures_named,
)
from autotune.study.storage._trial_record import (
    TRIAL_KEY,
    TrialRecord,
    queued_attrs,
    record_of,
    update_record,
    write_record,
)
from autotune.study.storage._values import trial_rank, trial_value

__all__ = [
    "ABANDONED",
    "HISTORY_FILE",
    "Heartbeat",
    "Liveness",
    "TrialRecord",
    "MAX_RETRIES",
    "REFERENCES",
    "TRIAL_KEY",
    "VALUE_SCALE",
    "ValueScale",
    "adopt_scale",
    "append_history",
    "beats",
    "check_storage_url",
    "create_study",
    "discard_study",
    "fail_stale",
    "failure_of",
    "grace_period",
    "load_search_study",
    "open_storage",
    "queued_attrs",
    "record_of",
    "opened_in",
    "read_history",
    "retried_numbers",
    "scaled_baselines",
    "shown",
    "storage_failures_named",
    "study_scale",
    "trial_id",
    "trial_rank",
    "trial_value",
    "update_record",
    "write_record",
]
