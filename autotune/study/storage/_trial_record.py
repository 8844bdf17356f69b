"""What a search records of one trial: one typed, versioned record under one user attribute of the Optuna trial.

A search writes the record as the trial goes (what was queued, what ran, its run, its figures
against the session's baselines) and every reader takes it back as a `TrialRecord`
(`record_of`). Studies written before the record existed hold the same facts as about forty
loose user attributes; `record_of` reads those through one converter (`TrialRecord.from_loose`),
so an old study resumes, reports and retunes as before.

Two rates are kept apart that the loose attributes mixed: `run` holds the trial's own run, its
own samples per second; `scaled_samples_per_second` and `scaled_batches_per_second` hold the
rates the trial was told to Optuna and ranked by, put on the study's scale (paired with the live
reference, or the reference's rates for a trial that reused plain compile's run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from autotune.errors import ConfigError, RecordError
from autotune.runtime.config import CompileConfig
from autotune.trial.run_record import RunRecord

__all__ = ["TRIAL_KEY", "TrialRecord", "queue_trial", "queued_attrs", "record_of", "update_record", "write_record"]

TRIAL_KEY = "trial"
"""The one user attribute of an Optuna trial that holds its record."""

VERSION = 2
"""The record's layout; a record of a later version is refused by name, not misread. Version 2 names
the paired windows' count `paired_windows` where version 1 had `paired_blocks`."""
_RENAMED = {"paired_blocks": "paired_windows"}
"""Fields of version 1, and of the loose attributes before the record, by their name since."""


class _HasUserAttrs(Protocol):
    @property
    def user_attrs(self) -> dict[str, Any]: ...


class _Settable(_HasUserAttrs, Protocol):
    def set_user_attr(self, key: str, value: Any) -> None: ...


class _Queue(Protocol):
    def enqueue_trial(
        self, params: dict[str, Any], user_attrs: dict[str, Any] | None = None, skip_if_exists: bool = False
    ) -> None: ...


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """Everything a search records of one trial, from the moment it is queued to its last figure."""

    # Why it was asked: set when it was queued.
    recipe: str | None = None
    """The recipe a new study seeded it with."""
    retune: str | None = None
    """The day of the retune that queued it again."""
    retune_role: str | None = None
    """'incumbent' (the configuration being retuned) or 'previous' (an earlier top trial), for a retune's queue."""
    previous_trial: int | None = None
    """The earlier trial a retune queued again."""
    retry_of: int | None = None
    """The trial whose search stopped beating, which this one runs again."""

    # What it ran, and who ran it.
    config: dict[str, Any] | None = None
    """The effective configuration (`CompileConfig.to_dict`)."""
    description: str = ""
    created: str | None = None
    """When its generated code was made (UTC, ISO 8601)."""
    source_sha256: str | None = None
    """The digest of the generated code it ran."""
    host: str | None = None
    pid: int | None = None
    """The search process that ran it: a shared study's liveness and cost are told by host and pid."""
    device: str | None = None
    """The device it ran on, where not the search's first device."""
    ran_alone: str = ""
    """Why it ran again alone on its device (out of memory beside other workers)."""

    # Where its outcome came from when it is not its own run.
    reused_run: str = ""
    """The run it took instead of running (the plain torch.compile baseline's)."""
    duplicate_of: int | None = None
    """The earlier trial of the same configuration whose outcome it copies."""
    holds_culprit_of: int | None = None
    """The explained trial whose culprit settings its configuration holds: it failed as that one did, unrun."""

    # Its run.
    run: RunRecord | None = None
    """Its run: state, reason and message, and its own figures; None while it runs."""
    first_run_samples_per_second: float | None = None
    """The cold run's pass over the stream, right after compiling."""
    measured_between: list[float] = field(default_factory=list)
    """Monotonic seconds its windows began and ended (workers of one device measure one at a time)."""

    # Against the baselines of the session that ran it.
    baselines_of: str | None = None
    """The host whose search session's baselines its speedups are against."""
    speedup_vs_compile: float | None = None
    speedup_vs_eager: float | None = None
    scaled_samples_per_second: float | None = None
    """The rate it was told and ranked by, on the study's scale; None where that is its run's own."""
    scaled_batches_per_second: float | None = None
    paired_ratio: float | None = None
    """Its rate over the live reference's, window by window, the reference's level not taken out."""
    reference_level: float | None = None
    reference_anchors: int | None = None
    paired_windows: int | None = None
    """The windows the trial measured beside the live reference's."""
    reference_samples_per_second: float | None = None

    # -- reading ------------------------------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """The run's state; '' while it runs."""
        return self.run.state if self.run is not None else ""

    @property
    def reason(self) -> str:
        return self.run.reason if self.run is not None else ""

    @property
    def message(self) -> str:
        return self.run.message if self.run is not None else ""

    @property
    def own(self) -> RunRecord:
        """Its run as it ran (an empty failed record while there is none)."""
        return self.run if self.run is not None else RunRecord(state="")

    @property
    def samples_per_second(self) -> float | None:
        """The rate every table and plot shows: on the study's scale where it was put there, else its own."""
        return (
            self.scaled_samples_per_second
            if self.scaled_samples_per_second is not None
            else self.own.samples_per_second
        )

    @property
    def configuration(self) -> dict[str, Any] | None:
        """Its configuration as this autotune writes it, for comparing trials: an older study's record may spell a
        setting at its neutral value where today's leaves it out (`recompile_limit: null`, before it was a knob).
        As stored where this autotune cannot read it."""
        if self.config is None:
            return None
        try:
            return CompileConfig.from_dict(self.config).to_dict()
        except ConfigError:
            return self.config

    @property
    def measured(self) -> bool:
        """Whether its figures are its own measurement: not a copy of a twin's nor plain compile's run reused."""
        return self.duplicate_of is None and not self.reused_run

    def told(self) -> RunRecord:
        """Its run with the rates it was told to Optuna: what its objective's value was taken from."""
        run = self.own
        return replace(
            run,
            samples_per_second=self.samples_per_second,
            batches_per_second=self.scaled_batches_per_second or run.batches_per_second,
        )

    def copied_from(self, twin: TrialRecord, number: int) -> TrialRecord:
        """This trial taking the outcome of `twin`, trial `number` of the same configuration: why this one was
        asked and who ran it stay its own, everything measured is the twin's."""
        return replace(twin, **self._asked(), retry_of=self.retry_of, host=self.host, pid=self.pid, duplicate_of=number)

    def requeued(self, number: int) -> TrialRecord:
        """The record of this trial's configuration queued again after its search stopped: why it was asked."""
        return TrialRecord(**self._asked(), retry_of=number)

    def _asked(self) -> dict[str, Any]:
        """Why it was asked: what a copy of another trial's outcome or a retry keeps of its own."""
        return {name: getattr(self, name) for name in ("recipe", "retune", "retune_role", "previous_trial")}

    def flat(self) -> dict[str, Any]:
        """One flat mapping of every figure, for tables: the run's fields, then the trial's; `samples_per_second`
        is the scaled rate and `own_samples_per_second` the run's own beside it."""
        # The run record's version says how it was written, not what it measured: no column of a table.
        data: dict[str, Any] = {k: v for k, v in self.own.to_dict().items() if k != "version"} if self.run else {}
        for f in fields(self):
            if f.name in ("run", "scaled_samples_per_second", "scaled_batches_per_second"):
                continue
            value = getattr(self, f.name)
            if value not in (None, "", [], {}):
                data[f.name] = value
        if self.scaled_samples_per_second is not None:
            data["own_samples_per_second"] = self.own.samples_per_second
            data["samples_per_second"] = self.scaled_samples_per_second
        if self.scaled_batches_per_second is not None:
            data["batches_per_second"] = self.scaled_batches_per_second
        return data

    # -- storing ------------------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The stored form: its version and every field that holds something, the run as `RunRecord.to_dict`."""
        data: dict[str, Any] = {"version": VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "run":
                value = value.to_dict() if value is not None else None
            if value not in (None, "", [], {}):
                data[f.name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialRecord:
        """The record `to_dict` stored; a later version or a field this version lacks is a RecordError naming it."""
        if not isinstance(data, Mapping):
            raise RecordError(f"a trial record must be a mapping, got {type(data).__name__}: {data!r:.200}")
        version = data.get("version")
        if not isinstance(version, int) or not 1 <= version <= VERSION:
            raise RecordError(
                f"a trial record of version {version!r}: this autotune reads versions 1 to {VERSION}; "
                "a study written by a later autotune needs that version to read it"
            )
        names = {f.name for f in fields(cls)}
        data = _renamed(data)
        unknown = sorted(set(data) - names - {"version"})
        if unknown:
            raise RecordError(
                f"a trial record of version {version} has unknown field(s) {', '.join(unknown)}; "
                f"its fields are {', '.join(sorted(names))}"
            )
        values = {k: v for k, v in data.items() if k != "version"}
        run = values.pop("run", None)
        if run is not None:
            if not isinstance(run, Mapping):
                raise RecordError(f"a trial record's run must be a mapping, got {type(run).__name__}")
            values["run"] = RunRecord.from_dict(run)
        return cls(**values)

    @classmethod
    def from_loose(cls, attrs: Mapping[str, Any]) -> TrialRecord:
        """A trial of a study written before the record: its facts as loose user attributes, read the one way.

        There `samples_per_second` was the scaled rate when `own_samples_per_second` stood beside it (a
        paired trial, or plain compile's run reused), and `batches_per_second` was scaled only for the reused run.
        """
        names = {f.name for f in fields(cls)} - {"run", "scaled_samples_per_second", "scaled_batches_per_second"}
        attrs = _renamed(attrs)
        values: dict[str, Any] = {k: attrs[k] for k in names if attrs.get(k) is not None}
        run_fields = dict(attrs)
        if "own_samples_per_second" in attrs:
            values["scaled_samples_per_second"] = attrs.get("samples_per_second")
            run_fields["samples_per_second"] = attrs["own_samples_per_second"]
            if attrs.get("reused_run"):
                values["scaled_batches_per_second"] = attrs.get("batches_per_second")
        if _RUN_FIELDS & set(attrs):
            values["run"] = RunRecord.from_dict(run_fields)
        return cls(**values)


_RUN_FIELDS = {f.name for f in fields(RunRecord)}


def _renamed(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with the fields an earlier version named otherwise under their names since (`_RENAMED`)."""
    return {_RENAMED.get(k, k): v for k, v in data.items()}


def record_of(trial: _HasUserAttrs) -> TrialRecord:
    """The record of an Optuna trial, frozen or running: stored whole, or converted from an older study's attributes."""
    attrs = trial.user_attrs
    stored = attrs.get(TRIAL_KEY)
    if stored is not None:
        return TrialRecord.from_dict(stored)
    return TrialRecord.from_loose(attrs)


def update_record(trial: _Settable, **changes: Any) -> TrialRecord:
    """Write `changes` into a running trial's record, in the one attribute; the record as it now stands."""
    return write_record(trial, replace(record_of(trial), **changes))


def write_record(trial: _Settable, record: TrialRecord) -> TrialRecord:
    """Store `record` as a running trial's whole record."""
    trial.set_user_attr(TRIAL_KEY, record.to_dict())
    return record


def queued_attrs(record: TrialRecord) -> dict[str, Any]:
    """The user attributes to queue a trial with (`Study.enqueue_trial`): its record, as asked."""
    return {TRIAL_KEY: record.to_dict()}


def queue_trial(study: _Queue, params: dict[str, Any], record: TrialRecord, *, skip_if_exists: bool = False) -> None:
    """Queue a trial of `params` in `study` (`Study.enqueue_trial`) with `record` as its record: why it was asked.
    `skip_if_exists`: not where a trial of the same parameters is already there, run or waiting."""
    study.enqueue_trial(params, user_attrs=queued_attrs(record), skip_if_exists=skip_if_exists)
