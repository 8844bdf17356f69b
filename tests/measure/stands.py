"""Made-up campaigns and stand-ins for the measurement engine's workers, shared by the tests of
autotune.measure's rooms.

No worker runs: `campaign()` builds a campaign from made-up figures, and `Stand` stands in for the first runs
and the replicates whose figures are known, so that each rule can be put at its boundary. The fixtures that
install it (`harness`, `stand`) are in this folder's conftest.py.
"""

from __future__ import annotations

from autotune import CompileConfig
from autotune.measure import Campaign, Subject, Throughput
from autotune.measure.engine import Replicate
from autotune.trial.request import TrialRun
from autotune.trial.run_record import RunRecord
from tests import fake_records

THROUGHPUT = Throughput()
REGIONAL = CompileConfig(scope="regional")


def run(samples_per_second: float | None, *, failed: str = "", windows: list[float] | None = None) -> RunRecord:
    if failed or samples_per_second is None:
        return RunRecord(state="failed", reason=failed or "accuracy", message="it broke")
    return RunRecord(
        state="complete",
        samples_per_second=samples_per_second,
        batches_per_second=samples_per_second,
        compile_seconds=1.0,
        windows=windows or [],
    )


def campaign(**runs: list[float | None]) -> Campaign:
    """A campaign whose subject `name` ran at the given samples/s, one value per replicate (None: failed)."""
    result = Campaign(objective=THROUGHPUT)
    for name, values in runs.items():
        config = None if name == "eager" else (CompileConfig() if name == "compile" else REGIONAL)
        result.subjects[name] = Subject(
            name=name,
            config=config,
            trial=7 if name.startswith("trial") else None,
            reproduce=name in ("eager", "compile", "incumbent"),  # as search and retune make them
        )
        result.runs[name] = [run(v) for v in values]
    count = max(len(v) for v in runs.values())
    result.replicates = [Replicate(design="together", windows=12, batches_per_window=4) for _ in range(count)]
    return result


class Stand:
    """Stands in for first runs and replicates: each replicate's rate per subject from a table, in order (None: that
    replicate's run times out)."""

    def __init__(self, rates: dict[str, list[float | None]], failing: tuple[str, ...] = ()) -> None:
        self.rates = rates
        self.failing = failing
        self.busy: set[int] = set()
        """Replicates (by index, in the order run) during which other processes took 60% of the CPU."""
        self.first: list[str] = []
        self.replicates: list[list[str]] = []
        self.seconds = 1.0
        """What each replicate says it took (it takes no wall time)."""

    def first_run(self, request, monitor=None, gate=None) -> TrialRun:
        name = self.name_of(request)
        self.first.append(name)
        if name in self.failing:
            return TrialRun(state="failed", reason="accuracy", message="it broke")
        return TrialRun(
            state="complete",
            compiled=fake_records.compiled(compile_seconds=2.0),
            result=fake_records.result(samples_per_second=1.0),
        )

    def replicate(self, requests, groups, *, design, windows, batches_per_window, window_seconds, rng, on_window=None):
        index = len(self.replicates)
        self.replicates.append(sorted(requests))
        runs = {}
        for name in requests:
            rates = self.rates[name]
            rate = rates[index % len(rates)]
            if rate is None:
                runs[name] = TrialRun(state="failed", reason="timeout", message="no window within the limit")
                continue
            runs[name] = TrialRun(
                state="complete",
                ready=fake_records.ready(stream_samples=100, stream_batches=10),
                result=fake_records.result(samples_per_second=rate),
                windows=[
                    fake_records.window(100 / rate, others=0.6 if index in self.busy else 0.0) for _ in range(windows)
                ],
            )
        replicate = Replicate(
            design=design, windows=windows, batches_per_window=4, seconds=self.seconds, ready_seconds=1.0
        )
        return replicate, runs, {}

    def name_of(self, request) -> str:
        if request.source is None:
            return "eager"
        if "max_autotune" in request.source:
            return "trial 8"
        return "compile" if "scope=whole" in request.source else "trial 7"


def subjects() -> list[Subject]:
    return [*Subject.baselines(), Subject(name="trial 7", config=REGIONAL, trial=7)]


MAX_AUTOTUNE = CompileConfig(scope="regional", mode=None, options={"max_autotune": True})


def racers() -> list[Subject]:
    return [*subjects(), Subject(name="trial 8", config=MAX_AUTOTUNE, trial=8)]
