"""Do workers forked from a pre-imported server measure as workers started by `python -m` do?

    python -m examples.fork_study --workload examples.toy:model --rounds 6

A live plain-compile reference (started by `python -m`), then `--rounds` rounds of two warm
restarts of one configuration from the same cache folder: one forked from the server, one started
anew, in a random order each round. Each restart is paired with the reference for `--windows`
windows as a search trial is, and its start is timed (process start to ready). Prints a JSON line
per restart, then for each way of starting: the mean of its restarts' ratios to the reference,
their spread between processes, and the seconds to ready; and the ratio of the two means.

Nothing else may run while it measures: the 1-minute load before and after is printed.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from autotune import resolve
from autotune.measure.engine import Harness
from autotune.measure.tasks import measure_baselines
from autotune.measure.tasks._pairing import first_run, pair_windows
from autotune.runtime.config import CompileConfig
from autotune.trial.forkserver import DISABLE_VARIABLE, close_servers
from autotune.trial.runner import live_worker
from examples._shared import between_loads, study_parser

WAYS = ("forked", "anew")


def study(spec: str, config: CompileConfig, *, rounds: int, windows: int, seed: int) -> list[dict[str, Any]]:
    """`rounds` rounds of one forked and one new warm restart of `config`, each paired with a live plain compile."""
    workload = resolve(spec, isolated=True)
    harness = Harness(spec=spec, summary=workload.summary(spec, workload.draw_batches()))
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="fork-study-"))
    baselines = None
    try:
        _start(forked=False)
        baselines = measure_baselines(harness, root, windows=windows)
        reference = baselines.reference
        if reference is None:
            raise SystemExit("fork_study: neither baseline ran; nothing to pair with")
        request = harness.request(config, cache_dir=str(root / "config"))
        cold = first_run(request, None, None)
        print(f"cold first run: {cold.state}", flush=True)
        rows = []
        for number in range(1, rounds + 1):
            for way in rng.sample(WAYS, len(WAYS)):
                _start(forked=way == "forked")
                with live_worker(request) as worker:
                    ready = worker.until_ready()
                    to_ready = worker.snapshot().wall_seconds
                    paired, why = pair_windows(worker, reference, windows=windows, rng=rng) if ready else (None, "")
                    worker.end()
                if paired is None:
                    raise SystemExit(f"fork_study: a {way} restart did not get ready: {worker.run.message}")
                row = {
                    "round": number,
                    "way": way,
                    "kind": type(worker.process).__name__,
                    "ratio": round(paired.ratio, 4),
                    "to_ready_s": round(to_ready, 2),
                    "stopped": why,
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
        return rows
    finally:
        if baselines is not None:
            baselines.close()
        close_servers()
        shutil.rmtree(root, ignore_errors=True)


def _start(*, forked: bool) -> None:
    os.environ[DISABLE_VARIABLE] = "1" if forked else "0"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per way of starting: mean ratio to the reference (geometric), spread of log ratios, seconds to ready."""
    out: dict[str, Any] = {}
    for way in WAYS:
        logs = [math.log(r["ratio"]) for r in rows if r["way"] == way]
        ready = [r["to_ready_s"] for r in rows if r["way"] == way]
        out[way] = {
            "restarts": len(logs),
            "mean_ratio": round(math.exp(statistics.fmean(logs)), 4),
            "sd_log_ratio": round(statistics.stdev(logs), 4) if len(logs) > 1 else None,
            "median_to_ready_s": round(statistics.median(ready), 2),
        }
    out["forked_over_anew"] = round(out["forked"]["mean_ratio"] / out["anew"]["mean_ratio"], 4)
    return out


def main() -> None:
    parser = study_parser(__doc__, "examples.toy:model")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument(
        "--config", default='{"compile_optimizer": true}', help="the configuration, as JSON (default: %(default)s)"
    )
    args = parser.parse_args()
    if args.rounds < 2 or args.windows < 2:
        parser.error(f"--rounds and --windows must be at least 2, got {args.rounds} and {args.windows}")
    config = CompileConfig.from_dict(json.loads(args.config))
    rows = between_loads(lambda: study(args.workload, config, rounds=args.rounds, windows=args.windows, seed=args.seed))
    print(json.dumps(summary(rows), indent=2))


if __name__ == "__main__":
    main()
