"""The real models' stages of `bash .ci/gpu`: each configuration one cold run, after the check's stages.

The check's toy is launch-bound on an H200; the models the field's published figures are about
are not. So the GPU check goes on, after its own stages, with these subjects, each a stage with
its own limit (a stage stopped at its limit keeps the runs it finished, and `summary.json` is
written as it goes):

- the case study's captioning model at its original size (ViT-B/16 encoder, 12-layer GPT-2
  decoder, batch 64) as the study trained it: captions padded to 256, the forward pass under
  bfloat16 autocast; eager, plain torch.compile, and the study's hand recipe (max-autotune and the
  compiled optimizer step; its padding to a multiple of 8 holds already at 256);
- GPT-2 small, training on text of varying length: eager and plain torch.compile;
- GPT-2 small, prompts of 16 to 512 tokens, inference: eager and plain torch.compile;
- the captioning model on captions padded to each batch's longest, under bfloat16 autocast: eager
  and plain torch.compile.

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

__all__ = [
    "BENCH_STAGES",
    "BENCH_SUBJECTS",
    "SUBJECT_MARGIN",
    "BenchSubject",
    "subject",
    "subject_commands",
]

HAND_TUNED: Mapping[str, Any] = {"mode": "max-autotune", "compile_optimizer": True}
"""The case study's hand recipe for its captioning model: max-autotune (kernel selection and CUDA graphs) and the Adam
step compiled too (`CompileConfig`'s keyword arguments). Its third part, captions padded to a multiple of 8, is
already so where every caption is padded to 256; `CompileConfig` takes it only over declared dynamic lengths."""


@dataclass(frozen=True)
class BenchSubject:
    """One real model's stage: a workload, and the configurations each run once, cold."""

    name: str
    model: str
    """The workload's spec, as `--model` takes it; its size comes from AUTOTUNE_EXAMPLE_SIZE."""
    what: str
    configs: tuple[tuple[str, Mapping[str, Any] | None], ...]
    """(label, `CompileConfig` keyword arguments, or None for eager), in the order they run."""
    dry_model: str | None = None
    """The workload the dry run uses on the CPU, where it is not `model`."""

    def model_for(self, *, dry_run: bool) -> str:
        """The workload's spec on a GPU, or in the dry run on the CPU."""
        return self.dry_model if dry_run and self.dry_model else self.model


_CAPTIONING = "examples.captioning:captioning"
# The dry run's CPU has no bfloat16 arithmetic of its own and emulates it: at the tiny size a plain compile of the
# captioning model under bfloat16 autocast took 108 s and the hand recipe over 260 s (2026-12-07, a shared 2-core
# host). So the dry run proves the plumbing in float32; the workload under autocast is checked by its own test.
_BASELINES: tuple[tuple[str, Mapping[str, Any] | None], ...] = (("eager", None), ("plain compile", {}))

BENCH_SUBJECTS = (
    BenchSubject(
        "captioning",
        "examples.captioning:captioning_static_bf16",
        "captioning as the case study trained it (ViT-B/16 encoder, 12-layer GPT-2 decoder, batch 64, captions "
        "padded to 256, bfloat16 autocast): eager, plain compile, the hand recipe",
        (*_BASELINES, ("hand recipe", HAND_TUNED)),
        dry_model=f"{_CAPTIONING}_static",
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
    BenchSubject(
        "captioning-dynamic",
        "examples.captioning:captioning_dynamic_bf16",
        "captioning on captions padded to each batch's longest, bfloat16 autocast, training: eager, plain compile",
        _BASELINES,
        dry_model=f"{_CAPTIONING}_dynamic",
    ),
)
BENCH_STAGES = tuple(s.name for s in BENCH_SUBJECTS)
"""The real models' stages, in the order they run after the check's."""
SUBJECT_MARGIN = 15.0
"""Seconds of a stage's limit its subject does not give its runs: its own imports and the workload's build."""


def subject(name: str) -> BenchSubject:
    """The benchmark's subject called `name`; KeyError for a name that is not one."""
    for entry in BENCH_SUBJECTS:
        if entry.name == name:
            return entry
    raise KeyError(name)


def subject_commands(name: str, *, python: str, dry_run: bool, limit: float) -> Callable[[Path], list[list[str]]]:
    """The stage `name`'s command: its subject's runs, given the stage's `limit` less `SUBJECT_MARGIN`."""
    command = [python, "-m", "examples.gpu_check", "subject", name, "--seconds", f"{limit - SUBJECT_MARGIN:g}"]
    command += ["--dry-run"] if dry_run else []
    return lambda work: [command]
