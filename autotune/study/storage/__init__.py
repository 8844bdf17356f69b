"""Where a study's records live: opening Optuna storages, the study's record and each trial's, the liveness of a shared
study's trials, the scale of its search-time figures, and the retune history file.

Nothing outside this package reads or writes an Optuna study's or trial's user attributes: it reads and writes the
records (`read_study_record`, `update_study_record`; `record_of`, `update_record`, `queue_trial`)."""

from __future__ import annotations

from autotune.study.storage._explanation import COMPILER_FAILURES, Explanation
from autotune.study.storage._heartbeat import (
    BEAT_KEY,
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
from autotune.study.storage._scale import REFERENCES, adopt_scale, scaled_baselines, study_scale
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
from autotune.study.storage._study_record import (
    STUDY_KEY,
    CompileCacheRecord,
    ReferenceLevels,
    SearchSession,
    SearchSettings,
    SessionBaselines,
    StudyRecord,
    ValueScale,
    read_study_record,
    update_study_record,
    write_study_record,
)
from autotune.study.storage._trial_record import (
    TRIAL_KEY,
    TrialRecord,
    queue_trial,
    queued_attrs,
    record_of,
    update_record,
    write_record,
)
from autotune.study.storage._values import trial_rank, trial_value

__all__ = [
    "COMPILER_FAILURES",
    "CompileCacheRecord",
    "Explanation",
    "HISTORY_FILE",
    "Heartbeat",
    "Liveness",
    "TrialRecord",
    "BEAT_KEY",
    "MAX_RETRIES",
    "REFERENCES",
    "ReferenceLevels",
    "STUDY_KEY",
    "SearchSession",
    "SearchSettings",
    "SessionBaselines",
    "StudyRecord",
    "TRIAL_KEY",
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
    "queue_trial",
    "queued_attrs",
    "read_study_record",
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
    "update_study_record",
    "write_record",
    "write_study_record",
]
