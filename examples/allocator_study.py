"""What glibc's adaptive malloc thresholds cost a CPU training step, and how much they vary from process to process.

    python -m examples.allocator_study --workload examples.convnet:convnet --pairs 6 --out outputs/benchmarks/allocator.md

Starts fresh processes in pairs, one with glibc's default malloc and one with the steady
thresholds autotune measures with (`autotune.runtime.allocator.VARIABLES`), in alternating
order. Each builds the workload, runs eager training steps until warm, then times 8 windows of
0.5 s and counts the minor page faults of each step (/proc/self/stat). The spread of the
processes' own rates (their coefficient of variation) is what measurement replicates must
average out; the faults per step are where it comes from.

Nothing else may run while it measures: the 1-minute load before and after is recorded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from autotune.runtime import allocator

WINDOW_SECONDS = 0.5
WINDOWS = 8
DESIGNS = {"glibc default": {}, "steady thresholds": allocator.VARIABLES}


def _faults() -> int:
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])


def _child(spec: str) -> None:
    """Time eager training windows of `spec` in this process; print one JSON line."""
    from examples._shared import eager_training

    one_pass, batches = eager_training(spec, warm_passes=5)
    rates, faults = [], []
    for _ in range(WINDOWS):
        before, started, steps = _faults(), time.perf_counter(), 0
        while time.perf_counter() - started < WINDOW_SECONDS:
            one_pass()
            steps += len(batches)
        rates.append(steps / (time.perf_counter() - started))
        faults.append((_faults() - before) / steps)
    print(json.dumps({"rate": statistics.median(rates), "faults": statistics.median(faults)}))


def _run(spec: str, extra: dict[str, str]) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "LD_PRELOAD", *allocator.VARIABLES)}
    child = subprocess.run(
        [sys.executable, "-m", "examples.allocator_study", "--child", spec],
        env={**env, **extra},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(child.stdout.strip().splitlines()[-1])


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default="examples.convnet:convnet", help="pkg.mod:attr of a training workload")
    p.add_argument("--pairs", type=int, default=6, help="processes of each design (default: 6)")
    p.add_argument("--out", help="write the Markdown table here too")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    load_before, started = _load(), dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in DESIGNS}
    for index in range(args.pairs):
        order = list(DESIGNS) if index % 2 == 0 else list(DESIGNS)[::-1]
        for name in order:
            runs[name].append(_run(args.workload, dict(DESIGNS[name])))
            print(f"{index + 1}/{args.pairs} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    text = _table(args, runs, started, load_before, _load())
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


def _table(
    args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], started: dt.datetime, before: str, after: str
) -> str:
    import torch

    lines = [
        f"`python -m examples.allocator_study --workload {args.workload} --pairs {args.pairs}` on "
        f"{started.isoformat()}: torch {torch.__version__}, {os.cpu_count()} CPUs, 1-minute load {before} before "
        f"and {after} after (its own work), nothing else running.",
        "",
        f"Eager training steps, {WINDOWS} windows of {WINDOW_SECONDS} s in each fresh process; a process's figure "
        "is the median of its windows. The designs alternate, so the machine's drift over the run reaches both alike; "
        "the spread between processes holds that drift as well as each process's own speed.",
        "",
        "| malloc | processes | steps/s, each process in turn | median | spread between processes (cv %) | "
        "page faults per step, each process |",
        "|---|---|---|---|---|---|",
    ]
    for name, values in runs.items():
        rates = [v["rate"] for v in values]
        faults = [v["faults"] for v in values]
        spread = 100 * statistics.stdev(rates) / statistics.fmean(rates) if len(rates) > 1 else 0.0
        lines.append(
            f"| {name} | {len(values)} | {', '.join(f'{r:.0f}' for r in rates)} | {statistics.median(rates):.0f} | "
            f"{spread:.1f} | {', '.join(f'{f:.0f}' for f in faults)} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
