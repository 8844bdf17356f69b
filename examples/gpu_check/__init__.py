"""The GPU check: a GPU machine's first contact in one staged command, `bash .ci/gpu` (see docs/gpu-check.md).

The stages run one after another, each in its own process group under its own hard time limit:
the environment, the GPU tests, a short search in a GPU space, one validation of CUDA graphs
against plain torch.compile, then the real models (the case study's captioning model, GPT-2
small training and inference), each configuration one cold run. A stage that fails or runs out
of time is recorded and the next one still runs; one that would not fit the time left is
skipped, not started. Every stage writes its log as it goes, and `summary.json` is rewritten
whenever a stage starts or ends, so a check cut short still says how far it got.

`--dry-run` runs the same stages on the CPU with tiny workloads and budgets, to prove the
plumbing before a GPU machine is used. The driver needs only the standard library: torch,
Optuna and the rest are imported by the stages, in their own processes.
"""

from __future__ import annotations

from examples.gpu_check._stages import (
    FAULT_VARIABLE,
    FIGURES_VARIABLE,
    STAGE_NAMES,
    CheckError,
    Stage,
    StageResult,
    parse_faults,
    parse_limits,
    plan,
    run_check,
)

__all__ = [
    "FAULT_VARIABLE",
    "FIGURES_VARIABLE",
    "STAGE_NAMES",
    "CheckError",
    "Stage",
    "StageResult",
    "parse_faults",
    "parse_limits",
    "plan",
    "run_check",
]
