"""The one measurement path: measure subjects against each other in rotated rounds, with intervals.

A campaign runs every subject (eager, plain torch.compile, any configuration) once per
round, each run in a fresh worker process, and rotates the order every round so that no
subject always runs first (cold machine) or last. Ratios are taken between runs of the
same round (paired); a ratio is the median of the paired ratios, and its 95% interval is
the Student-t interval of their logarithms (`paired_interval`). Rounds are added, up to
a budget, until the leading configuration's interval against plain torch.compile decides
(it excludes 1, or is narrower than `decide_within`).

A subject that is a baseline (`Subject.same_as`) is not run twice: the baseline's runs are its own.

A run that the worker marks noisy (its calibration probe slowed down, or its windows
spread), or whose probe is much slower than the campaign's fastest, is measured again
once; both runs are kept, the noisy one only for the record.

Search confirmation, `autotune validate`, `autotune retune` and the benchmark all measure
through `measure`; `Harness` is the one builder of worker requests.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.measure._objective import Objective, faster
from autotune.measure.format import utc_now
from autotune.runtime import codegen, environment
from autotune.runtime.config import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.trial.request import Protocol, RunRecord, TrialRequest
from autotune.trial.runner import Monitor, run_trial

__all__ = [
    "BASELINES",
    "PROBE_SLOWDOWN",
    "Campaign",
    "Harness",
    "Interval",
    "Subject",
    "measure",
    "paired_interval",
    "rotation",
    "with_protocol",
]

BASELINES = ("eager", "compile")
"""The subjects every campaign measures besides the configurations: no compilation, and torch.compile(model)."""
PROBE_SLOWDOWN = 1.5
"""A run whose probe is this many times the campaign's fastest probe was taken on a busy machine."""


@dataclass(frozen=True, kw_only=True)
class Harness:
    """Where and how runs happen: the one place that turns a configuration into a worker request."""

    spec: str
    summary: WorkloadSummary
    device: str = "cpu"
    seed: int = 0
    protocol: Protocol = field(default_factory=Protocol)
    timeout: float = 900.0

    def source(self, config: CompileConfig, created: str | None = None) -> str:
        """The generated apply_compilation.py for `config` (raises ConfigError when it does not fit)."""
        return codegen.generate(config, self.summary, created=created or utc_now(), version=environment.version())

    def request(
        self, config: CompileConfig | None, *, created: str | None = None, source: str | None = None
    ) -> TrialRequest:
        """A worker request for `config` (None: eager), with this harness's device, seed, protocol and timeout."""
        if config is not None and source is None:
            source = self.source(config, created)
        return TrialRequest(
            spec=self.spec,
            source=source,
            device=self.device,
            seed=self.seed,
            protocol=self.protocol.to_dict(),
            uses_cuda_graphs=bool(config and config.uses_cuda_graphs),
            falls_back_to_eager=bool(config and config.falls_back_to_eager),
            changes_precision=bool(config and config.changes_precision),
            timeout=self.timeout,
        )


@dataclass(frozen=True, kw_only=True)
class Subject:
    """One thing to measure: a baseline or a configuration, with the label tables show."""

    name: str
    """'eager', 'compile', or a configuration's name such as 'trial 7' or 'incumbent'."""
    config: CompileConfig | None
    """None for eager."""
    created: str | None = None
    """The timestamp written into the generated header (keeps the measured source identical to the exported one)."""
    trial: int | None = None
    """The study trial this configuration comes from, if any."""
    source_sha256: str | None = None
    """The SHA-256 of the generated source that was measured (None for eager)."""
    same_as: str | None = None
    """A baseline this subject is (an incumbent that is plain torch.compile is 'compile'): it is not run
    itself; that baseline's runs are its runs, so its ratio to that baseline is exactly 1."""

    @classmethod
    def baselines(cls) -> list[Subject]:
        """Eager and plain torch.compile."""
        return [cls(name="eager", config=None), cls(name="compile", config=CompileConfig())]

    @property
    def description(self) -> str:
        if self.config is None:
            return "eager (no compilation)"
        if self.name == "compile":
            return "plain torch.compile(model)"
        return self.config.describe()


@dataclass(frozen=True)
class Interval:
    """A median ratio between two subjects with its 95% interval (see `paired_interval`), over paired rounds."""

    median: float
    low: float
    high: float
    rounds: int

    @property
    def gain(self) -> bool:
        """The whole interval is above 1: a gain that survives the noise."""
        return self.low > 1.0

    @property
    def loss(self) -> bool:
        """The whole interval is below 1."""
        return self.high < 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "median": round(self.median, 4),
            "low": round(self.low, 4),
            "high": round(self.high, 4),
            "rounds": self.rounds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Interval:
        return cls(float(data["median"]), float(data["low"]), float(data["high"]), int(data["rounds"]))


def rotation(names: Sequence[str], round_index: int) -> list[str]:
    """The order of round `round_index`: the subjects rotated by one place per round."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def paired_interval(ratios: Sequence[float]) -> Interval:
    """The median of paired ratios, with the 95% Student-t interval of their logarithms (a paired t-test's).

    Ratios multiply, so the interval is computed on their logarithms and mapped back; it is
    widened, in the rare skewed case, to contain the median. With 3 to 6 rounds a bootstrap
    of the median cannot reach 95% coverage (with 3 rounds it is just the smallest and
    largest ratio, which miss the true median one time in four); the t-interval is honest
    about how little a few rounds say, and narrows as rounds agree or are added.
    """
    if not ratios:
        raise ValueError("an interval needs at least one ratio")
    median = statistics.median(ratios)
    if len(ratios) == 1:
        return Interval(median, median, median, 1)
    logs = [math.log(r) for r in ratios]
    half = _t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    centre = statistics.fmean(logs)
    low, high = math.exp(centre - half), math.exp(centre + half)
    return Interval(median, min(low, median), max(high, median), len(ratios))


_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
"""Student's t, 97.5th percentile, by degrees of freedom (two-sided 95%)."""


def _t975(df: int) -> float:
    if df in _T975:
        return _T975[df]
    # Beyond 10 degrees of freedom a two-term expansion around the normal quantile is within 0.2%.
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(kw_only=True)
class Campaign:
    """Every run of every subject, round by round, and the statistics derived from them."""

    objective: Objective
    subjects: dict[str, Subject] = field(default_factory=dict)
    runs: dict[str, list[RunRecord | None]] = field(default_factory=dict)
    """Per subject, one record per round (None: not run that round, e.g. after it failed)."""
    remeasured: list[dict[str, Any]] = field(default_factory=list)
    """Noisy runs that were measured again: subject, round, why, and the discarded figures."""
    orders: list[list[str]] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    """What the workers reported of the machine: software versions and the device's name."""

    @property
    def rounds(self) -> int:
        return len(self.orders)

    def measured(self) -> list[str]:
        """The subjects that are run, in order: every one but those that are a baseline (`Subject.same_as`)."""
        return [name for name, subject in self.subjects.items() if subject.same_as is None]

    def complete_runs(self, name: str) -> list[RunRecord]:
        return [r for r in self.runs.get(name, []) if r is not None and r.complete]

    def failure(self, name: str) -> RunRecord | None:
        """The subject's first failed run, if any."""
        return next((r for r in self.runs.get(name, []) if r is not None and not r.complete), None)

    def value(self, name: str) -> float | None:
        """The median objective over the subject's complete runs."""
        values = [self.objective.of(r) for r in self.complete_runs(name)]
        return statistics.median(values) if values else None

    def median_run(self, name: str) -> RunRecord | None:
        """The complete run whose objective is the (lower) median: the figures best.yaml records."""
        runs = sorted(self.complete_runs(name), key=self.objective.of)
        return runs[(len(runs) - 1) // 2] if runs else None

    def ratio(self, name: str, reference: str) -> Interval | None:
        """How many times faster `name` is than `reference`, over the rounds where both completed."""
        pairs = [
            faster(self.objective.of(a), self.objective.of(b), self.objective)
            for a, b in zip(self.runs.get(name, []), self.runs.get(reference, []), strict=False)
            if a is not None and b is not None and a.complete and b.complete
        ]
        return paired_interval(pairs) if pairs else None

    def noise(self) -> dict[str, Any]:
        """How busy the machine was: noisy runs, probe times and load averages over the whole campaign."""
        records = [r for name in self.measured() for r in self.runs.get(name, []) if r is not None]
        probes = [p for r in records for p in r.probe_seconds]
        loads = [v for r in records for v in r.load]
        return {
            "runs": len(records),
            "noisy_runs": sum(1 for r in records if r.noisy) + len(self.remeasured),
            "remeasured": len(self.remeasured),
            "probe_ms": {"min": round(min(probes) * 1e3, 2), "max": round(max(probes) * 1e3, 2)} if probes else {},
            "load": {"min": round(min(loads), 2), "max": round(max(loads), 2)} if loads else {},
            "steal_max": max((r.steal for r in records if r.steal is not None), default=None),
        }

    def only(self, names: Sequence[str]) -> Campaign:
        """The same rounds, restricted to some subjects (e.g. the baselines and one candidate)."""
        kept = [n for n in names if n in self.subjects]
        view = Campaign(objective=self.objective, orders=[[n for n in order if n in kept] for order in self.orders])
        view.subjects = {n: self.subjects[n] for n in kept}
        view.runs = {n: self.runs[n] for n in kept}
        view.remeasured = [r for r in self.remeasured if r.get("subject") in kept]
        view.environment = self.environment
        return view

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a study's attributes, best.yaml and JSON."""
        return {
            "objective": str(self.objective),
            "rounds": self.rounds,
            "orders": self.orders,
            "subjects": {
                name: {
                    "config": s.config.to_dict() if s.config is not None else None,
                    "created": s.created,
                    "trial": s.trial,
                    "source_sha256": s.source_sha256,
                    **({"same_as": s.same_as} if s.same_as else {}),
                    "runs": [r.to_dict() if r is not None else None for r in self.runs.get(name, [])],
                }
                for name, s in self.subjects.items()
            },
            "remeasured": self.remeasured,
            "noise": self.noise(),
            "environment": self.environment,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Campaign:
        """The inverse of `to_dict`."""
        campaign = cls(
            objective=Objective.parse(str(data["objective"])), orders=[list(o) for o in data.get("orders", [])]
        )
        for name, entry in (data.get("subjects") or {}).items():
            config = CompileConfig.from_dict(entry["config"]) if entry.get("config") is not None else None
            campaign.subjects[name] = Subject(
                name=name,
                config=config,
                created=entry.get("created"),
                trial=entry.get("trial"),
                source_sha256=entry.get("source_sha256"),
                same_as=entry.get("same_as"),
            )
            campaign.runs[name] = [RunRecord.from_dict(r) if r is not None else None for r in entry.get("runs", [])]
        for name, subject in campaign.subjects.items():
            if subject.same_as in campaign.runs:
                campaign.runs[name] = campaign.runs[subject.same_as]
        campaign.remeasured = list(data.get("remeasured") or [])
        campaign.environment = dict(data.get("environment") or {})
        return campaign


RunCallback = Callable[[str, int, RunRecord], None]
"""Called after each run with the subject's name, the round (from 0) and the run's record."""


def measure(
    harness: Harness,
    subjects: Sequence[Subject],
    *,
    objective: Objective,
    min_rounds: int = 3,
    max_rounds: int = 6,
    decide_within: float = 0.02,
    reference: str = "compile",
    on_run: RunCallback | None = None,
    monitor: Callable[[str], Monitor | None] | None = None,
    campaign: Campaign | None = None,
) -> Campaign:
    """Measure `subjects` against each other in rotated rounds; see the module docstring.

    Subjects that fail are not run again in later rounds. Stops after `min_rounds` once the
    leading configuration's ratio to `reference` is decided, and after `max_rounds` anyway.
    Given an earlier `campaign` of the same subjects, its rounds count and more are added.
    """
    if not 1 <= min_rounds <= max_rounds:
        raise ValueError(f"rounds: 1 <= min_rounds <= max_rounds must hold, got ({min_rounds=}, {max_rounds=})")
    if campaign is None:
        campaign = _start(harness, subjects, objective)
    names = campaign.measured()
    requests = {
        name: harness.request(campaign.subjects[name].config, created=campaign.subjects[name].created) for name in names
    }
    for index in range(campaign.rounds, max_rounds):
        order = rotation(names, index)
        campaign.orders.append(order)
        for name in order:
            if campaign.failure(name) is not None:
                campaign.runs[name].append(None)
                continue
            record = _run(campaign, requests[name], monitor(name) if monitor else None)
            if record.complete and _is_noisy(campaign, record):
                campaign.remeasured.append(
                    {"subject": name, "round": index, "why": record.noisy, "figures": record.to_dict()}
                )
                record = _run(campaign, requests[name], monitor(name) if monitor else None)
                _is_noisy(campaign, record)
            campaign.runs[name].append(record)
            if on_run:
                on_run(name, index, record)
        if index + 1 >= min_rounds and _decided(campaign, reference, decide_within):
            break
    return campaign


def _start(harness: Harness, subjects: Sequence[Subject], objective: Objective) -> Campaign:
    # One timestamp for the generated headers of subjects that have none: the measured source is the exported one.
    stamp = utc_now()
    dated = [s if s.created else replace(s, created=stamp) for s in subjects]
    campaign = Campaign(objective=objective)
    for subject in dated:
        config = subject.config
        source = None if config is None else harness.source(config, subject.created)
        campaign.subjects[subject.name] = replace(subject, source_sha256=_sha256(source))
        campaign.runs[subject.name] = []
    for subject in dated:
        if subject.same_as is not None:
            if subject.same_as not in BASELINES or subject.same_as not in campaign.subjects:
                raise ValueError(f"subject {subject.name!r} is the same as {subject.same_as!r}, which is not measured")
            campaign.runs[subject.name] = campaign.runs[subject.same_as]
    return campaign


def _sha256(source: str | None) -> str | None:
    return hashlib.sha256(source.encode()).hexdigest() if source is not None else None


def _run(campaign: Campaign, request: TrialRequest, monitor: Monitor | None) -> RunRecord:
    run = run_trial(request, monitor)
    campaign.environment = campaign.environment or dict(run.environment)
    return run.record()


def _is_noisy(campaign: Campaign, record: RunRecord) -> bool:
    """Whether `record` was taken on a busy machine; sets `record.noisy` when the campaign sees it first."""
    if record.noisy:
        return True
    probes = [p for runs in campaign.runs.values() for r in runs if r is not None for p in r.probe_seconds]
    fastest = min(probes, default=None)
    if fastest and record.probe_seconds and max(record.probe_seconds) > PROBE_SLOWDOWN * fastest:
        record.noisy = (
            f"its calibration probe took {max(record.probe_seconds) * 1e3:.1f} ms, "
            f"against {fastest * 1e3:.1f} ms for the fastest run of this campaign"
        )
        return True
    return False


def _decided(campaign: Campaign, reference: str, within: float) -> bool:
    """Whether the leading configuration's interval against `reference` excludes 1 or is narrow enough."""
    configurations = [n for n, s in campaign.subjects.items() if n not in BASELINES and s.config is not None]
    intervals = [i for i in (campaign.ratio(n, reference) for n in configurations) if i is not None]
    if not intervals:
        other = [n for n in BASELINES if n != reference]
        intervals = [i for i in (campaign.ratio(n, reference) for n in other) if i is not None]
    if not intervals:
        return True
    leader = max(intervals, key=lambda i: i.median)
    return leader.gain or leader.loss or (leader.high - leader.low) / 2 <= within


def with_protocol(harness: Harness, **changes: Any) -> Harness:
    """`harness` with some protocol fields changed (e.g. one window for compile-time runs)."""
    return replace(harness, protocol=replace(harness.protocol, **changes))
