"""Does a configuration's first warm restart, the one a search measures, read as its later ones do?

    python -m examples.restart_study --workload examples.convnet:convnet --restarts 4

The search's own steps: the baselines (eager and plain compile, cold, then warm and paired,
plain compile staying alive as the reference), one cold first run of the configuration (by
default only `compile_optimizer: true`), then `--restarts` warm restarts from its cache folder,
each paired with the reference for `--windows` windows as a search trial is (no extra windows),
with an anchor (a fresh plain-compile restart paired the same way) before each. Prints each
restart's ratio, its paired windows' ratios, the anchor and how many files its cache folder holds.

Nothing else may run while it measures: the 1-minute load before and after is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune import resolve
from autotune.measure.engine import Harness
from autotune.measure.tasks import LiveReference, anchor_reference, measure_baselines
from autotune.measure.tasks._pairing import first_run, pair_windows
from autotune.runtime.config import CompileConfig
from autotune.trial.runner import live_worker


def _files(folder: Path) -> int:
    return sum(1 for path in folder.rglob("*") if path.is_file())


def study(
    spec: str,
    config: CompileConfig,
    *,
    restarts: int,
    windows: int,
    seed: int,
    workload_seed: int = 0,
    cold_each: bool = False,
) -> list[dict[str, Any]]:
    """One cold first run of `config`, then `restarts` warm restarts paired with the live plain compile.

    `workload_seed` seeds the workers' model and batches as `autotune search --seed` does; `seed`
    orders the turns. With `cold_each`, every restart follows a cold first run of its own in a
    new folder, right after the anchor, in a search's order (anchor, cold run, warm restart).
    """
    workload = resolve(spec, isolated=True)
    batches = workload.draw_batches(seed=workload_seed)
    harness = Harness(spec=spec, summary=workload.summary(spec, batches), seed=workload_seed)
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="restart-study-"))
    baselines = None
    try:
        baselines = measure_baselines(harness, root, windows=windows)
        reference = baselines.reference
        if reference is None:
            raise SystemExit("restart_study: neither baseline ran; nothing to pair with")
        return _restarts(
            harness, config, reference, root, restarts=restarts, windows=windows, rng=rng, cold_each=cold_each
        )
    finally:
        if baselines is not None:
            baselines.close()  # the live reference ends even when a restart raised
        shutil.rmtree(root, ignore_errors=True)


def _restarts(
    harness: Harness,
    config: CompileConfig,
    reference: LiveReference,
    root: Path,
    *,
    restarts: int,
    windows: int,
    rng: random.Random,
    cold_each: bool,
) -> list[dict[str, Any]]:
    """The study's restarts, each after an anchor (and, with `cold_each`, a cold first run of its own)."""
    request = harness.request(config, cache_dir=str(root / "config"))
    if not cold_each:
        cold = first_run(request, None, None)
        print(f"cold first run: {cold.state}; cache folder {_files(root / 'config')} files", flush=True)
    rows = []
    for number in range(1, restarts + 1):
        anchor = anchor_reference(reference, windows=windows, rng=rng)
        if cold_each:
            request = harness.request(config, cache_dir=str(root / f"config-{number}"))
            first_run(request, None, None)
        with live_worker(replace(request, save_cache_path=None, load_cache_path=None)) as worker:
            worker.until_ready()
            paired, why = pair_windows(worker, reference, windows=windows, rng=rng)
            worker.end()
        row = {
            "restart": number,
            "ratio": paired.ratio,
            "windows": [round(math.exp(w), 4) for w in paired.window_log_ratios()],
            "anchor": anchor,
            "recompiles": sum(w.recompiles for w in paired.trial_windows),
            "cache_files": _files(Path(request.cache_dir or root)),
            "stopped": why,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="examples.convnet:convnet", help="PKG.MOD:ATTR of the workload")
    parser.add_argument("--restarts", type=int, default=4, help="warm restarts of the configuration (default: 4)")
    parser.add_argument("--windows", type=int, default=5, help="paired windows per restart (default: 5, as a search)")
    parser.add_argument("--seed", type=int, default=1, help="orders the turns (default: 1)")
    parser.add_argument(
        "--workload-seed", type=int, default=0, help="model and batch seed, as search --seed (default 0)"
    )
    parser.add_argument(
        "--cold-each", action="store_true", help="a cold first run before every restart, as a search orders them"
    )
    args = parser.parse_args()
    for flag, value, least in (("--restarts", args.restarts, 1), ("--windows", args.windows, 2)):
        if value < least:
            parser.error(f"{flag} {value}: must be at least {least}")
    load = os.getloadavg()[0]
    print(f"1-minute load at the start: {load:.2f}", flush=True)
    study(
        args.workload,
        CompileConfig(compile_optimizer=True),
        restarts=args.restarts,
        windows=args.windows,
        seed=args.seed,
        workload_seed=args.workload_seed,
        cold_each=args.cold_each,
    )
    print(f"1-minute load at the end: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
