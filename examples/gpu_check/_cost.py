"""What each stage of the GPU check costs on a GPU, and the limits that follow.

A stage's cost is the processes it starts, the cold compiles they make and the windows they
measure. Each constant below says where it comes from: a few were measured on an H200
(2026-11-26, torch 2.11, `outputs/benchmarks/gpu/2026-11-26/`); the real models have never run
on a GPU, so their constants are estimates, and the figures a GPU run returns replace them.

A stage's GPU limit leaves at least `MARGIN` of itself unspent by its modelled cost; the limits of
the required stages add up to `GPU_SECONDS` at most. An optional stage runs only where the time
left still holds every required stage after it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = [
    "COSTS",
    "GPU_SECONDS",
    "MARGIN",
    "RUN_COSTS",
    "SEARCH_PROCESSES",
    "gpu_limit",
]

GPU_SECONDS = 9 * 60
"""What the required stages' GPU limits may add up to: a device call is 10 minutes at most, the machine's start
(1 to 2 minutes) counts against the same allowance, and the driver needs a few seconds between stages."""
MARGIN = 0.2
"""The share of a stage's GPU limit its modelled cost must leave unspent."""

# Measured on the H200 (2026-11-26, torch 2.11, at b7e2c3d).
ENVIRONMENT = 15.0
"""The environment stage: the wheels installed offline and every import once (10.8 to 14.9 s in three runs)."""
PROCESS_START = 10.0
"""A worker's start with its CUDA context, before it builds its workload (the toy's runs)."""
GPU_PROBE_TEST, STALE_INPUT_TEST = 7.1, 2.8
"""The two quick GPU tests' seconds in the tests stage."""
SEARCH_PROCESSES = {
    "imports, the study, the export": (0, 10.0),
    "baselines, cold (eager, plain compile)": (2, 42.0),
    "baselines, warm": (2, 24.0),
    "anchor before the first trial": (1, 12.0),
    "trial 1 (the CUDA-graph recipe): cold, then warm": (2, 47.0),
    "confirmation: 2 replicates of eager, plain compile and trial 1": (6, 68.0),
}
"""Each step of the search stage, in order: how many processes it starts, and their seconds in all, priced from the
toy's cold compile and warm-up (32 s), eager's (about 10 s), a warm start from the process's own cache (7 s, CUDA
context and graphs included) and its windows. At b7e2c3d the stage started 2 baselines cold, trial 1 cold, 2
confirmation replicates of 3 subjects and 2 runs of the compile-cache proof, in 190 s; since then the baselines
also run warm, an anchor restarts plain compile before the first trial, the trial gets a warm restart, and the
cache proof is folded into the confirmation's replicates."""
VALIDATE = 141.0
"""The validate stage alone (140.7 s): three cold runs one after another (about 85 s), then 2 replicates."""

# Estimates: nothing of these was measured on a GPU yet.
PYTEST_START = 8.0
"""pytest's start, collection and the project's imports in the tests stage."""
DEVICE_MEMORY_TEST = 2.0
"""The quick test of what the CUDA device counts (a few allocations), added after the H200 run."""
SUBJECT_SETUP = 10.0
"""A real-model stage's own process: torch and transformers imported, the workload built once for the harness."""
WORKER_BUILD = 8.0
"""A worker builds the full-size model and its batches again and moves them to the device."""
RUN_MEASURE = 8.0
"""A run past its compile: the accuracy check's eager and compiled steps, 3 settling windows of 0.5 s, 8 fresh
batches."""
CAPTIONING_COMPILE = 60.0
"""A cold plain compile of the captioning model's training step (ViT-B/16 and a 12-layer GPT-2 decoder, forward and
backward, one shape): about twice GPT-2 small's, from the toy's 32 s of which about half is fixed cost."""
MAX_AUTOTUNE = 80.0
"""max-autotune's GEMM tuning beyond a plain compile: some 30 distinct matrix shapes forward and backward, a few
seconds each with the candidates precompiled on 16 cores."""
COMPILED_ADAM = 25.0
"""The Adam step compiled too: one more graph over some 200 parameters, its kernels compiled cold."""
GPT2_TRAIN_COMPILE = 35.0
"""A cold compile of GPT-2 small's training step at one shape."""
GPT2_INFER_COMPILE = 20.0
"""A cold compile of GPT-2 small's forward pass at one shape."""
DYNAMIC_RECOMPILE = 1.0
"""Lengths that vary compile twice: once at the first shape, again with the length dynamic (a whole compile more)."""
# A model with dropout compiles once for the accuracy check in eval mode and again to train; the costs above count
# one compile per run, as a run costs once the check and the training share their compile.


def _run(compile_seconds: float = 0.0) -> float:
    """One configuration's run in a fresh worker: its start, its build, its compile and what it measures."""
    return PROCESS_START + WORKER_BUILD + compile_seconds + RUN_MEASURE


_HAND_RECIPE = CAPTIONING_COMPILE + MAX_AUTOTUNE + COMPILED_ADAM
RUN_COSTS: Mapping[str, Mapping[str, float]] = {
    "captioning": {
        "eager": _run(),
        "plain compile": _run(CAPTIONING_COMPILE),
        "hand recipe": _run(_HAND_RECIPE),
    },
    "gpt2-train": {
        "eager": _run(),
        "plain compile": _run(GPT2_TRAIN_COMPILE * (1 + DYNAMIC_RECOMPILE)),
    },
    "gpt2-infer": {
        "eager": _run(),
        "plain compile": _run(GPT2_INFER_COMPILE * (1 + DYNAMIC_RECOMPILE)),
    },
    # The hand recipe over varying lengths (tuning twice, a CUDA graph per padded width) is modelled at about 6
    # minutes alone: more than a device call holds beside anything else, so this stage runs the two baselines.
    "captioning-dynamic": {
        "eager": _run(),
        "plain compile": _run(CAPTIONING_COMPILE * (1 + DYNAMIC_RECOMPILE)),
    },
}
"""Each real-model stage's runs, in the order they run, and what each is modelled to take on a GPU."""

COSTS: Mapping[str, float] = {
    "environment": ENVIRONMENT,
    "tests": PYTEST_START + GPU_PROBE_TEST + STALE_INPUT_TEST + DEVICE_MEMORY_TEST,
    "search": sum(seconds for _, seconds in SEARCH_PROCESSES.values()),
    "validate": VALIDATE,
    **{name: SUBJECT_SETUP + sum(runs.values()) for name, runs in RUN_COSTS.items()},
}
"""Every stage's modelled seconds on a GPU."""


def gpu_limit(stage: str) -> float:
    """The stage's GPU limit: its modelled cost with `MARGIN` of the limit to spare, rounded up to 5 s; KeyError for a
    stage the model does not know."""
    return 5.0 * math.ceil(COSTS[stage] / (1 - MARGIN) / 5.0)
