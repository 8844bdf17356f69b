"""How long does a replicate take with its subjects compiling side by side, against one after the other?

    python -m examples.start_study --workload examples.toy:model --rounds 4

The confirmation's three subjects of the README demo (eager, plain compile, and a configuration,
by default the compiled optimizer step), each first run cold into its own cache folder; then
`--rounds` rounds of two replicates of all three, warm from those folders, one with the subjects
compiling side by side before they settle one at a time (`Device.compiles_side_by_side`, what a
CPU does), one with each building, compiling and settling before the next starts, in a random
order each round. Prints a JSON line per replicate (seconds to ready, whole seconds, each
subject's warm compile and its rate in the replicate's windows), then per way: the median
seconds, and the mean ratio of the configuration to plain compile, which must not move.

Nothing else may run while it measures: the 1-minute load before and after is printed.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from autotune import resolve
from autotune.measure.engine import Harness, batches_for
from autotune.measure.engine._replicate import run_replicate
from autotune.measure.tasks._pairing import first_run
from autotune.runtime.config import CompileConfig
from autotune.runtime.device import CPUDevice
from autotune.trial.forkserver import close_servers
from examples._shared import between_loads, study_parser

WAYS = ("side by side", "one after the other")


def study(spec: str, config: CompileConfig, *, rounds: int, blocks: int, seed: int) -> list[dict[str, Any]]:
    """`rounds` rounds of one replicate each way, of eager, plain compile and `config`, warm from their caches."""
    workload = resolve(spec, isolated=True)
    harness = Harness(spec=spec, summary=workload.summary(spec, workload.draw_batches()))
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="start-study-"))
    try:
        subjects = {"eager": None, "compile": CompileConfig(), "config": config}
        requests = {name: harness.request(c, cache_dir=str(root / name)) for name, c in subjects.items()}
        for name, request in requests.items():
            cold = first_run(request, None, None)
            print(f"cold first run of {name}: {cold.state}, compiled in {cold.compile_seconds or 0:.1f} s", flush=True)
        rows = []
        for number in range(1, rounds + 1):
            for way in rng.sample(WAYS, len(WAYS)):
                CPUDevice.compiles_side_by_side = way == WAYS[0]
                replicate, runs, _ = run_replicate(
                    requests,
                    [list(requests)],
                    design="together",
                    blocks=blocks,
                    batches_per_window=batches_for(harness.protocol.window_seconds),
                    window_seconds=harness.protocol.window_seconds,
                    rng=rng,
                )
                rates = {n: r.record().samples_per_second for n, r in runs.items()}
                row = {
                    "round": number,
                    "way": way,
                    "ready_s": round(replicate.ready_seconds, 2),
                    "seconds": round(replicate.seconds, 2),
                    "warm_compile_s": {n: round(r.phase_seconds.get("compile", 0.0), 2) for n, r in runs.items()},
                    "samples_per_second": {n: round(v or 0.0, 1) for n, v in rates.items()},
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
        return rows
    finally:
        CPUDevice.compiles_side_by_side = True
        close_servers()
        shutil.rmtree(root, ignore_errors=True)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per way: median seconds to ready and whole, and the configuration's mean (geometric) ratio to plain compile."""
    out: dict[str, Any] = {}
    for way in WAYS:
        mine = [r for r in rows if r["way"] == way]
        logs = [
            math.log(r["samples_per_second"]["config"] / r["samples_per_second"]["compile"])
            for r in mine
            if r["samples_per_second"].get("config") and r["samples_per_second"].get("compile")
        ]
        out[way] = {
            "replicates": len(mine),
            "median_ready_s": round(statistics.median(r["ready_s"] for r in mine), 2),
            "median_seconds": round(statistics.median(r["seconds"] for r in mine), 2),
            "config_over_compile": round(math.exp(statistics.fmean(logs)), 4) if logs else None,
        }
    return out


def main() -> None:
    parser = study_parser(__doc__, "examples.toy:model")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument(
        "--config", default='{"compile_optimizer": true}', help="the configuration, as JSON (default: %(default)s)"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.blocks < 2:
        parser.error(f"--rounds must be at least 1 and --blocks at least 2, got {args.rounds} and {args.blocks}")
    config = CompileConfig.from_dict(json.loads(args.config))
    rows = between_loads(lambda: study(args.workload, config, rounds=args.rounds, blocks=args.blocks, seed=args.seed))
    print(json.dumps(summary(rows), indent=2))


if __name__ == "__main__":
    main()
