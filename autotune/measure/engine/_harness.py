"""The subjects a campaign measures and the one builder of their worker requests.

`Harness` holds what every worker of a campaign shares (the workload, its summary, the device,
the protocol) and turns a configuration into a `TrialRequest` with its generated source;
`Subject` is one thing measured (eager, plain torch.compile, a configuration), with its first,
cold run where the campaign is given one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.measure.format import utc_now
from autotune.runtime import codegen, environment
from autotune.runtime.config import CompileConfig
from autotune.runtime.summary import WorkloadSummary
from autotune.trial.request import PROBE_SLOWDOWN, WORKER_PROGRAM, RunProtocol, TrialRequest
from autotune.trial.run_record import RunRecord

__all__ = ["BASELINES", "PROBE_SLOWDOWN", "Harness", "Subject", "with_protocol"]

BASELINES = ("eager", "compile")
"""The subjects every campaign measures besides the configurations: no compilation, and torch.compile(model)."""


@dataclass(frozen=True, kw_only=True)
class Harness:
    """Where and how runs happen: the one place that builds a worker's request, for a configuration, eager, or
    another program of the worker's (the doctor's)."""

    spec: str
    summary: WorkloadSummary | None
    """What the workload is, which generated code is built for; None before it is known (the doctor's run, which
    finds it out, runs no configuration)."""
    device: str = "cpu"
    seed: int = 0
    protocol: RunProtocol = field(default_factory=RunProtocol)
    timeout: float = 900.0
    cpus: tuple[int, ...] | None = None
    """The host CPUs its workers may use (None: all); see `TrialRequest.cpus`."""
    memory_share: float | None = None
    """The share of a shared GPU's memory each worker may allocate (None: no cap)."""
    _sources: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Sources generated so far: a campaign asks for each subject's several times."""

    def source(self, config: CompileConfig, created: str | None = None) -> str:
        """The generated apply_compilation.py for `config` (raises ConfigError when it does not fit)."""
        if self.summary is None:
            raise ValueError(f"{self.spec}: a harness without a workload summary generates no code")
        if created is None:
            return codegen.generate(config, self.summary, created=utc_now(), version=environment.version())
        key = (json.dumps(config.to_dict(), sort_keys=True), created)
        if key not in self._sources:
            self._sources[key] = codegen.generate(config, self.summary, created=created, version=environment.version())
        return self._sources[key]

    def request(
        self,
        config: CompileConfig | None,
        *,
        created: str | None = None,
        source: str | None = None,
        cache_dir: str | None = None,
        program: str = WORKER_PROGRAM,
        measure_compile: bool = False,
    ) -> TrialRequest:
        """A worker request for `config` (None: eager), with this harness's device, seed, protocol and timeout; run by
        `program` (the measuring worker's, or the doctor's: `DOCTOR_PROGRAM`), which with
        `measure_compile` also splits where plain torch.compile's time went."""
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
            random_as_eager=bool(config and config.random_as_eager),
            timeout=self.timeout,
            cache_dir=cache_dir,
            cpus=self.cpus,
            memory_share=self.memory_share,
            measure_compile=measure_compile,
            program=program,
        )


def with_protocol(harness: Harness, **changes: Any) -> Harness:
    """`harness` with some protocol fields changed (e.g. no stream for compile-time runs)."""
    return replace(harness, protocol=replace(harness.protocol, **changes))


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
    cache_dir: str | None = None
    """Its own compile-cache folder, filled by its first run; None: the campaign gives it one."""
    cold: RunRecord | None = None
    """Its first run, already made (a search trial's, a baseline's): its compile time and accuracy are these."""
    reproduce: bool = False
    """Its failure would be a claim against it (plain compile's hands the lead to eager, an incumbent's is a
    regression): after one failed replicate it runs again, and only a failure that happens again counts
    (`Campaign.reproduced_failure`). Any other subject leaves the race at its first failure and is never exported."""

    @classmethod
    def baselines(cls) -> list[Subject]:
        """Eager and plain torch.compile."""
        return [
            cls(name="eager", config=None, reproduce=True),
            cls(name="compile", config=CompileConfig(), reproduce=True),
        ]

    @property
    def description(self) -> str:
        if self.config is None:
            return "eager (no compilation)"
        if self.name == "compile":
            return "plain torch.compile(model)"
        return self.config.describe()
