"""What a search records of its study as a whole: one typed, versioned record under one user attribute of the study.

The study's own state (what the search was asked, the baselines and reference levels it measured,
the doctor's findings, the confirmation, the compile cache, what the last session cost) is one
`StudyRecord`, stored whole under `STUDY_KEY`. Every reader takes it back as that type
(`read_study_record`) and every writer changes named fields of it (`update_study_record`); no
other module reads or writes a study's user attributes.

Studies written before the record hold the same facts as about two dozen loose study attributes
(`settings`, `baseline.eager`, `reference_levels:cpu`, `abandoned:7`, ...). `read_study_record`
reads those through one converter (`StudyRecord.from_loose`) with the defaults their readers used,
so an old study resumes, exports and retunes as before; its first write stores the whole record.

Several hosts may share a study in a database server, and Optuna writes one attribute at a time,
with no way to compare and swap: two hosts that rewrote the record from what each read minutes
before would each undo the other's changes. So a change is applied to the record as read from the
storage just before it is written, and the fields that hold one entry per device, host, trial or
reference (`KEYED_FIELDS`) take the entries given beside the stored ones: only two writes within
the same few milliseconds can still lose one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

from autotune.errors import AutotuneError, RecordError
from autotune.measure import DEFAULT_PICK, Campaign, Objectives
from autotune.runtime.summary import WorkloadSummary
from autotune.study.storage._explanation import Explanation
from autotune.trial.request import RunProtocol
from autotune.trial.run_record import RunRecord

__all__ = [
    "KEYED_FIELDS",
    "STUDY_KEY",
    "CompileCacheRecord",
    "ReferenceLevels",
    "SearchSession",
    "SearchSettings",
    "SessionBaselines",
    "StudyRecord",
    "ValueScale",
    "read_study_record",
    "update_study_record",
    "write_study_record",
]

STUDY_KEY = "study"
"""The one user attribute of an Optuna study that holds its record."""

VERSION = 1
"""The record's layout; a record of a later version is refused by name, not misread."""

REFERENCES = ("compile", "eager")
"""The baselines a search pairs trials with: plain torch.compile, or eager where plain compile failed."""

KEYED_FIELDS = ("host_baselines", "reference_levels", "scales", "abandoned", "explanations")
"""Fields with one entry per host, device, reference or trial: an update adds its entries beside the stored ones."""


class _HasUserAttrs(Protocol):
    @property
    def user_attrs(self) -> dict[str, Any]: ...


class _Settable(_HasUserAttrs, Protocol):
    def set_user_attr(self, key: str, value: Any) -> None: ...


# -- the record's parts -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """How the search was set up, as the latest session that opened the study was asked."""

    sampler: str = ""
    """The sampler's name (`--sampler`, or the class of the caller's own object)."""
    pruner: str = ""
    seed: int = 0
    protocol: dict[str, Any] = field(default_factory=dict)
    """The measurement protocol as the search recorded it (`RunProtocol.to_dict`); `run_protocol` reads it."""
    allow_precision_changes: bool = False
    storage: str = ""
    """The storage as best.yaml names it: 'study.db' for the one beside it, else its URL (password hidden)."""

    @property
    def run_protocol(self) -> RunProtocol:
        """The protocol its trials were measured with (keys of other versions are left out)."""
        return RunProtocol.from_dict(self.protocol)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: object, where: str = "settings") -> SearchSettings:
        return cls(**_fields_of(cls, data, where))


@dataclass(frozen=True, kw_only=True)
class SessionBaselines:
    """Eager and plain torch.compile as one search session measured them: cold first, then warm and paired."""

    eager: RunRecord | None = None
    compile: RunRecord | None = None
    compile_over_eager: float | None = None
    """Plain compile's paired ratio to eager, both warm, where the session paired them."""
    host: str = ""
    """The host that measured them ('' in a study written before the record, for the latest session's)."""
    environment: dict[str, Any] = field(default_factory=dict)
    """The environment they were measured in (`autotune.runtime.environment.fingerprint`)."""
    measured: str = ""
    """When (UTC, ISO 8601)."""

    def of(self, name: str) -> RunRecord:
        """The run of baseline `name` ('eager' or 'compile'); an empty failed record where it was not measured."""
        if name not in REFERENCES:
            raise ValueError(f"baseline {name!r}: the baselines are {', '.join(REFERENCES)}")
        run: RunRecord | None = getattr(self, name)
        return run if run is not None else RunRecord(state="failed")

    def figures(self, name: str) -> dict[str, Any]:
        """Baseline `name`'s figures as one flat mapping, for tables and plots: its run's, and plain compile's ratio
        to eager beside them; empty where it was not measured."""
        run: RunRecord | None = getattr(self, name) if name in REFERENCES else None
        if run is None:
            return {}
        # The run's version says how it was written, not what it measured: no figure of a table.
        data = {k: v for k, v in run.to_dict().items() if k != "version"}
        if name == "compile" and self.compile_over_eager is not None:
            data["speedup_vs_eager"] = self.compile_over_eager
        return data

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, RunRecord):
                value = value.to_dict()
            if value is not None:
                data[f.name] = value
        return data

    @classmethod
    def from_dict(cls, data: object, where: str = "baselines") -> SessionBaselines:
        values = _fields_of(cls, data, where)
        for name in REFERENCES:
            if values.get(name) is not None:
                values[name] = _run(values[name], f"{where}.{name}")
        return cls(**values)

    @classmethod
    def from_loose(cls, eager: object, compile_: object, **session: Any) -> SessionBaselines:
        """From a study written before the record: each baseline's run as a mapping, plain compile's ratio to eager
        among its figures (`speedup_vs_eager`)."""
        over_eager = compile_.get("speedup_vs_eager") if isinstance(compile_, Mapping) else None
        return cls(
            eager=RunRecord.from_dict(eager) if isinstance(eager, Mapping) and eager else None,
            compile=RunRecord.from_dict(compile_) if isinstance(compile_, Mapping) and compile_ else None,
            compile_over_eager=float(over_eager) if isinstance(over_eager, int | float) else None,
            **session,
        )


@dataclass(frozen=True, kw_only=True)
class ValueScale:
    """A reference's rates in the session that began the study: what a search-time ratio of 1 reads as."""

    reference: str
    """The baseline the trials were paired with: one of `REFERENCES`."""
    samples_per_second: float
    batches_per_second: float
    host: str
    measured: str
    """When (UTC, ISO 8601), or which trial it was read from in a study begun before scales were recorded."""

    @property
    def usable(self) -> bool:
        """Whether it can scale anything: both rates are positive."""
        return self.samples_per_second > 0 and self.batches_per_second > 0

    def to_dict(self) -> dict[str, Any]:
        """The stored form, under its reference's name."""
        return {
            "samples_per_second": self.samples_per_second,
            "batches_per_second": self.batches_per_second,
            "host": self.host,
            "measured": self.measured,
        }

    @classmethod
    def from_dict(cls, reference: str, data: object, where: str = "scales") -> ValueScale:
        values = _fields_of(cls, data, f"{where}.{reference}", implied={"reference"})
        return cls(reference=reference, **values)


@dataclass(frozen=True, kw_only=True)
class ReferenceLevels:
    """What the anchors found of the live plain-compile reference on one device (`LiveReference.levels`)."""

    levels: list[float] = field(default_factory=list)
    """Each anchor's estimate of the reference's level: a fresh restart's rate over the live one's, in turn."""
    errors: list[float | None] = field(default_factory=list)
    """The standard error of each level (None where an anchor's windows gave none)."""

    def to_dict(self) -> dict[str, Any]:
        return {"levels": list(self.levels), "errors": list(self.errors)}

    @classmethod
    def from_dict(cls, data: object, where: str = "reference_levels") -> ReferenceLevels:
        return cls(**_fields_of(cls, data, where))


@dataclass(frozen=True, kw_only=True)
class CompileCacheRecord:
    """The compile cache the search saved beside best.yaml, and which confirmation subject it was saved for."""

    subject: str
    """The confirmation's subject it holds the artifacts of: an export of another subject leaves it out."""
    section: dict[str, Any] = field(default_factory=dict)
    """best.yaml's `compile_cache` section for it (`autotune.runtime.compile_cache`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "section": dict(self.section)}

    @classmethod
    def from_dict(cls, data: object, where: str = "compile_cache") -> CompileCacheRecord:
        return cls(**_fields_of(cls, data, where))


@dataclass(frozen=True, kw_only=True)
class SearchSession:
    """The search session that confirmed and exported the study: whose trials its cost counts."""

    host: str = ""
    pid: int | None = None
    workers: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "workers": self.workers}

    @classmethod
    def from_dict(cls, data: object, where: str = "search_session") -> SearchSession:
        return cls(**_fields_of(cls, data, where))


# -- the record ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StudyRecord:
    """Everything a search records of its study as a whole; each trial's own facts are its `TrialRecord`."""

    # What the search was asked: written each time a session opens the study.
    objective: str = "throughput"
    """The objective(s), as `Objectives` spells them; `objectives` reads them."""
    pick: str = DEFAULT_PICK
    """How a multi-objective study's Pareto point is picked (`--pick`)."""
    model: str = ""
    """The workload target, 'pkg.mod:attr'."""
    device: str = ""
    space: str = ""
    """The search space's name."""
    settings: SearchSettings = field(default_factory=SearchSettings)
    method: dict[str, Any] | None = None
    """The measurement method the study's search-time figures were measured with (`METHOD`): the first session's."""
    workload: WorkloadSummary | None = None
    """The workload as the search described it; None for a study no search has opened."""
    model_fingerprint: dict[str, Any] | None = None
    """The model's class, parameter count and batch shapes (`environment.model_fingerprint`), at the latest session
    or retune."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Where the study was last measured (`environment.fingerprint`): a resumed search must match it."""

    # What the search measured besides its trials.
    baselines: SessionBaselines = field(default_factory=SessionBaselines)
    """The latest session's baselines: those the confirmation starts from."""
    host_baselines: dict[str, SessionBaselines] = field(default_factory=dict)
    """Each host's latest baselines, by its host key (`environment.host_key`): the trials' `baselines_of`."""
    scales: dict[str, ValueScale] = field(default_factory=dict)
    """The scale of search-time rates, by the reference they were paired with (see `autotune.study.storage._scale`)."""
    reference_levels: dict[str, ReferenceLevels] = field(default_factory=dict)
    """What the anchors found of the live reference, by device."""
    doctor: dict[str, Any] | None = None
    """The doctor's findings as the doctor stores them (`Diagnosis.to_dict`, which best.yaml's study section copies);
    None where the doctor did not run."""
    stacked: list[str] | None = None
    """The stacked recipes queued, once every recipe had run; None until then."""
    abandoned: dict[int, str] = field(default_factory=dict)
    """Why a trial failed, by its number, where the trial itself could no longer be written: a stale trial another
    host failed, a trial whose search was killed."""
    explanations: dict[int, Explanation] = field(default_factory=dict)
    """What narrowing each explained failed trial found, by its number (`autotune explain`, `--explain-failures`)."""
    stopped: str = ""
    """Why the search stopped early (too many failed trials); '' where it did not."""
    confirmation: Campaign | None = None
    """The confirmation campaign of the latest session that confirmed; None before one did."""
    compile_cache: CompileCacheRecord | None = None

    # What the session that exported cost (`autotune.study.report._cost`).
    search_stages: dict[str, float] = field(default_factory=dict)
    """Seconds of each stage of the latest session (`SESSION_STAGES`); emptied as a session starts."""
    search_wall_seconds: float | None = None
    search_session: SearchSession | None = None

    # -- reading ------------------------------------------------------------------------------------------------------

    @property
    def objectives(self) -> Objectives:
        return Objectives.parse(self.objective)

    # -- storing ------------------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The stored form: its version and every field that holds something (`stacked` empty is kept: stacking
        ran and stacked nothing), each part as its own `to_dict` gives it."""
        data: dict[str, Any] = {"version": VERSION}
        for f in fields(self):
            value = _stored(getattr(self, f.name))
            if value is not None:
                data[f.name] = value
        return data

    @classmethod
    def from_dict(cls, data: object) -> StudyRecord:
        """The record `to_dict` stored; another version, or a field this version lacks, is a RecordError naming it."""
        if not isinstance(data, Mapping):
            raise RecordError(f"a study record must be a mapping, got {type(data).__name__}: {data!r:.200}")
        version = data.get("version")
        if version != VERSION:
            raise RecordError(
                f"a study record of version {version!r}: this autotune reads version {VERSION}; "
                "a study written by a later autotune needs that version to read it"
            )
        values = _fields_of(cls, {k: v for k, v in data.items() if k != "version"}, "")
        for name, value in list(values.items()):
            if name in _READERS and value is not None:
                values[name] = _read(name, value)
        return cls(**values)

    @classmethod
    def from_loose(cls, attrs: Mapping[str, Any]) -> StudyRecord:
        """A study written before the record: its facts as loose study attributes, with their readers' defaults.

        Attributes autotune never wrote (a user's own) are left alone. A part that cannot be read (a workload or a
        confirmation of an unknown layout) is a RecordError naming the attribute; an unreadable scale is skipped, as
        its reader did.
        """
        values: dict[str, Any] = {}
        for name in ("objective", "model", "device", "space", "stopped"):
            if isinstance(attrs.get(name), str):
                values[name] = attrs[name]
        if attrs.get("pick"):
            values["pick"] = str(attrs["pick"])
        for name in ("method", "model_fingerprint", "doctor"):
            if isinstance(attrs.get(name), Mapping) and attrs[name]:
                values[name] = dict(attrs[name])
        if isinstance(attrs.get("environment"), Mapping):
            values["environment"] = dict(attrs["environment"])
        if isinstance(attrs.get("settings"), Mapping):
            known = {f.name for f in fields(SearchSettings)}
            values["settings"] = SearchSettings(**{k: v for k, v in attrs["settings"].items() if k in known})
        if attrs.get("workload") is not None:
            values["workload"] = _read("workload", attrs["workload"], loose=True)
        if isinstance(attrs.get("confirmation"), Mapping) and attrs["confirmation"].get("subjects"):
            values["confirmation"] = _read("confirmation", attrs["confirmation"], loose=True)
        if isinstance(attrs.get("stacked"), list):
            values["stacked"] = [str(name) for name in attrs["stacked"]]
        values["baselines"] = SessionBaselines.from_loose(attrs.get("baseline.eager"), attrs.get("baseline.compile"))
        values["host_baselines"] = {
            key.removeprefix("baselines."): _loose_host_baselines(value)
            for key, value in attrs.items()
            if key.startswith("baselines.") and isinstance(value, Mapping)
        }
        values["scales"] = _loose_scales(attrs.get("value_scale"))
        values["reference_levels"] = _loose_levels(attrs)
        values["abandoned"] = {
            int(key.removeprefix("abandoned:")): value
            for key, value in attrs.items()
            if key.startswith("abandoned:") and key.removeprefix("abandoned:").isdigit() and isinstance(value, str)
        }
        cache = attrs.get("compile_cache")
        if isinstance(cache, Mapping) and cache:
            section = dict(cache)
            values["compile_cache"] = CompileCacheRecord(subject=str(section.pop("subject", "")), section=section)
        if isinstance(attrs.get("search_stages"), Mapping):
            values["search_stages"] = {str(k): float(v) for k, v in attrs["search_stages"].items()}
        if isinstance(attrs.get("search_wall_seconds"), int | float):
            values["search_wall_seconds"] = float(attrs["search_wall_seconds"])
        session = attrs.get("search_session")
        if isinstance(session, Mapping) and session:
            values["search_session"] = SearchSession(
                host=str(session.get("host") or ""),
                pid=session.get("pid") if isinstance(session.get("pid"), int) else None,
                workers=int(session.get("workers") or 1),
            )
        return cls(**values)


# -- reading and writing a study's record -------------------------------------------------------------------------------


def read_study_record(study: _HasUserAttrs) -> StudyRecord:
    """The record of an Optuna study, read from its storage now: stored whole, or converted from an older study's
    loose attributes (a study no search has opened reads as the record's defaults)."""
    attrs = study.user_attrs
    stored = attrs.get(STUDY_KEY)
    if stored is not None:
        return StudyRecord.from_dict(stored)
    return StudyRecord.from_loose(attrs)


def update_study_record(study: _Settable, **changes: Any) -> StudyRecord:
    """Write `changes` (fields of `StudyRecord`) into the study's record as it stands in the storage now; returns the
    record written. A field of `KEYED_FIELDS` takes the entries given beside those stored (see the module's
    docstring); every other field is replaced."""
    names = {f.name for f in fields(StudyRecord)}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise TypeError(f"StudyRecord has no field(s) {', '.join(unknown)}; its fields are {', '.join(sorted(names))}")
    record = read_study_record(study)
    merged: dict[str, Any] = {
        name: {**getattr(record, name), **value} if name in KEYED_FIELDS else value for name, value in changes.items()
    }
    return write_study_record(study, replace(record, **merged))


def write_study_record(study: _Settable, record: StudyRecord) -> StudyRecord:
    """Store `record` as the study's whole record (what another host wrote since it was read is lost: prefer
    `update_study_record`)."""
    study.set_user_attr(STUDY_KEY, record.to_dict())
    return record


# -- helpers ------------------------------------------------------------------------------------------------------------


def _fields_of(cls: type, data: object, where: str, implied: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """`data` as keyword arguments of `cls`: a mapping whose keys are its fields (less `implied`, given apart), else a
    RecordError that names the part and the key."""
    part = f"a study record's {where}" if where else "a study record"
    if not isinstance(data, Mapping):
        raise RecordError(f"{part} must be a mapping, got {type(data).__name__}: {data!r:.200}")
    names = {f.name for f in fields(cls)} - set(implied)
    unknown = sorted(str(k) for k in data if k not in names)
    if unknown:
        raise RecordError(
            f"{part} has unknown field(s) {', '.join(unknown)}; its fields are {', '.join(sorted(names))}"
        )
    return dict(data)


def _run(data: object, where: str) -> RunRecord:
    if not isinstance(data, Mapping):
        raise RecordError(f"a study record's {where} must be a run's mapping, got {type(data).__name__}")
    return RunRecord.from_dict(data)


def _keyed(name: str, part: Callable[[str, object], Any]) -> Callable[[object], dict[str, Any]]:
    """A reader of field `name` of `KEYED_FIELDS`: a mapping whose every entry is read by `part(key, value)`."""

    def read(data: object) -> dict[str, Any]:
        if not isinstance(data, Mapping):
            raise RecordError(f"a study record's {name} must be a mapping by key, got {type(data).__name__}")
        return {str(key): part(str(key), value) for key, value in data.items()}

    return read


def _abandoned(data: object) -> dict[int, str]:
    if not isinstance(data, Mapping) or not all(str(k).isdigit() and isinstance(v, str) for k, v in data.items()):
        raise RecordError(f"a study record's abandoned must map trial numbers to messages, got {data!r:.200}")
    return {int(k): v for k, v in data.items()}


def _explanations(data: object) -> dict[int, Explanation]:
    if not isinstance(data, Mapping) or not all(str(k).isdigit() for k in data):
        raise RecordError(f"a study record's explanations must map trial numbers to explanations, got {data!r:.200}")
    return {int(k): Explanation.from_dict(v) for k, v in data.items()}


_READERS: dict[str, Any] = {
    "settings": SearchSettings.from_dict,
    "workload": WorkloadSummary.from_dict,
    "baselines": SessionBaselines.from_dict,
    "host_baselines": _keyed("host_baselines", lambda key, v: SessionBaselines.from_dict(v, f"host_baselines.{key}")),
    "scales": _keyed("scales", ValueScale.from_dict),
    "reference_levels": _keyed(
        "reference_levels", lambda key, v: ReferenceLevels.from_dict(v, f"reference_levels.{key}")
    ),
    "abandoned": _abandoned,
    "explanations": _explanations,
    "confirmation": Campaign.from_dict,
    "compile_cache": CompileCacheRecord.from_dict,
    "search_session": SearchSession.from_dict,
}
"""How each structured field is read back from its stored form."""


def _read(name: str, value: object, *, loose: bool = False) -> Any:
    """Field `name` read back from `value` (`loose`: from the attribute of that name of an older study); a part its
    own reader refuses is a RecordError naming the field."""
    try:
        return _READERS[name](value)
    except RecordError:
        raise
    except (AutotuneError, KeyError, TypeError, ValueError) as exc:
        part = f"the study attribute {name!r}" if loose else f"a study record's {name}"
        raise RecordError(f"{part} cannot be read: {exc!s:.300}") from None


def _stored(value: Any) -> Any:
    """A field's value in its stored form: parts by their `to_dict`, a trial number's key as a string (JSON's)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _stored(v) for k, v in value.items()}
    return value


def _loose_host_baselines(value: Mapping[str, Any]) -> SessionBaselines:
    """A host's `baselines.<host key>` attribute: its baselines beside who measured them, where and when."""
    return SessionBaselines.from_loose(
        value.get("eager"),
        value.get("compile"),
        host=str(value.get("host") or ""),
        environment=dict(value.get("environment") or {}),
        measured=str(value.get("measured") or ""),
    )


def _loose_scales(raw: object) -> dict[str, ValueScale]:
    """The `value_scale` attribute: the readable scales of known references, as its reader took them."""
    scales: dict[str, ValueScale] = {}
    for reference in REFERENCES:
        entry = raw.get(reference) if isinstance(raw, Mapping) else None
        if not isinstance(entry, Mapping):
            continue
        try:
            scale = ValueScale(
                reference=reference,
                samples_per_second=float(entry["samples_per_second"]),
                batches_per_second=float(entry["batches_per_second"]),
                host=str(entry.get("host", "")),
                measured=str(entry.get("measured", "")),
            )
        except (KeyError, TypeError, ValueError):
            continue
        if scale.usable:
            scales[reference] = scale
    return scales


def _loose_levels(attrs: Mapping[str, Any]) -> dict[str, ReferenceLevels]:
    """The `reference_levels:<device>` attributes, each with its `reference_level_errors:<device>`."""
    levels: dict[str, ReferenceLevels] = {}
    for key, value in attrs.items():
        if not key.startswith("reference_levels:") or not isinstance(value, list):
            continue
        device = key.removeprefix("reference_levels:")
        errors = attrs.get(f"reference_level_errors:{device}")
        levels[device] = ReferenceLevels(levels=list(value), errors=list(errors) if isinstance(errors, list) else [])
    return levels
