"""A campaign: subjects measured against each other in replicates of interleaved, paired windows.

A subject (eager, plain torch.compile, a configuration) runs first alone and cold: its cache
folder is empty, its compile time is the one reported, its accuracy is checked, and one pass
over the fresh stream fills the folder with every shape the stream holds. That first run is a
search trial's own run, or a baseline's, when the campaign is given it (`Subject.cold`).

Then replicates (see `autotune.measure.engine._replicate`): every subject in a new process started
from its warm folder, taking turns window by window on the same slices of the stream. Each
replicate gives each subject one figure (`window_figures`: one pass over the stream, the
compiles of new shapes included), and the ratio of two subjects in one replicate is paired:
same time, same batches. The interval of a ratio is the t-interval over replicates
(`autotune.measure.stats._statistics`).

`Harness`, the one builder of worker requests, and `Subject` live in `_harness`.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.measure.engine._harness import BASELINES, Harness, Subject
from autotune.measure.engine._replicate import Replicate
from autotune.measure.format import utc_now
from autotune.measure.stats import (
    FLOOR_CONFIDENCE,
    METHOD,
    REPLICATE_SD_FLOOR,
    Components,
    Interval,
    Looks,
    Objective,
    Pooled,
    components,
    faster,
    mean_interval,
    measured_floor,
    pooled,
    replicate_interval,
    spread_rule,
)
from autotune.runtime.config import CompileConfig
from autotune.trial.run_record import RunRecord

__all__ = ["Campaign", "start"]


@dataclass(kw_only=True)
class Campaign:
    """Every run of every subject, replicate by replicate, and the statistics derived from them."""

    objective: Objective
    subjects: dict[str, Subject] = field(default_factory=dict)
    cold: dict[str, RunRecord] = field(default_factory=dict)
    """Each subject's first run, alone and cold: its compile time, its accuracy check, its first pass on the stream."""
    runs: dict[str, list[RunRecord | None]] = field(default_factory=dict)
    """Per subject, one record per replicate (None: not run in it, e.g. after it failed)."""
    replicates: list[Replicate] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    """What the workers reported of the machine: software versions and the device's name."""
    stopped: str = ""
    """Why the measurement stopped: what it decided, or that its budget was spent."""
    orders: list[list[str]] = field(default_factory=list)
    """Files of earlier versions: the order of each rotated round (their runs were one per round)."""
    retired: dict[str, str] = field(default_factory=dict)
    """Subjects left out of later replicates because they no longer bear on the question, and why (racing: see
    `autotune.measure.engine._racing`). Their figures rest on the replicates they ran in."""
    looks: Looks | None = None
    """The looks and candidates the campaign spends its error over: its intervals are simultaneous over them.
    None (files of earlier versions): plain 95% intervals of one look."""
    partners: dict[str, dict[str, list[RunRecord | None]]] = field(default_factory=dict)
    """partners[reference][name]: per replicate, the run of `reference` in `name`'s group, where the reference ran
    in every group (the 'pairs' design); None where it shared the reference's own run."""
    compiles: dict[str, list[float | None]] = field(default_factory=dict)
    """Per configuration, the seconds of its cold compile before each replicate (`CampaignRules.cold_compiles`; None where
    it did not compile for that replicate). Empty without: compile time is then the first run's, one measurement."""
    spoiled: list[str] = field(default_factory=list)
    """Replicates measured on a busy machine, set aside and run again, and why (`autotune.measure.engine._spoiled`)."""
    method: dict[str, Any] | None = None
    """The measurement method its figures were measured with (`METHOD`, set when it starts); None for campaigns
    stored before the method was recorded. best.yaml records this one, not the method of the autotune exporting it."""
    whole: Campaign | None = field(default=None, repr=False, compare=False)
    """The campaign this one is a view of (`only`), whose every pair measures the device's floor; None: itself."""

    @property
    def replicate_count(self) -> int:
        """Replicates measured (rotated rounds of fresh processes, in files of earlier versions)."""
        return len(self.replicates) or len(self.orders)

    def measured(self) -> list[str]:
        """The subjects that are run, in order: every one but those that are a baseline (`Subject.same_as`)."""
        return [name for name, subject in self.subjects.items() if subject.same_as is None]

    def racing(self) -> list[str]:
        """The subjects the next replicate runs: measured, not retired, not failed (a subject whose failure must be
        reproduced, `Subject.reproduce`, until it is)."""
        return [
            n
            for n in self.measured()
            if n not in self.retired
            and (self.failure(n) is None or (self.subjects[n].reproduce and self.reproduced_failure(n) is None))
        ]

    def complete_runs(self, name: str) -> list[RunRecord]:
        return [r for r in self.runs.get(name, []) if r is not None and r.complete]

    def failure(self, name: str) -> RunRecord | None:
        """The subject's failed run, if any: its first run, or a replicate's. Enough to export nothing that failed;
        a claim against the subject waits for `reproduced_failure`."""
        first = self._first(name)
        if first is not None and not first.complete:
            return first
        return next((r for r in self.runs.get(name, []) if r is not None and not r.complete), None)

    def reproduced_failure(self, name: str) -> RunRecord | None:
        """The subject's failure once it is more than one replicate's: its first run failed (the accuracy check,
        or the compile), or two of its replicates did. One failed replicate (a timeout on a loaded machine) is no
        evidence of anything: the subject runs again (`Subject.reproduce`), and its figures rest on the rest."""
        first = self._first(name)
        if first is not None and not first.complete:
            return first
        failed = [self.runs[name][i] for i in self.failed_replicates(name)]
        return failed[0] if len(failed) >= 2 else None

    def counted_failure(self, name: str) -> RunRecord | None:
        """The failure that counts against the subject: a reproduced one for a subject that is run again after one
        (`Subject.reproduce`), any for the rest, which leave at their first."""
        subject = self.subjects.get(name)
        return self.reproduced_failure(name) if subject is not None and subject.reproduce else self.failure(name)

    def failed_replicates(self, name: str) -> list[int]:
        """The replicates (from 0) in which the subject's run failed."""
        return [i for i, r in enumerate(self.runs.get(name, [])) if r is not None and not r.complete]

    def failure_note(self, name: str) -> str:
        """In words, where the subject's replicates failed and whether that was reproduced ('' when none failed):
        'in replicates 2 and 3 (reproduced)', or 'replicate 2 failed (timeout) and ...: not reproduced, ...'."""
        failed = self.failed_replicates(name)
        if not failed:
            return ""
        shown = ", ".join(str(i + 1) for i in failed[:-1]) + (" and " if len(failed) > 1 else "") + str(failed[-1] + 1)
        if len(failed) >= 2:
            return f"in replicates {shown} (reproduced)"
        record = self.runs[name][failed[0]]
        reason = record.reason if record is not None else "failed"
        subject = self.subjects.get(name)
        if subject is None or not subject.reproduce:
            return f"replicate {shown} failed ({reason}): it left the race, and is never exported"
        later = [r for r in self.runs[name][failed[0] + 1 :] if r is not None]
        if later:
            return f"replicate {shown} failed ({reason}) and its later runs did not: not reproduced, so not counted"
        return f"replicate {shown} failed ({reason}) and was not run again: not reproduced, so not counted"

    def _first(self, name: str) -> RunRecord | None:
        subject = self.subjects.get(name)
        return self.cold.get(subject.same_as or name) if subject is not None else self.cold.get(name)

    def compile_samples(self, name: str) -> list[float | None]:
        """Per replicate, the subject's cold compile before it (`compiles`); eager's are 0 s. Empty when the campaign
        compiled nothing cold between replicates."""
        subject = self.subjects.get(name)
        if subject is not None and subject.config is None and self.compiles:
            return [0.0] * self.replicate_count
        return list(self.compiles.get(subject.same_as or name if subject is not None else name, []))

    def compile_seconds(self, name: str) -> float | None:
        """The subject's compile time: the median of its cold compiles between replicates where the campaign made
        them, else its first, cold run's (a warm replicate's only when no first run is known)."""
        samples = [c for c in self.compile_samples(name) if c is not None]
        if samples:
            return statistics.median(samples)
        subject = self.subjects.get(name)
        first = self.cold.get(subject.same_as or name) if subject is not None else None
        if first is not None and first.compile_seconds is not None:
            return first.compile_seconds
        runs = self.complete_runs(name)
        return statistics.median(r.compile_seconds or 0.0 for r in runs) if runs else None

    def value_of(self, name: str, record: RunRecord, objective: Objective | None = None, index: int = -1) -> float:
        """An objective (the campaign's by default) of replicate `index`'s record, with the subject's cold compile time.

        A replicate starts warm from the subject's cache; `time-to:N` and `compile-time` count
        the compile a user pays the first time: the cold compile made before that replicate
        where the campaign made them (`compiles`), else the subject's first run's.
        """
        objective = objective or self.objective
        if not objective.counts_compile:
            return objective.of(record)
        samples = self.compile_samples(name)
        own = samples[index] if 0 <= index < len(samples) else None
        compile_seconds = own if own is not None else self.compile_seconds(name)
        if compile_seconds is None:
            return objective.of(record)
        return objective.of(replace(record, compile_seconds=compile_seconds))

    def complete_indexed(self, name: str) -> list[tuple[int, RunRecord]]:
        """The subject's complete runs with the replicate each ran in."""
        return [(i, r) for i, r in enumerate(self.runs.get(name, [])) if r is not None and r.complete]

    def value(self, name: str) -> float | None:
        """The median objective over the subject's complete runs."""
        values = [self.value_of(name, r, index=i) for i, r in self.complete_indexed(name)]
        return statistics.median(values) if values else None

    def median_run(self, name: str) -> RunRecord | None:
        """The complete run whose objective is the (lower) median: the figures best.yaml records."""
        runs = sorted(self.complete_indexed(name), key=lambda run: self.value_of(name, run[1], index=run[0]))
        return runs[(len(runs) - 1) // 2][1] if runs else None

    def compile_ratio(self, name: str, reference: str) -> Interval | None:
        """How many times sooner `name` compiles than `reference`: the t-interval over the replicates' paired cold
        compiles (`compiles`), simultaneous over the campaign's looks and candidates and with the spread floored as
        speed's is (`ratio`), since it decides as speed does; None without two pairs (one cold compile each is one
        measurement, no interval). None where either is eager, which compiles nothing."""
        pairs = self._compile_pairs(name, reference)
        if len(pairs) < 2 or any(a <= 0 or b <= 0 for a, b in pairs):
            return None
        # Judged where both last compiled cold, or tried to: a failed compile leaves a pair fewer at the same look.
        tried = [len(self.compiles.get(self._ran_as(n), [])) for n in (name, reference)]
        at = min(tried) if all(tried) else len(pairs)
        return replicate_interval([math.log(b / a) for a, b in pairs], 0, self.looks, at=at)

    def extra_compile(self, name: str, reference: str | None = None, confidence: float = 0.95) -> Interval | None:
        """The seconds `name` compiles longer than `reference` (None: than nothing, its whole compile), replicate by
        replicate: their mean with its plain t-interval (95% by default), or None without two cold compiles paired."""
        if reference is None:
            values = [c for c in self.compile_samples(name) if c is not None]
        else:
            values = [a - b for a, b in self._compile_pairs(name, reference)]
        return mean_interval(values, confidence) if len(values) >= 2 else None

    def _compile_pairs(self, name: str, reference: str) -> list[tuple[float, float]]:
        return [
            (a, b)
            for a, b in zip(self.compile_samples(name), self.compile_samples(reference), strict=False)
            if a is not None and b is not None
        ]

    def paired_runs(self, name: str, reference: str) -> list[tuple[RunRecord | None, RunRecord | None]]:
        """Per replicate, the run of `name` and the run of `reference` it was paired with."""
        own, theirs = list(self.runs.get(name, [])), list(self.runs.get(reference, []))
        # A subject that is a baseline's runs (`Subject.same_as`) was paired under the baseline's name.
        ran_as, reference_ran_as = self._ran_as(name), self._ran_as(reference)
        for index, partner in enumerate(self.partners.get(reference_ran_as, {}).get(ran_as, [])):
            if partner is not None and index < len(theirs):
                theirs[index] = partner
        for index, partner in enumerate(self.partners.get(ran_as, {}).get(reference_ran_as, [])):
            if partner is not None and index < len(own):
                own[index] = partner
        return list(zip(own, theirs, strict=False))

    def _ran_as(self, name: str) -> str:
        subject = self.subjects.get(name)
        return subject.same_as or name if subject is not None else name

    def log_ratios(self, name: str, reference: str) -> list[float]:
        """Per replicate where both completed: the logarithm of how many times faster `name` is than `reference`."""
        return [
            math.log(faster(self.value_of(name, a, index=i), self.value_of(reference, b, index=i), self.objective))
            for i, (a, b) in enumerate(self.paired_runs(name, reference))
            if a is not None and b is not None and a.complete and b.complete
        ]

    def ratio(self, name: str, reference: str) -> Interval | None:
        """How many times faster `name` is than `reference`: the campaign's t-interval over paired replicates,
        simultaneous over its looks and candidates (`looks`)."""
        logs = self.log_ratios(name, reference)
        if not logs or not all(math.isfinite(v) for v in logs):
            return None
        windows = sum(len(a.windows) for a in self.complete_runs(name))
        if self._same_code(name, reference):
            return replicate_interval(logs, windows)  # one set of runs read twice: exactly 1, no spread to assume
        # The look is the last replicate this pair ran in together: a subject that left the race is judged where
        # it left, and one whose run failed in a replicate is judged at that replicate's look with a pair fewer.
        at = self.last_pair(name, reference) or len(logs)
        borrowed = self.borrowed_spread(reference) if spread_rule() != "floor" else None
        return replicate_interval(
            logs,
            windows,
            self.looks,
            self.components(name, reference),
            at=at,
            borrowed=borrowed,
            floor=self.spread_floor(reference),
        )

    def spread_floor(self, reference: str) -> float:
        """The floor under the spread of each pair's interval against `reference` (`Looks.floor_rule`): under the
        `measured` rule what every pair against it shows of the device together (`measured_floor`), at most
        `REPLICATE_SD_FLOOR`; under `fixed`, and for a campaign with no looks, `REPLICATE_SD_FLOOR` itself."""
        if self.looks is None or self.looks.floor_rule != "measured":
            return REPLICATE_SD_FLOOR
        if self.whole is not None:  # a view judges as the campaign it was taken from, on every pair it measured
            return self.whole.spread_floor(reference)
        return measured_floor(self.borrowed_spread(reference))

    def borrowed_spread(self, reference: str) -> Pooled | None:
        """The spread between replicates pooled over every measured subject's pair against `reference` (`pooled`):
        what a campaign whose `SPREAD_RULE` borrows reads each such pair's interval with."""
        pairs = [
            self.log_ratios(name, reference)
            for name in self.measured()
            if name != reference and not self._same_code(name, reference)
        ]
        return pooled([p for p in pairs if all(math.isfinite(v) for v in p)])

    def last_pair(self, name: str, reference: str) -> int:
        """The 1-based replicate of the last one in which `name` and `reference` both ran, completed or not (0: none):
        the look their ratio is judged at. A run that failed in that replicate leaves the ratio a pair fewer, not at
        an earlier look with more of the error to spend."""
        last = 0
        for index, (a, b) in enumerate(self.paired_runs(name, reference), start=1):
            if a is not None and b is not None:
                last = index
        return last

    def _same_code(self, name: str, reference: str) -> bool:
        """Whether one subject stands for the other (`Subject.same_as`), so that their runs are the same runs."""
        ours, theirs = self.subjects.get(name), self.subjects.get(reference)
        return (ours is not None and ours.same_as == reference) or (theirs is not None and theirs.same_as == name)

    def window_log_ratios(self, name: str, reference: str) -> list[list[float]]:
        """Per replicate, each turn's paired log-ratio of single windows (turns in which either side compiled left out)."""
        grouped = []
        for a, b in self.paired_runs(name, reference):
            if a is None or b is None or not a.complete or not b.complete:
                continue
            compiled = [x or y for x, y in zip(_padded(a), _padded(b), strict=False)]
            grouped.append(
                [
                    math.log(x / y)
                    for x, y, c in zip(a.windows, b.windows, compiled, strict=False)
                    if x > 0 and y > 0 and not c
                ]
            )
        return grouped

    def components(self, name: str, reference: str) -> Components | None:
        """The variance components of `name` against `reference`: a window's, and a replicate's beyond it."""
        return components(self.window_log_ratios(name, reference))

    def noise(self) -> dict[str, Any]:
        """The machine's state over the campaign: the probe and load ranges, and the runs that saw it busy."""
        records = [r for name in self.measured() for r in self.runs.get(name, []) if r is not None]
        probes = [p for r in records for p in r.window_probe_ms] or [p * 1e3 for r in records for p in r.probe_seconds]
        loads = [v for r in records for v in r.load]
        busy = sorted({r.noisy for r in records if r.noisy})
        return {
            "runs": len(records),
            "noisy_runs": sum(1 for r in records if r.noisy),
            "busy": busy[:3],
            "probe_ms": {"min": round(min(probes), 2), "max": round(max(probes), 2)} if probes else {},
            "load": {"min": round(min(loads), 2), "max": round(max(loads), 2)} if loads else {},
            "steal_max": max((r.steal for r in records if r.steal is not None), default=None),
        }

    def design(self, reference: str = "compile") -> dict[str, Any]:
        """How the campaign measured: replicates, windows, the co-residence design, the variance components."""
        designs = sorted({r.design for r in self.replicates})
        leader = self.leader(reference)
        parts = self.components(leader, reference) if leader else None
        return {
            "replicates": len(self.replicates),
            "windows_per_replicate": [r.windows for r in self.replicates],
            "batches_per_window": self.replicates[0].batches_per_window if self.replicates else None,
            "co_residence": designs[0] if len(designs) == 1 else designs,
            "replicate_seconds": round(statistics.fmean(r.seconds for r in self.replicates), 1)
            if self.replicates
            else None,
            "components": {"against": reference, "subject": leader, **parts.to_dict()} if parts and leader else None,
            "interval": "Student t over replicates of their paired log-ratios (df = replicates - 1), "
            + (self.looks.describe() if self.looks is not None else "95% at one look")
            + (self._floor_text(reference) if self.looks is not None else ""),
            "retired": dict(self.retired),
            "stopped": self.stopped,
        }

    def _floor_text(self, reference: str) -> str:
        """The floor under the spread, in words, as the design records it."""
        floor = self.spread_floor(reference)
        if self.looks is None or self.looks.floor_rule != "measured":
            return ""  # the fixed floor, as every campaign recorded before the floor was measured says it
        if floor >= REPLICATE_SD_FLOOR:
            return f"; the spread never below {floor:.4f} (the most; the device's replicates did not show it quieter)"
        return (
            f"; the spread never below {floor:.4f}, measured on the device (the {FLOOR_CONFIDENCE:.0%} upper bound of "
            "its pairs' pooled spread)"
        )

    def leader(self, reference: str = "compile") -> str | None:
        """The configuration still measured whose ratio to `reference` is highest (the other baseline when there is
        none). One that failed is out of the race: it cannot be exported, so it leads nothing."""
        names = [
            n
            for n, s in self.subjects.items()
            if n not in BASELINES
            and s.config is not None
            and n != reference
            and s.same_as != reference
            and n not in self.retired
            and self.failure(n) is None
        ]
        if not names:
            names = [n for n in BASELINES if n != reference and n in self.subjects]
        scored = [(statistics.fmean(logs), n) for n in names if (logs := self.log_ratios(n, reference))]
        return max(scored)[1] if scored else None

    def only(self, names: Sequence[str]) -> Campaign:
        """The same replicates, restricted to some subjects (e.g. the baselines and one candidate)."""
        kept = [n for n in names if n in self.subjects]
        view = Campaign(
            objective=self.objective,
            replicates=self.replicates,
            orders=self.orders,
            stopped=self.stopped,
            retired={n: why for n, why in self.retired.items() if n in kept},
            looks=self.looks,
            method=self.method,
            whole=self.whole or self,
        )
        view.partners = {
            r: {n: runs for n, runs in by.items() if n in kept} for r, by in self.partners.items() if r in kept
        }
        view.subjects = {n: self.subjects[n] for n in kept}
        view.runs = {n: self.runs[n] for n in kept}
        view.cold = {n: r for n, r in self.cold.items() if n in kept}
        view.compiles = {n: c for n, c in self.compiles.items() if n in kept}
        view.environment = self.environment
        return view

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a study's attributes, best.yaml and JSON."""
        data: dict[str, Any] = {
            "objective": str(self.objective),
            "replicate_count": self.replicate_count,
            "replicates": [r.to_dict() for r in self.replicates],
            "subjects": {name: self._subject_dict(name, s) for name, s in self.subjects.items()},
            "noise": self.noise(),
            "design": self.design(),
            "environment": self.environment,
            "stopped": self.stopped,
        }
        if self.orders:
            data["orders"] = self.orders
        if self.retired:
            data["retired"] = dict(self.retired)
        if self.spoiled:
            data["spoiled"] = list(self.spoiled)
        if self.looks is not None:
            data["looks"] = self.looks.to_dict()
        if self.method is not None:
            data["method"] = dict(self.method)
        if self.compiles:
            data["compiles"] = {
                n: [round(c, 3) if c is not None else None for c in v] for n, v in self.compiles.items()
            }
        if self.partners:
            data["partners"] = {
                r: {n: [x.to_dict() if x is not None else None for x in runs] for n, runs in by.items()}
                for r, by in self.partners.items()
            }
        return data

    def _subject_dict(self, name: str, subject: Subject) -> dict[str, Any]:
        cold = self.cold.get(name)
        return {
            "config": subject.config.to_dict() if subject.config is not None else None,
            "created": subject.created,
            "trial": subject.trial,
            "source_sha256": subject.source_sha256,
            **({"same_as": subject.same_as} if subject.same_as else {}),
            **({"reproduce": True} if subject.reproduce else {}),
            **({"cold": cold.to_dict()} if cold is not None else {}),
            "runs": [r.to_dict() if r is not None else None for r in self.runs.get(name, [])],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Campaign:
        """The inverse of `to_dict`; campaigns of earlier versions (rotated rounds of fresh processes) load too."""
        campaign = cls(
            objective=Objective.parse(str(data["objective"])),
            orders=[list(o) for o in data.get("orders", [])],
            replicates=[Replicate.from_dict(r) for r in data.get("replicates") or [] if isinstance(r, Mapping)],
            stopped=str(data.get("stopped") or ""),
            retired={str(k): str(v) for k, v in (data.get("retired") or {}).items()},
            spoiled=[str(why) for why in data.get("spoiled") or []],
            looks=Looks.from_dict(data["looks"]) if isinstance(data.get("looks"), Mapping) else None,
            method=dict(data["method"]) if isinstance(data.get("method"), Mapping) else None,
        )
        for name, values in (data.get("compiles") or {}).items():
            campaign.compiles[str(name)] = [float(c) if c is not None else None for c in values]
        for reference, by in (data.get("partners") or {}).items():
            campaign.partners[str(reference)] = {
                str(n): [RunRecord.from_dict(x) if x is not None else None for x in runs] for n, runs in by.items()
            }
        for name, entry in (data.get("subjects") or {}).items():
            config = CompileConfig.from_dict(entry["config"]) if entry.get("config") is not None else None
            campaign.subjects[name] = Subject(
                name=name,
                config=config,
                created=entry.get("created"),
                trial=entry.get("trial"),
                source_sha256=entry.get("source_sha256"),
                same_as=entry.get("same_as"),
                reproduce=bool(entry.get("reproduce", False)),
            )
            campaign.runs[name] = [RunRecord.from_dict(r) if r is not None else None for r in entry.get("runs", [])]
            if isinstance(entry.get("cold"), Mapping):
                campaign.cold[name] = RunRecord.from_dict(entry["cold"])
        for name, subject in campaign.subjects.items():
            if subject.same_as in campaign.runs:
                campaign.runs[name] = campaign.runs[subject.same_as]
        campaign.environment = dict(data.get("environment") or {})
        return campaign


def start(harness: Harness, subjects: Sequence[Subject], objective: Objective) -> Campaign:
    """A new campaign of `subjects`, each with its generated source's hash (one timestamp for those without one)."""
    stamp = utc_now()
    dated = [s if s.created else replace(s, created=stamp) for s in subjects]
    campaign = Campaign(objective=objective, method=dict(METHOD))
    for subject in dated:
        config = subject.config
        source = None if config is None else harness.source(config, subject.created)
        digest = hashlib.sha256(source.encode()).hexdigest() if source is not None else None
        campaign.subjects[subject.name] = replace(subject, source_sha256=digest)
        campaign.runs[subject.name] = []
        if subject.cold is not None and subject.same_as is None:
            campaign.cold[subject.name] = subject.cold
    for subject in dated:
        if subject.same_as is not None:
            if subject.same_as not in BASELINES or subject.same_as not in campaign.subjects:
                raise ValueError(f"subject {subject.name!r} is the same as {subject.same_as!r}, which is not measured")
            campaign.runs[subject.name] = campaign.runs[subject.same_as]
    return campaign


def _padded(record: RunRecord) -> list[int]:
    """Each window's recompiles (0 where the record does not say)."""
    counts = list(record.window_recompiles)
    return counts + [0] * (len(record.windows) - len(counts))
