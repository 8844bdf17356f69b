"""The winner's compile cache: save its artifacts from a run, then load them in a fresh worker, and time both.

The artifacts come from the run that was measured where there is one: a worker started from the
confirmed subject's own cache folder saves exactly what the confirmation ran (max-autotune's
kernel choices included), and costs a warm start instead of another cold compile. The cold
compile time reported is then that subject's first run's. A confirmation that proved the cache
in its own replicates (`autotune.measure.engine.CacheProof`) needs neither run: its first
replicate saved the file, its second started the leader from it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.measure.engine import CacheProof, Harness, has_warm_cache, with_protocol
from autotune.runtime.compile_cache import CACHE_FILE, SAVED_FROM_COLD, SAVED_FROM_MEASURED
from autotune.runtime.config import CompileConfig
from autotune.trial.records import CacheSaved
from autotune.trial.runner import run_trial

__all__ = ["record_compile_cache"]


def record_compile_cache(
    harness: Harness,
    config: CompileConfig,
    created: str | None,
    folder: str | os.PathLike[str],
    *,
    warm_from: str | None = None,
    cold_seconds: float | None = None,
    proof: CacheProof | None = None,
    subject: str | None = None,
) -> tuple[dict[str, Any], Path | None]:
    """Run a configuration in a worker that saves its artifacts, then in a fresh one with them loaded.

    The saving run starts from `warm_from`, the cache folder of the measured subject, when it
    holds Inductor's caches and `cold_seconds` (that subject's cold compile time) is known;
    otherwise it compiles cold in a fresh cache. Returns best.yaml's `compile_cache` section
    (both compile times, the file's fingerprint) and the saved file, staged in `folder` under a
    temporary name for the caller to move into place. The file is None, and the section says
    why, when a run failed or nothing was saved. The run with the file loaded uses fresh Inductor
    and Triton caches, so it starts from the file alone.

    Where `proof` holds `subject`'s file, saved by a replicate of the confirmation, no saving run
    is made, and where it also holds the replicate that started `subject` from that file, no
    loading run either: the section says which replicates did it (`proven_in`).
    """
    # The writer's pid in the name lets a later run remove the file if this process is killed (see publish).
    fd, name = tempfile.mkstemp(prefix=f".{CACHE_FILE}.{os.getpid()}.", suffix=".staged", dir=folder)
    os.close(fd)
    staged = Path(name)
    # Compile time does not depend on how long throughput is measured: one window and no stream is enough.
    request = with_protocol(harness, windows=1, fresh_batches=0).request(config, created=created)
    kept = proof.saved.get(subject) if proof is not None and subject is not None else None
    proven: dict[str, int] = {}
    if kept is not None and cold_seconds is not None and kept.path.is_file():
        os.replace(kept.path, staged)
        measured, saved, proven["saved"] = True, kept.record, kept.replicate
    else:
        measured = warm_from is not None and cold_seconds is not None and has_warm_cache(warm_from)
        saving = replace(request, save_cache_path=str(staged), cache_dir=warm_from if measured else None)
        saver = run_trial(saving)
        if saver.state != "complete" or saver.cache_saved is None or not saver.cache_saved.saved:
            staged.unlink(missing_ok=True)
            what = "the run from the measured cache" if measured else "the cold run"
            said = saver.cache_saved.message if saver.cache_saved is not None else ""
            why = said or f"{what} {saver.state}: {saver.reason} {saver.message}".strip()
            return {"saved": False, "note": why}, None
        saved = saver.cache_saved
        if not measured or cold_seconds is None:
            cold_seconds = float(saver.compile_seconds or 0.0)
    started = proof.loaded.get(subject) if proof is not None and subject is not None and kept is not None else None
    if started is not None:
        warm_seconds, load_seconds, proven["loaded"] = (
            started.compile_seconds,
            started.record.load_seconds,
            started.replicate,
        )
    else:
        warm = run_trial(replace(request, load_cache_path=str(staged)))
        loaded = warm.cache_loaded
        if warm.state != "complete" or loaded is None or not loaded.loaded:
            staged.unlink(missing_ok=True)
            why = f"the run with the cache loaded {warm.state}: {warm.reason} {warm.message}".strip()
            return {
                "saved": False,
                "note": why if warm.state != "complete" else "the saved cache could not be loaded",
            }, None
        warm_seconds, load_seconds = float(warm.compile_seconds or 0.0), loaded.load_seconds
    return _section(saved, cold_seconds, warm_seconds, load_seconds, measured, proven), staged


def _section(
    saved: CacheSaved,
    cold_seconds: float,
    warm_seconds: float,
    load_seconds: float,
    measured: bool,
    proven: dict[str, int],
) -> dict[str, Any]:
    """best.yaml's `compile_cache` section of a file that was saved and loaded."""
    section: dict[str, Any] = {
        "file": CACHE_FILE,
        "saved": True,
        "bytes": saved.bytes,
        "sha256": saved.sha256,
        "artifacts": saved.artifacts,
        "fingerprint": saved.fingerprint,
        "cold_compile_seconds": round(cold_seconds, 3),
        "cached_compile_seconds": round(warm_seconds, 3),
        "load_seconds": round(load_seconds, 3),
        "saved_fraction": round(1 - warm_seconds / cold_seconds, 3) if cold_seconds > 0 else None,
        "saved_from": SAVED_FROM_MEASURED if measured else SAVED_FROM_COLD,
    }
    if proven:
        # The confirmation's replicates (from 1) whose processes saved the file and started from it alone.
        section["proven_in"] = dict(proven)
    return section
