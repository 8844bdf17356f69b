"""What a search does with failures a setting causes: narrow each to its culprit settings, and run none of them again.

With `--explain-failures` (on under `--effort thorough`), a trial that fails for a reason a
setting can cause is narrowed right after it fails (`autotune.study.explain`), within its budget,
and the explanation goes into the study's record. Whether or not this search explained them, every
explanation the study holds is read before a trial runs: a sampled configuration that holds a
culprit's every setting would fail as that trial did, so it is failed at once, unrun, naming the
trial it follows (`TrialRecord.holds_culprit_of`). Such trials do not count towards
`--max-failure-rate`: they cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import optuna

from autotune.measure import Harness
from autotune.runtime.config import CompileConfig
from autotune.study.explain import default_budget, explain_failure, explainable, settings_of
from autotune.study.search._known import known_option_needs
from autotune.study.storage import Explanation, read_study_record, update_study_record
from autotune.trial.run_record import RunRecord

__all__ = ["Culprits", "holds"]


def holds(config: CompileConfig, explanation: Explanation) -> bool:
    """Whether `config` makes every culprit setting of `explanation`, at the culprit's value."""
    if not explanation.described or explanation.against != "plain compile":
        return False  # nothing to avoid: plain compile fails too, or nothing was kept
    return set(explanation.described) <= {setting.text for setting in settings_of(config)}


class Culprits:
    """A search session's explanations: narrowing its new failures, and the culprit settings its trials avoid."""

    def __init__(
        self,
        study: optuna.Study,
        out_dir: Path,
        *,
        explain: bool,
        budget: float | None,
        note: Callable[[str], None],
    ) -> None:
        self.study = study
        self.out_dir = out_dir
        self.explain = explain
        self.budget = budget
        self.note = note

    def held_by(self, config: CompileConfig) -> Explanation | None:
        """The study's explanation whose culprit settings `config` holds, if any (the earliest trial's)."""
        explanations = read_study_record(self.study).explanations
        return next((e for _, e in sorted(explanations.items()) if holds(config, e)), None)

    def after_failure(self, harness: Harness, number: int, config: CompileConfig, run: RunRecord) -> None:
        """Narrow trial `number`'s failure, where this search explains failures and a setting can cause it."""
        if not self.explain or not explainable(run.reason):
            return
        budget = self.budget if self.budget is not None else default_budget(run.wall_seconds)
        explanation = explain_failure(
            harness,
            number,
            config,
            reason=run.reason,
            message=run.message,
            budget=budget,
            out_dir=self.out_dir,
            option_needs=known_option_needs(),
            note=self.note,
        )
        update_study_record(self.study, explanations={number: explanation})
