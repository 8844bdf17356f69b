"""A search's baselines: eager and plain torch.compile, each first alone and cold, then paired, and the reference.

Eager starts first and is stopped once ready; plain compile then compiles alone (its compile
time is the budget trials are held to). Both measure `blocks` windows in turn on the same
slices of the stream, which gives plain compile's ratio to eager and its own rate. Each then
passes once over the whole stream (its first-run figure, and a cache that holds every shape).
Eager ends; plain compile stays alive, stopped, as the search's reference: every trial's
windows are paired with its windows (`autotune.measure.tasks._pairing`). When plain compile fails,
eager is the reference.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from autotune.measure.engine import Harness, Subject, batches_for, calibrate
from autotune.measure.tasks._pairing import LiveReference, pair_windows
from autotune.trial.live import LiveWorker
from autotune.trial.request import RunRecord, TrialRun, window_figures

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
    harness: Harness, caches: Path, *, blocks: int, seed: int = 0, created: str | None = None
) -> Baselines:
    """Eager and plain compile, cold in new folders under `caches`, then paired; see the module docstring."""
    folders = {}
    for name in ("eager", "compile"):
        folders[name] = caches / name
        shutil.rmtree(folders[name], ignore_errors=True)  # a session's baselines start cold
    _, compile_subject = Subject.baselines()
    eager = LiveWorker(harness.request(None, cache_dir=str(folders["eager"]))).start()
    eager_ready = eager.until_ready()
    eager.pause()
    request = harness.request(compile_subject.config, created=created, cache_dir=str(folders["compile"]))
    plain = LiveWorker(request).start()
    plain_ready = plain.until_ready()
    if not eager_ready or not plain_ready:
        return _without_pairing(eager, plain, eager_ready, plain_ready, harness.protocol.window_seconds)
    plain.pause()
    batches = batches_for(harness.protocol.window_seconds)(calibrate({"eager": eager, "compile": plain}))
    reference = LiveReference(
        worker=plain,
        samples_per_second=0.0,
        batches_per_second=0.0,
        batches_per_window=batches,
        window_seconds=harness.protocol.window_seconds,
    )
    paired, _ = pair_windows(eager, reference, blocks=blocks, rng=random.Random(seed))
    figures = window_figures(paired.reference_windows, plain.run.ready)
    reference.samples_per_second = float(figures.get("samples_per_second") or 0.0)
    reference.batches_per_second = float(figures.get("batches_per_second") or 0.0)
    reference.over_eager = 1 / paired.ratio if paired.ratio else None
    for worker in (eager, plain):
        worker.resume()
        worker.stream()
        worker.pause()
    snapshot = plain.snapshot()
    return Baselines(eager=eager.end().record(), compile=snapshot.record(), compile_run=snapshot, reference=reference)


def _without_pairing(
    eager: LiveWorker, plain: LiveWorker, eager_ready: bool, plain_ready: bool, window_seconds: float
) -> Baselines:
    """One baseline failed: the other, if ready, is measured alone and becomes the reference."""
    survivor = eager if eager_ready else plain if plain_ready else None
    reference = None
    if survivor is not None:
        survivor.resume()
        ready = {"survivor": survivor.run.ready} if survivor.run.ready is not None else {}
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
        reference.over_eager = 1.0 if survivor is eager else None
        survivor.stream()
        survivor.pause()
    eager_record = eager.snapshot().record() if eager_ready else eager.end().record()
    plain_run = plain.snapshot() if plain_ready else plain.end()
    if survivor is not eager:
        eager.kill()
    return Baselines(
        eager=eager_record,
        compile=plain_run.record(),
        compile_run=plain_run,
        reference=reference,
        reference_name="eager" if survivor is eager else "compile",
    )
