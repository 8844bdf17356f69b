"""Why a configuration's first run, in the process that compiled it, runs slower than its warm restarts.

    python -m examples.first_run_study --out outputs/benchmarks/first-run.json

For plain compile and for the compiled optimizer step of one workload (the held-out captioning
model by default), each replicate runs two processes one after the other:

* **cold**: an empty cache folder; it builds the workload, applies the generated
  `apply_compilation`, passes twice over the fresh stream (every length compiles, the
  optimizer step with them, before anything is timed), and saves its compile cache;
* **warm**: the same, loading that cache first, as every confirmation replicate starts.

Each process then times three stages of windows (one pass over the stream each):

1. `as_is`: as the process stands after compiling;
2. `no_workers`: after Inductor's compile-worker pool is shut down;
3. `gc_frozen`: after a full collection and `gc.freeze()`, which moves every object alive
   (the compiler's graphs, guards and caches among them) out of the collector's reach.

Within one process the stages' ratios say what each action gives back; the warm process,
where both actions should do nothing, shows what the order alone does. With each stage it
records the collector's passes over the oldest generation and the objects it tracks.

Nothing else may run while it measures: it refuses to start when the 1-minute load is above 0.5.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WINDOWS = 6


def _threads() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def _children() -> int:
    own = str(os.getpid())
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += fields[1] == own
    return count


def _child(spec: str, optimizer: bool, cache: str, warm: bool, windows: int) -> dict[str, Any]:
    """One process of the study: compile (or load), settle on the stream, time the three stages."""
    import torch

    from autotune.runtime import codegen, compile_cache
    from autotune.runtime.config import CompileConfig
    from autotune.workload.contract import samples_in
    from autotune.workload.resolve import resolve
    from autotune.workload.steps import StepRunner

    workload = resolve(spec)
    batches = workload.draw_batches(seed=0)
    stream = workload.fresh_batches(seed=0, count=24) or batches
    config = CompileConfig(compile_optimizer=optimizer)
    source = codegen.generate(config, workload.summary(spec, batches), created="study", version="study")
    module = codegen.load_module(source)
    model, opt = workload.model, workload.optimizer(workload.model.parameters())  # type: ignore[misc]
    started = time.perf_counter()
    if warm:
        module.load_compile_cache(cache)
    model, opt = module.apply_compilation(model, opt)
    step = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)
    step.backward = module.backward
    samples = sum(samples_in(b) for b in stream)

    def one_pass() -> float:
        began = time.perf_counter()
        for batch in stream:
            step(model, opt, module.prepare_batch(batch))
        return samples / (time.perf_counter() - began)

    one_pass()
    one_pass()
    module.finish_warmup()
    settle_seconds = time.perf_counter() - started

    def stage(name: str) -> dict[str, Any]:
        collections = gc.get_stats()[2]["collections"]
        rates = [one_pass() for _ in range(windows)]
        return {
            "stage": name,
            "rates": rates,
            "median": statistics.median(rates),
            "full_collections": gc.get_stats()[2]["collections"] - collections,
            "tracked_objects": len(gc.get_objects()),
            "threads": _threads(),
            "child_processes": _children(),
        }

    stages = [stage("as_is")]
    from torch._inductor.async_compile import shutdown_compile_workers

    shutdown_compile_workers()
    time.sleep(1.0)  # the pool's processes exit
    stages.append(stage("no_workers"))
    gc.collect()
    gc.freeze()
    stages.append(stage("gc_frozen"))
    if not warm:
        compile_cache.save_compile_cache(cache, "cpu")
    return {"warm": warm, "optimizer": optimizer, "settle_seconds": settle_seconds, "stages": stages}


def _run(spec: str, optimizer: bool, cache: str, warm: bool, windows: int, own: Path) -> dict[str, Any]:
    """One study process, with caches of its own and the allocator settings of a trial's worker."""
    from autotune.runtime import allocator

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(own / "inductor"), TRITON_CACHE_DIR=str(own / "triton"))
    env.update(allocator.worker_environment(env))
    argv = [
        sys.executable,
        "-m",
        "examples.first_run_study",
        "--child",
        spec,
        "--cache",
        cache,
        "--windows",
        str(windows),
    ]
    argv += ["--optimizer"] if optimizer else []
    argv += ["--warm"] if warm else []
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"a study process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(runs: list[dict[str, Any]]) -> str:
    lines = [
        "| subject | process | as_is (samples/s) | no_workers / as_is | gc_frozen / as_is "
        "| full collections in as_is | tracked objects | child processes before / after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        a, b, c = run["stages"]
        subject = "compiled optimizer step" if run["optimizer"] else "plain compile"
        lines.append(
            f"| {subject} (replicate {run['replicate']}) | {'warm' if run['warm'] else 'cold'} | {a['median']:.1f} "
            f"| {b['median'] / a['median']:.3f} | {c['median'] / a['median']:.3f} | {a['full_collections']} "
            f"| {a['tracked_objects']:,} | {a['child_processes']} / {b['child_processes']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="examples.captioning:captioning_dynamic", help="the workload")
    parser.add_argument("--replicates", type=int, default=2, help="cold-then-warm pairs per subject (default 2)")
    parser.add_argument("--windows", type=int, default=WINDOWS, help=f"windows per stage (default {WINDOWS})")
    parser.add_argument("--out", type=Path, default=None, help="write every figure as JSON here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--optimizer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.optimizer, args.cache, args.warm, args.windows)))
        return 0
    load = os.getloadavg()[0]
    if load > 0.5:
        raise SystemExit(f"the 1-minute load is {load:.2f}: wait until nothing else runs (at most 0.5)")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for replicate in range(1, args.replicates + 1):
            for optimizer in (False, True):
                cache = str(Path(scratch) / f"cache-{replicate}-{int(optimizer)}.bin")
                for warm in (False, True):
                    own = Path(scratch) / f"process-{replicate}-{int(optimizer)}-{int(warm)}"
                    run = _run(args.spec, optimizer, cache, warm, args.windows, own)
                    run["replicate"] = replicate
                    runs.append(run)
                    print(_summary([run]).splitlines()[-1], flush=True)
    print(_summary(runs))
    print(f"load: {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    if args.out:
        args.out.write_text(json.dumps({"spec": args.spec, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
