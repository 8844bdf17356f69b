"""What the first compile of a new environment pays for every later one, and what the worker charges for it.

    python -m examples.shared_header_study --pairs 2

Inductor precompiles one large C++ header the first time any process of an environment
compiles a CPU kernel, and keeps it under the system's temporary folder for every later process
(`autotune.trial.shared_builds`). Each pair here gives the worker a temporary folder of its own,
so its environment is new, and runs plain compile of the workload cold twice in it, each in an
empty cache folder: the first run builds the header, the second finds it. It prints, per run, the
compile time the worker reports, the header build it left out, and their sum (what the compile
time was before the build was left out). Nothing else may run while it measures: it refuses to
start when the 1-minute load is above 0.5.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from autotune import CompileConfig, resolve
from autotune.runtime import codegen
from autotune.trial.runner import TrialRequest, run_trial


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="examples.toy:model", help="the workload (module:function)")
    parser.add_argument("--pairs", type=int, default=2, help="new environments, two cold compiles in each")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error(f"--pairs must be at least 1, got {args.pairs}")
    load = os.getloadavg()[0]
    if load > 0.5:
        parser.error(f"the 1-minute load is {load:.2f}: measure on a quiet machine (at most 0.5)")
    workload = resolve(args.model)
    summary = workload.summary(args.model, workload.draw_batches())
    source = codegen.generate(CompileConfig(), summary, created="2026-01-01T00:00:00+00:00", version="study")
    print(f"{'pair':>4} {'run':>6} {'compile s':>10} {'header s':>9} {'sum':>7}  (load {load:.2f})", flush=True)
    for pair in range(1, args.pairs + 1):
        with tempfile.TemporaryDirectory() as fresh:
            os.environ["TMPDIR"] = fresh  # read by the workers this process starts
            for label in ("first", "second"):
                run = run_trial(TrialRequest(spec=args.model, source=source, timeout=900))
                if run.compiled is None:
                    print(f"{pair:>4} {label:>6} failed: {run.message}")
                    continue
                seconds, header = run.compiled.compile_seconds, run.compiled.shared_build_seconds
                print(f"{pair:>4} {label:>6} {seconds:>10.1f} {header:>9.1f} {seconds + header:>7.1f}", flush=True)
    print(f"(1-minute load at the end: {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
