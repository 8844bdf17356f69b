"""A search's budget (--trials, --timeout, --time-budget, --max-failure-rate): whether another trial may start, and which
search of a shared study confirms. A trial's own budget is its compile time (`--compile-budget`)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

import optuna

from autotune.study.report import Plan
from autotune.study.search._loop import TrialLoop
from autotune.study.search._options import SearchOptions
from autotune.study.storage import failure_of, read_study_record, record_of, shown, update_study_record

__all__ = ["SearchBudget", "confirmation_seconds"]


class SearchBudget:
    """--trials, --timeout and --max-failure-rate for one search session, in a study other searches may share."""

    def __init__(
        self,
        options: SearchOptions,
        loop: TrialLoop,
        note: Callable[[str], None],
        *,
        started: float,
        plan: Plan | None = None,
    ) -> None:
        self.options = options
        self.plan = plan
        """What the search has ahead (`Plan`): --time-budget keeps a typical trial and the confirmation free."""
        self.loop = loop
        self.study = loop.study
        self.note = note
        self.started = started
        """When the search started (time.monotonic()): --timeout counts from there."""
        self.completed_before = False
        """Whether the study's budget was complete, with nothing running, when this session started."""

    def start(self) -> None:
        """Fail abandoned trials, and note whether the budget was already complete."""
        self.loop.ledger.reap_abandoned()
        ledger = self.loop.ledger
        self.completed_before = ledger.started() >= self.options.trials and not ledger.running()

    def others_finish_it(self) -> bool:
        """Whether other searches of a shared study run the trials that complete its budget: the confirmation waits."""
        return (
            self.loop.ledger.shared
            and self.loop.ledger.started() >= self.options.trials
            and self.loop.ledger.running() > 0
        )

    def confirms(self) -> bool:
        """Whether this search confirms and exports the shared study it searched; says why not.

        The search that finished the study's last trial does, so that one host confirms,
        after every trial; so does a search started once the budget was complete (how a
        confirmation lost with its host is done again).
        """
        if self.completed_before:
            return True
        export = f"`autotune export --storage {shown(self.options.storage_url)} --study-name {self.options.name}`"
        if self.loop.ledger.running():
            self.note(f"other searches still run trials of the study: the last to finish confirms; then {export}")
            return False
        # A trial failed as abandoned was ended by whoever noticed, and one interrupted ended with its search (Ctrl-C):
        # neither search is there to confirm.
        study = read_study_record(self.study)
        done = [
            t
            for t in self.loop.ledger.finished()
            if t.datetime_complete and failure_of(t, study)[0] not in ("abandoned", "interrupted")
        ]
        last = max(done, key=lambda t: (t.datetime_complete, t.number), default=None)
        mine = (socket.gethostname(), os.getpid())
        ran = record_of(last) if last is not None else None
        if last is None or ran is None or (ran.host, ran.pid) == mine:
            return True
        self.note(
            f"the study's trials are done; the search that finished the last one (trial {last.number}: pid "
            f"{ran.pid} on {ran.host}) confirms and exports; then {export} "
            "writes the files here"
        )
        return False

    def more(self) -> bool:
        # A dead search's trials first: each frees its place in the budget, or queues its retry.
        self.loop.ledger.reap_abandoned()
        finished = self.loop.ledger.finished()
        if self.loop.ledger.started() >= self.options.trials:
            return False
        if self.loop.exhausted:
            self.note(f"every configuration of the space was measured after {len(finished)} trials")
            return False
        if self.options.timeout is not None and time.monotonic() - self.started > self.options.timeout:
            self.note(f"--timeout {self.options.timeout:.0f} s reached after {len(finished)} trials")
            return False
        if self._past_time_budget(len(finished)):
            return False
        # A trial failed unrun, for holding an explained failure's settings, cost nothing: it is no failure rate's.
        counted = [t for t in finished if record_of(t).holds_culprit_of is None]
        failed = [t for t in counted if t.state == optuna.trial.TrialState.FAIL]
        if len(counted) >= 5 and len(failed) / len(counted) > self.options.max_failure_rate:
            study = read_study_record(self.study)
            reasons = sorted({failure_of(t, study)[0] or "?" for t in failed})
            note = (
                f"stopped searching: {len(failed)} of {len(counted)} trials failed, more than --max-failure-rate "
                f"{self.options.max_failure_rate:.0%} (reasons: {', '.join(reasons)}); what completed is still confirmed"
            )
            update_study_record(self.study, stopped=note)
            self.note(note)
            return False
        return True

    def _past_time_budget(self, finished: int) -> bool:
        """Whether another trial, then the confirmation, would end past --time-budget; says so when it would."""
        budget, plan = self.options.time_budget, self.plan
        if budget is None or plan is None or plan.typical_run is None:
            return False  # nothing timed yet: the baselines and the first trial say what a trial costs
        spent = time.monotonic() - self.started
        after = (plan.confirmation_seconds_guess or 0.0) + plan.cache * plan.typical_run
        if spent + plan.typical_run + after <= budget:
            return False
        what = "the confirmation and the compile cache" if plan.cache else "the confirmation"
        self.note(
            f"--time-budget {budget:.0f} s: {spent:.0f} s spent, and another trial (about {plan.typical_run:.0f} s) "
            f"with {what} (about {after:.0f} s) would pass it; no more trials after {finished}"
        )
        return True


def confirmation_seconds(options: SearchOptions, started: float, now: float, reserve: float = 0.0) -> float | None:
    """What --time-budget leaves the confirmation (None without one): the rest of the budget less `reserve` (the
    compile cache's runs after it), at least 1 s; the confirmation runs its least replicates whatever this is, and
    adds none once it is spent."""
    if options.time_budget is None:
        return None
    return max(options.time_budget - (now - started) - reserve, 1.0)
