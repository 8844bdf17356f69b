"""`bash .ci/gpu --bench`: real models on the GPU, each configuration one cold run, staged like the check.

The check's toy is launch-bound on an H200; the models the field's published figures are about
are not. So the benchmark runs, each as a stage with its own limit (a stage stopped at its limit
keeps the runs it finished, and `summary.json` is written as it goes):

- the case study's captioning model at its original size (ViT-B/16 encoder, 12-layer GPT-2
  decoder, batch 64, captions of varying length), training: eager, plain torch.compile, and the
  study's hand recipe (max-autotune, the compiled optimizer step, padding to a multiple of 8);
- GPT-2 small, training on text of varying length: eager and plain torch.compile;
- GPT-2 small, prompts of 16 to 512 tokens, inference: eager and plain torch.compile.

Each configuration is one run in a fresh worker, as a search's trial starts: compiled cold,
checked against eager, settled, then one pass over fresh batches. So every figure is a single
cold run with no interval, and the summary says so. Per run it records the compile seconds and
their split, the steady and the fresh-batch throughput, the peak allocated and reserved memory,
the CUDA graphs recorded, graph breaks and recompiles; per stage, the device's clocks and the
TF32 settings. `--dry-run` runs the same stages on the CPU at the examples' tiny size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples.gpu_check._stages import Stage, plan

__all__ = [
    "BENCH_LIMITS",
    "BENCH_STAGES",
    "BENCH_SUBJECTS",
    "DRY_BENCH_LIMITS",
    "SUBJECT_MARGIN",
    "BenchSubject",
    "bench_plan",
    "subject",
]

HAND_TUNED: Mapping[str, Any] = {"mode": "max-autotune", "compile_optimizer": True, "padding_alignment": 8}
"""The case study's hand recipe for its captioning model: max-autotune (kernel selection and CUDA graphs), the Adam
step compiled too, captions padded to a multiple of 8 (`CompileConfig`'s keyword arguments)."""


@dataclass(frozen=True)
class BenchSubject:
    """One stage of the benchmark: a workload, and the configurations each run once, cold."""

    name: str
    model: str
    """The workload's spec, as `--model` takes it; its size comes from AUTOTUNE_EXAMPLE_SIZE."""
    what: str
    configs: tuple[tuple[str, Mapping[str, Any] | None], ...]
    """(label, `CompileConfig` keyword arguments, or None for eager), in the order they run."""


_BASELINES: tuple[tuple[str, Mapping[str, Any] | None], ...] = (("eager", None), ("plain compile", {}))

BENCH_SUBJECTS = (
    BenchSubject(
        "captioning-train",
        "examples.captioning:captioning_dynamic",
        "captioning at the case study's size (ViT-B/16 encoder, 12-layer GPT-2 decoder, batch 64), training: "
        "eager, plain compile, the hand recipe",
        (*_BASELINES, ("hand recipe", HAND_TUNED)),
    ),
    BenchSubject(
        "gpt2-train",
        "examples.hf:gpt2",
        "GPT-2 small, training on text of varying length: eager, plain compile",
        _BASELINES,
    ),
    BenchSubject(
        "gpt2-infer",
        "examples.gpt2_generate:gpt2_generate",
        "GPT-2 small, prompts of 16 to 512 tokens, inference: eager, plain compile",
        _BASELINES,
    ),
)
BENCH_STAGES = ("environment", *(s.name for s in BENCH_SUBJECTS))
"""The benchmark's stages, in the order they run."""
# On the H200 (2026-11-26) a process took about 10 s to start and make its CUDA context, and the toy's cold
# compile 32 s; a model of a hundred million parameters compiles for longer, and for minutes under max-autotune.
# The captioning stage, the one with published figures to compare, gets half the time. Each run may take what its
# stage has left (`SUBJECT_MARGIN` kept for the stage's own start), so a run past it is recorded as timed out and
# the figures before it stay. The limits add up to 9 minutes, as the check's do.
BENCH_LIMITS = {"environment": 20.0, "captioning-train": 280.0, "gpt2-train": 130.0, "gpt2-infer": 110.0}
# The dry run's limits are twice what its stages took alone on the 2-core CPU host (4, 192, 50 and 25 s), or more.
DRY_BENCH_LIMITS = {"environment": 60.0, "captioning-train": 420.0, "gpt2-train": 180.0, "gpt2-infer": 120.0}
SUBJECT_MARGIN = 15.0
"""Seconds of a stage's limit its subject does not give its runs: its own imports and the workload's build."""


def subject(name: str) -> BenchSubject:
    """The benchmark's subject called `name`; KeyError for a name that is not one."""
    for entry in BENCH_SUBJECTS:
        if entry.name == name:
            return entry
    raise KeyError(name)


def bench_plan(
    *, dry_run: bool, python: str, site: Path | None, limits: Mapping[str, float] | None = None
) -> list[Stage]:
    """The benchmark's stages: the check's environment stage, then one per subject."""
    base = DRY_BENCH_LIMITS if dry_run else BENCH_LIMITS
    limit = {**base, **(limits or {})}
    (environment,) = (s for s in plan(dry_run=dry_run, python=python, site=site) if s.name == "environment")
    stages = [
        Stage(name=environment.name, what=environment.what, commands=environment.commands, limit=limit["environment"])
    ]
    for entry in BENCH_SUBJECTS:
        budget = f"{limit[entry.name] - SUBJECT_MARGIN:g}"
        command = [python, "-m", "examples.gpu_check", "subject", entry.name, "--seconds", budget]
        command += ["--dry-run"] if dry_run else []
        stages.append(Stage(name=entry.name, what=entry.what, commands=_always(command), limit=limit[entry.name]))
    return stages


def _always(command: list[str]) -> Callable[[Path], list[list[str]]]:
    """A stage's commands that do not depend on its work folder."""
    return lambda work: [command]
