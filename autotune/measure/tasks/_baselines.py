"""A search's baselines: eager and plain torch.compile, each first alone and cold, then warm and paired: the reference.

Each first runs alone and cold in a new cache folder, as a trial does: plain compile's
compile time is the budget trials are held to, and its pass over the whole stream leaves
every shape in its cache. Then both start again warm from their folders, as every replicate
of the confirmation starts them, and measure `windows` windows in turn on the same slices of
the stream, which gives plain compile's ratio to eager and its own rate. Eager ends; plain
compile stays alive, stopped, as the search's reference: every trial's warm restart is paired
with its windows (`autotune.measure.tasks._pairing`). When plain compile fails, eager is the
reference.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from autotune.measure.engine import Harness, Subject, batches_for, calibrate
from autotune.measure.tasks._pairing import LiveReference, first_run, joined_run, pair_windows, restart_request
from autotune.trial.live import LiveWorker
from autotune.trial.request import TrialRequest, TrialRun, window_figures
from autotune.trial.run_record import RunRecord

__all__ = ["Baselines", "measure_baselines"]


@dataclass
class Baselines:
    """What a search measured of its baselines, and the reference its trials are paired with."""

    eager: RunRecord
    compile: RunRecord
    compile_run: TrialRun
    """Plain compile's run as it stood when the baselines were done (a plain trial takes its outcome)."""
    reference: LiveReference | None
    """The live worker trials are paired with: plain compile, or eager when plain compile failed; None when both did."""
    reference_name: str = "compile"

    def close(self) -> None:
        """End the reference's worker."""
        if self.reference is not None and self.reference.worker.alive:
            self.reference.worker.end()


def measure_baselines(
    harness: Harness, caches: Path, *, windows: int, seed: int = 0, created: str | None = None
) -> Baselines:
    """Eager and plain compile, cold in new folders under `caches`, then warm and paired; see the module docstring."""
    _, compile_subject = Subject.baselines()
    requests: dict[str, TrialRequest] = {}
    for name, config in (("eager", None), ("compile", compile_subject.config)):
        folder = caches / name
        shutil.rmtree(folder, ignore_errors=True)  # a session's baselines start cold
        requests[name] = harness.request(config, created=created, cache_dir=str(folder))
    firsts = {name: first_run(request, None, None) for name, request in requests.items()}
    workers: dict[str, LiveWorker] = {}
    runs = dict(firsts)
    try:
        for name, request in requests.items():
            if firsts[name].state != "complete":
                continue
            worker = LiveWorker(restart_request(request), serving=True).start()  # plain compile's serves the trials
            if worker.until_ready():
                worker.pause()
                workers[name] = worker
            else:
                runs[name] = joined_run(firsts[name], worker.end())
        if set(workers) != {"eager", "compile"}:
            return _without_pairing(workers, firsts, runs, harness.protocol.window_seconds)
        eager, plain = workers["eager"], workers["compile"]
        batches = batches_for(harness.protocol.window_seconds)(calibrate(workers))
        reference = LiveReference(
            worker=plain,
            samples_per_second=0.0,
            batches_per_second=0.0,
            batches_per_window=batches,
            window_seconds=harness.protocol.window_seconds,
        )
        paired, _ = pair_windows(eager, reference, windows=windows, rng=random.Random(seed))
        figures = window_figures(paired.reference_windows, plain.run.ready)
        reference.samples_per_second = float(figures.get("samples_per_second") or 0.0)
        reference.batches_per_second = float(figures.get("batches_per_second") or 0.0)
        reference.over_eager = 1 / paired.ratio if paired.ratio else None
        compile_run = joined_run(firsts["compile"], plain.snapshot())
        eager_run = joined_run(firsts["eager"], workers.pop("eager").end())
        return Baselines(
            eager=eager_run.record(), compile=compile_run.record(), compile_run=compile_run, reference=reference
        )
    except BaseException:
        for worker in workers.values():
            worker.kill()
        raise


def _without_pairing(
    workers: dict[str, LiveWorker], firsts: dict[str, TrialRun], runs: dict[str, TrialRun], window_seconds: float
) -> Baselines:
    """One baseline failed: the other, if its restart is ready, is measured alone and becomes the reference."""
    name = next(iter(workers), None)
    reference = None
    if name is not None:
        survivor = workers[name]
        survivor.resume()
        ready = {name: survivor.run.ready} if survivor.run.ready is not None else {}
        batches = batches_for(window_seconds)(ready)
        reference = LiveReference(
            worker=survivor,
            samples_per_second=0.0,
            batches_per_second=0.0,
            batches_per_window=batches,
            window_seconds=window_seconds,
        )
        passes = survivor.passes_for(batches, window_seconds)
        windows = [w for k in range(4) if (w := survivor.window(k, k * batches, batches, passes)) is not None]
        figures = window_figures(windows, survivor.run.ready)
        reference.samples_per_second = float(figures.get("samples_per_second") or 0.0)
        reference.batches_per_second = float(figures.get("batches_per_second") or 0.0)
        reference.over_eager = 1.0 if name == "eager" else None
        survivor.pause()
        runs[name] = joined_run(firsts[name], survivor.snapshot())
    return Baselines(
        eager=runs["eager"].record(),
        compile=runs["compile"].record(),
        compile_run=runs["compile"],
        reference=reference,
        reference_name="eager" if name == "eager" else "compile",
    )
