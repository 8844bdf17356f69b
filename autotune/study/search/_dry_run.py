"""`autotune search --dry-run`: what a search would run and about how long it would take, from one cold compile.

Nothing is stored, searched or exported. The workload is resolved as a search resolves it,
plain torch.compile compiles once, cold, in a worker as a search's baseline does, and its run
prices every stage the search would go through (`Estimate`). The space is adapted with that
compile's graph breaks and the recipes are planned as a new study would seed them.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from autotune.errors import SearchError
from autotune.measure import Objectives
from autotune.measure.engine import expected_replicate_seconds
from autotune.measure.tasks import first_run
from autotune.runtime.config import CompileConfig
from autotune.study.report import Progress as ProgressUpdate
from autotune.study.report import ProgressCallback, confirmation_guess, duration, quiet
from autotune.study.search._options import SearchOptions
from autotune.study.search._prepare import prepare
from autotune.study.search._seeds import planned_seeds, study_seeds
from autotune.study.search._space_file import load_space
from autotune.trial.request import RunProtocol
from autotune.trial.run_record import RunRecord

__all__ = ["DryRun", "Estimate", "dry_run", "estimate"]


@dataclass(frozen=True)
class Estimate:
    """Seconds each stage of a search would take, priced from one cold run of plain torch.compile.

    A trial is a cold run like that one, a warm restart (`expected_replicate_seconds`: the
    process start, tracing and settling again) and its windows paired with as many of plain
    compile's. Pruned trials end sooner; stacked recipes and compiled optimizer steps compile longer.
    """

    stages: dict[str, float]
    trial_seconds: float
    """One trial: the cold run, the warm restart and the paired windows."""
    trials: int
    """Trials that would run a worker (the plain recipe reuses the baseline's run)."""
    anchors: int

    @property
    def total(self) -> float:
        return sum(self.stages.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_seconds": round(self.total, 1),
            "trial_seconds": round(self.trial_seconds, 1),
            "trials": self.trials,
            "anchors": self.anchors,
            "stages": {name: round(seconds, 1) for name, seconds in self.stages.items()},
        }


def estimate(first: RunRecord, options: SearchOptions, *, compile_decides: bool, plain_seeded: bool) -> Estimate:
    """Each stage's seconds for a search with `options`, from `first`, a cold run of plain torch.compile."""
    protocol: RunProtocol = options.protocol
    windows, window = protocol.windows, protocol.window_seconds
    # The shared C++ header is built once per environment: this run built it, a search after it will not.
    cold = max(first.wall_seconds - (first.shared_build_seconds or 0.0), 0.0)
    compile_seconds = first.compile_seconds or 0.0
    restart = expected_replicate_seconds({"compile": first}, windows, window)  # start, warm compile, own windows
    paired = restart + windows * window  # and as many windows of the reference
    trial = cold + paired
    # Workers compile side by side; a device measures one at a time, and its workers share its cores.
    side_by_side = cold / max(options.workers or 1, 1) + paired
    trials = max(options.trials - (1 if plain_seeded else 0), 0)
    # One before the first trial; more only where it reads the reference at a level of its own (`anchoring_worth`).
    anchors = 1 if trials else 0
    # A confirmation proves the compile cache in its replicates (`CacheProof`): its second starts the leader from the
    # saved file alone, about a restart more; without one, a warm run saves it and a run from the file loads it.
    proven = options.compile_cache and options.confirm > 0
    stages = {
        # The doctor starts a worker and traces with dynamo without compiling: about a restart without its windows.
        "doctor": restart - windows * window if options.doctor else 0.0,
        # Eager and plain compile cold, one after the other, then both restarted and paired.
        "baselines": (cold - compile_seconds) + cold + 2 * restart,
        "trials": trials * side_by_side,
        "anchors": anchors * paired,
        "confirmation": confirmation_guess(
            first,
            first,
            confirm=options.confirm,
            replicates=options.replicates,
            protocol=protocol,
            cold_compiles=compile_decides,
        )
        + (restart if proven else 0.0),
        "compile cache": 2 * restart if options.compile_cache and not proven else 0.0,
    }
    return Estimate(stages=stages, trial_seconds=trial, trials=trials, anchors=anchors)


@dataclass(frozen=True)
class DryRun:
    """What `autotune search` would do with these options, and about how long it would take."""

    model: str
    space: str
    dimensions: int
    dropped: list[str]
    recipes: list[str]
    """The recipes a new study would start with, by name."""
    notes: list[str]
    """Why each recipe is or is not seeded."""
    trials: int
    confirm: int
    replicates: tuple[int, int]
    workers: int
    first: RunRecord
    """The cold run of plain torch.compile the estimate is priced from."""
    estimate: Estimate
    seconds: float
    """How long the dry run itself took."""
    workers_chosen: str = ""
    """Why that many workers, when --workers was not given and the host allows several."""
    limits: list[str] = field(default_factory=list)
    """--timeout and --time-budget, in words, where they would end the search sooner."""

    def lines(self) -> list[str]:
        """The plan and the estimate, as `autotune search --dry-run` prints them."""
        first, est = self.first, self.estimate
        low, high = self.replicates
        stages = ", ".join(f"{name} {duration(s)}" for name, s in est.stages.items() if s > 0)
        lines = [
            f"dry run of `autotune search --model {self.model}`: nothing was searched, stored or exported",
            f"  space       '{self.space}': {self.dimensions} dimensions",
            *(f"              dropped {d}" for d in self.dropped),
            f"  trials      {self.trials} on {self.workers} worker(s): "
            + (f"first the recipe(s) {', '.join(self.recipes)}, then " if self.recipes else "")
            + "the sampler's choices",
            *(f"              {note}" for note in self.notes if " not seeded" in note),
            *([f"              {self.workers_chosen}"] if self.workers_chosen else []),
            f"  confirm     the best {self.confirm} trial(s) with eager and plain torch.compile, "
            f"{low} to {high} replicates of paired windows",
            f"  cold run    plain torch.compile compiled in {_took(first.compile_seconds or 0.0)} "
            f"(its run {_took(first.wall_seconds)}; {first.graph_breaks or 0} graph break(s))",
            f"  estimate    about {duration(est.total)} in all: {stages}",
            f"              a trial about {duration(est.trial_seconds)}; pruned trials end sooner, stacked recipes and "
            "compiled optimizer steps compile longer"
            + (
                f", and the confirmation runs up to {high} replicates when the first {low} do not decide"
                if high > low
                else ""
            ),
            *(f"  limit       {limit}" for limit in self.limits),
            f"  this dry run took {duration(self.seconds)}",
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "space": self.space,
            "dimensions": self.dimensions,
            "dropped": list(self.dropped),
            "recipes": list(self.recipes),
            "trials": self.trials,
            "confirm": self.confirm,
            "replicates": list(self.replicates),
            "workers": self.workers,
            "compile_seconds": _rounded(self.first.compile_seconds),
            "cold_run_seconds": _rounded(self.first.wall_seconds),
            "graph_breaks": self.first.graph_breaks or 0,
            "cold_run": self.first.to_dict(),
            "estimate": self.estimate.to_dict(),
            "limits": list(self.limits),
            "seconds": round(self.seconds, 1),
        }


def _took(seconds: float) -> str:
    """'0.4 s', '9.1 s', '1 min 16 s'."""
    return f"{seconds:.1f} s" if seconds < 10 else duration(seconds)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def dry_run(options: SearchOptions, progress: ProgressCallback | None = None) -> DryRun:
    """Plan the search `options` describe and price it from one cold compile of plain torch.compile.

    Raises SearchError when plain torch.compile does not compile and run the workload: a search
    could then measure nothing faster than eager, and its cost could not be priced.
    """
    show = progress or quiet
    started = time.monotonic()
    show(ProgressUpdate(0, options.trials, None, "dry run: resolving the workload", None))
    prepared = prepare(options)
    base = load_space(options.space)
    show(ProgressUpdate(0, options.trials, None, "dry run: plain torch.compile, cold", None))
    with tempfile.TemporaryDirectory(prefix="autotune-dry-run-") as folder:
        request = prepared.harness.request(CompileConfig(), cache_dir=folder)
        first = first_run(request, None, None).record()
    if first.state != "complete":
        raise SearchError(
            f"plain torch.compile did not run the workload ({first.reason}: {first.message}), so the search could not "
            f"be priced; `autotune doctor --model {options.model}` says where it breaks\n{first.stderr_tail}"
        )
    space = prepared.space(base, int(first.graph_breaks or 0), allow_precision_changes=options.allow_precision_changes)
    seeding = options.recipes and not options.brute_force  # as a search seeds a new study
    seeds, limit = study_seeds(space, prepared.summary, options.trials) if seeding else ([], 0)
    queued, notes = planned_seeds(space, seeds, limit)
    names = [seed.name for seed, _ in queued]
    objectives = Objectives.parse(options.objective)
    est = estimate(first, options, compile_decides=objectives.compile_decides, plain_seeded="plain" in names)
    return DryRun(
        model=options.model,
        space=space.name,
        dimensions=len(space.dimensions()),
        dropped=list(space.dropped),
        recipes=names,
        notes=notes,
        trials=options.trials,
        confirm=options.confirm,
        replicates=(options.replicates, options.max_replicates),
        workers=options.workers or 1,
        workers_chosen=options.workers_chosen,
        first=first,
        estimate=est,
        seconds=time.monotonic() - started,
        limits=_limits(options, est),
    )


def _limits(options: SearchOptions, est: Estimate) -> list[str]:
    """Where --timeout or --time-budget would end the search before the estimate does."""
    limits = []
    if options.time_budget is not None and options.time_budget < est.total:
        limits.append(
            f"--time-budget {duration(options.time_budget)} is less than the estimate: the search starts fewer "
            "trials, keeping time for the confirmation"
        )
    until_trials_end = sum(est.stages[s] for s in ("doctor", "baselines", "anchors", "trials"))
    if options.timeout is not None and options.timeout < until_trials_end:
        limits.append(
            f"--timeout {duration(options.timeout)} would stop starting trials before all "
            f"{est.trials} have run (about {duration(until_trials_end)} from the start to the last trial's end)"
        )
    return limits
