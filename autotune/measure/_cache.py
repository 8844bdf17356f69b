"""The winner's compile cache: run it cold saving its artifacts, then warm with them loaded, and time both."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.measure._campaign import Harness, with_protocol
from autotune.runtime.compile_cache import CACHE_FILE
from autotune.runtime.config import CompileConfig
from autotune.trial.runner import run_trial

__all__ = ["record_compile_cache"]


def record_compile_cache(
    harness: Harness, config: CompileConfig, created: str | None, folder: str | os.PathLike[str]
) -> tuple[dict[str, Any], Path | None]:
    """Run a configuration cold in a fresh worker that saves its artifacts, then in another with them loaded.

    Returns best.yaml's `compile_cache` section (both compile times, the file's fingerprint)
    and the saved file, staged in `folder` under a temporary name for the caller to move into
    place. The file is None, and the section says why, when a run failed or nothing was saved.
    Both runs use fresh Inductor and Triton caches, so the second one starts from the file alone.
    """
    # The writer's pid in the name lets a later run remove the file if this process is killed (see publish).
    fd, name = tempfile.mkstemp(prefix=f".{CACHE_FILE}.{os.getpid()}.", suffix=".staged", dir=folder)
    os.close(fd)
    staged = Path(name)
    # Compile time does not depend on how long throughput is measured: one window and no stream is enough.
    request = with_protocol(harness, windows=1, fresh_batches=0).request(config, created=created)
    cold = run_trial(replace(request, save_cache_path=str(staged)))
    if cold.state != "complete" or not cold.cache.get("saved"):
        staged.unlink(missing_ok=True)
        why = cold.cache.get("message") or f"the cold run {cold.state}: {cold.reason} {cold.message}".strip()
        return {"saved": False, "note": why}, None
    warm = run_trial(replace(request, load_cache_path=str(staged)))
    if warm.state != "complete" or not warm.cache.get("loaded"):
        staged.unlink(missing_ok=True)
        why = f"the run with the cache loaded {warm.state}: {warm.reason} {warm.message}".strip()
        return {
            "saved": False,
            "note": why if warm.state != "complete" else "the saved cache could not be loaded",
        }, None
    cold_seconds = float(cold.result["compile_seconds"])
    warm_seconds = float(warm.result["compile_seconds"])
    section = {
        "file": CACHE_FILE,
        "saved": True,
        "bytes": cold.cache["bytes"],
        "sha256": cold.cache["sha256"],
        "artifacts": cold.cache.get("artifacts", {}),
        "fingerprint": cold.cache["fingerprint"],
        "cold_compile_seconds": round(cold_seconds, 3),
        "cached_compile_seconds": round(warm_seconds, 3),
        "load_seconds": round(float(warm.cache.get("load_seconds", 0.0)), 3),
        "saved_fraction": round(1 - warm_seconds / cold_seconds, 3) if cold_seconds > 0 else None,
    }
    return section, staged
