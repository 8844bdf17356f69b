"""What a first run of a model with dropout costs, with and without random numbers drawn as eager draws them.

    python -m examples.dropout_study --out outputs/benchmarks/archive/dropout-first-run.json

For the toy at dropout 0.1 on every residual branch (`examples.toy:model_with_dropout`), each
replicate runs plain compile's configuration twice, each run a cold first run in a fresh worker
with an empty cache, as a search's trial runs: once as it is (its accuracy check in eval mode,
then training compiles again in train mode) and once with `random_as_eager` (checked in train
mode, one compile). The order alternates between replicates. Each run says its wall time, its
compile time, its check's seconds and what dynamo counted: graphs compiled and frames compiled
again (recompiles).

Nothing else may run while it measures: it refuses to start when the 1-minute load is above 0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune import CompileConfig, resolve
from autotune.measure import Harness
from autotune.trial.request import RunProtocol
from autotune.trial.runner import run_trial

SPEC = "examples.toy:model_with_dropout"
CONFIGS = {
    "as it is": CompileConfig(),
    "random_as_eager": CompileConfig(knobs={"random_as_eager": True}),
}
FIGURES = ("wall_seconds", "compile_seconds", "check_seconds", "graphs", "recompiles")


def first_runs(replicates: int) -> list[dict[str, Any]]:
    """Every run's figures, replicate by replicate, the two configurations in alternating order."""
    workload = resolve(SPEC)
    harness = Harness(spec=SPEC, summary=workload.summary(SPEC, workload.draw_batches()), protocol=RunProtocol())
    runs = []
    for replicate in range(replicates):
        names = list(CONFIGS) if replicate % 2 == 0 else list(reversed(CONFIGS))
        for name in names:
            record = run_trial(replace(harness.request(CONFIGS[name]), timeout=900)).record()
            row = {"replicate": replicate + 1, "configuration": name, "state": record.state}
            row.update({figure: getattr(record, figure) for figure in FIGURES})
            print(json.dumps(row), flush=True)
            runs.append(row)
    return runs


def summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each configuration's median of every figure over its complete runs."""
    medians: dict[str, dict[str, float]] = {}
    for name in CONFIGS:
        mine = [r for r in runs if r["configuration"] == name and r["state"] == "complete"]
        medians[name] = {f: statistics.median(float(r[f] or 0.0) for r in mine) for f in FIGURES} if mine else {}
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=3, help="pairs of first runs (default 3)")
    parser.add_argument("--out", type=Path, help="write the runs and their medians to this JSON file")
    args = parser.parse_args(argv)
    if args.replicates < 1:
        parser.error(f"--replicates {args.replicates}: must be >= 1")
    load = os.getloadavg()[0]
    if load > 0.5:
        print(
            f"dropout_study: the 1-minute load is {load:.2f}; run it with nothing else on the machine", file=sys.stderr
        )
        return 2
    runs = first_runs(args.replicates)
    medians = summary(runs)
    for name, figures in medians.items():
        print(f"{name}: " + ", ".join(f"{k} {v:g}" for k, v in figures.items()))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"spec": SPEC, "load_before": load, "load_after": os.getloadavg()[0], "runs": runs}
        args.out.write_text(json.dumps({**record, "medians": medians}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
