"""A retune's warm-started search: the incumbent and the previous top trials again, then a few new ones.

It runs in the tuned configuration's own study, with the study's own settings, so the
history accumulates and new trials are measured as the first ones were; what it returns
is the best challenger found today, for the retune's campaign to measure against the
incumbent.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import optuna

from autotune.errors import SearchError
from autotune.measure import Harness, Objective, Subject
from autotune.runtime.config import CompileConfig
from autotune.runtime.tuned import TunedConfig
from autotune.study.report import ProgressCallback
from autotune.study.search import CACHES_FOLDER, PRUNERS, SAMPLERS, SearchOptions, SearchSpace, explore, params_for
from autotune.study.storage import (
    SearchSettings,
    TrialRecord,
    load_search_study,
    queue_trial,
    record_of,
    trial_rank,
    trial_value,
)

__all__ = ["WarmStart"]


@dataclass(kw_only=True)
class WarmStart:
    """Everything the warm-started search needs to know about the retune that runs it."""

    study: optuna.Study
    storage: str | None
    """The storage as best.yaml names it (None: study.db beside it)."""
    storage_url: str
    out_dir: str
    tuned: TunedConfig
    harness: Harness
    space: SearchSpace
    space_name: str
    """A bundled space's name or a file's path, as the search takes it."""
    settings: SearchSettings
    objective: Objective
    trials: int
    top: int
    trial_timeout: float
    date: str
    progress: ProgressCallback
    note: Callable[[str], None]

    def challenger(self) -> tuple[optuna.Study, Subject | None]:
        """Run the search; returns the study as it is now and the best new configuration, if any."""
        first = len(self.study.trials)
        queued = self._enqueue()
        planned = queued + self.trials
        if planned:
            self.note(f"warm-started search: {queued} earlier configuration(s) again, then {self.trials} new trial(s)")
            finished = sum(1 for t in self.study.get_trials(deepcopy=False) if t.state.is_finished())
            try:
                self.study = explore(self._options(finished + planned, first), self.progress)
            except SearchError as exc:
                # What was measured is in the study; the retune's campaign still decides.
                self.note(f"the warm-started search stopped early: {exc}")
                self.study = load_search_study(self.storage_url, self.study.study_name)
        mine = self.tuned.config.to_dict()
        candidates = [
            t for t in self._complete() if t.number >= first and record_of(t).configuration not in (None, mine)
        ]
        if not candidates:
            return self.study, None
        best = max(candidates, key=lambda t: trial_rank(t, self.objective))
        record = record_of(best)
        config = CompileConfig.from_dict(record.config or {})
        # Its run in this search was its first: the campaign starts it warm from the cache that run filled.
        return self.study, Subject(
            name="challenger",
            config=config,
            created=record.created,
            trial=best.number,
            cache_dir=str(Path(self.out_dir) / CACHES_FOLDER / f"trial-{best.number}"),
            cold=replace(record.told(), state="complete"),
        )

    def _complete(self) -> list[optuna.trial.FrozenTrial]:
        return [
            t
            for t in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if record_of(t).duplicate_of is None and record_of(t).config is not None and trial_value(t) is not None
        ]

    def _options(self, trials: int, first: int) -> SearchOptions:
        """The study's own settings, so the new trials are measured as the first ones were."""
        return SearchOptions(
            model=self.harness.spec,
            space=self.space_name,
            trials=trials,
            trial_timeout=self.trial_timeout,
            device=self.harness.device,
            out=self.out_dir,
            study_name=self.study.study_name,
            storage=self.storage,
            sampler=self._sampler(),
            pruner=self._pruner(),
            seed=self.harness.seed,
            objective=str(self.objective),
            protocol=self.harness.protocol,
            confirm=0,
            compile_cache=False,
            reuse_since=first,
            workers=1,  # as the study's first trials were measured (a retune short enough not to need more)
        )

    def _pruner(self) -> str:
        """The study's pruner, or the default, median, where a library caller passed an object of its own."""
        pruner = self.settings.pruner or "median"
        return pruner if pruner in PRUNERS else "median"

    def _sampler(self) -> str:
        """The study's sampler; a brute-force one only where it can enumerate today's space with the study's trials.

        Optuna's brute-force sampler builds one tree of every trial's answers: a trial of a space that asked
        other questions (a narrower one, before the space grew) makes it fail. Whether it would is tried on a
        copy of the trials in memory; if so, the warm start draws at random, and says so.
        """
        sampler = self.settings.sampler or "tpe"
        if sampler not in SAMPLERS:  # an object a library caller passed: its settings are not recorded
            self.note(f"the study's sampler was a {sampler} object: the new trials use the default, tpe")
            return "tpe"
        if sampler != "bruteforce":
            return sampler
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            trial_run = optuna.create_study(sampler=optuna.samplers.BruteForceSampler(seed=0))
        trial_run.add_trials(self._complete())
        try:
            probe = trial_run.ask()
            self.space.suggest(probe)
            with contextlib.suppress(RuntimeError):  # every configuration tried: it asks to stop, which is no failure
                trial_run.tell(probe, 0.0)
        except ValueError as exc:
            self.note(
                f"the study's brute-force sampler cannot enumerate the space '{self.space.name}' with the study's "
                f"trials, which answered other questions ({exc}): the new trials are drawn at random"
            )
            return "random"
        return sampler

    def _enqueue(self) -> int:
        """Enqueue the incumbent and the previous top trials as this space would ask for them."""
        wanted: list[tuple[CompileConfig, TrialRecord]] = []
        if self.tuned.config.scope != "none" and self.tuned.config != CompileConfig():
            # A baseline incumbent is measured by the campaign anyway; a configuration is searched again.
            wanted.append((self.tuned.config, TrialRecord(retune=self.date, retune_role="incumbent")))
        complete = sorted(self._complete(), key=lambda t: trial_rank(t, self.objective), reverse=True)
        seen = [self.tuned.config.to_dict()]
        for trial in complete:
            if len(seen) > self.top:
                break
            recorded = record_of(trial).configuration or {}
            if recorded not in seen:
                seen.append(recorded)
                config = CompileConfig.from_dict(recorded)
                why = TrialRecord(retune=self.date, retune_role="previous", previous_trial=trial.number)
                wanted.append((config, why))
        queued = 0
        for config, why in wanted:
            params = params_for(self.space, config)
            if params is None:
                self.note(
                    f"{config.describe()} is not in the space '{self.space.name}' any more, so it is not searched again"
                )
                continue
            queue_trial(self.study, params, why)
            queued += 1
        return queued
