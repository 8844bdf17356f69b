"""What a search knows of its workload before it runs anything: its summary, lengths and harness."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.measure import Harness
from autotune.runtime import environment
from autotune.runtime.summary import InputKey, WorkloadSummary
from autotune.study.search._lengths import observed_lengths, shared_length_groups
from autotune.study.search._options import SearchOptions
from autotune.study.search._space import SearchSpace
from autotune.trial.request import RunProtocol
from autotune.workload import resolve

__all__ = ["Prepared", "prepare", "prepare_workload"]


@dataclass(frozen=True)
class Prepared:
    """The workload resolved in isolation, as both a search and its dry run see it."""

    summary: WorkloadSummary
    harness: Harness
    model_fingerprint: dict[str, Any]
    shared_lengths: list[list[tuple[InputKey, int]]]
    """Declared (input, axis) pairs whose lengths are equal in every batch."""
    lengths: dict[tuple[InputKey, int], list[int]]
    """Each declared (input, axis) pair's lengths in the fixed batches and the fresh stream: what buckets learn from."""

    def space(self, base: SearchSpace, graph_breaks: int, *, allow_precision_changes: bool) -> SearchSpace:
        """`base` adapted to this workload, the harness's device and plain compile's graph breaks."""
        return base.adapt(
            self.summary,
            self.harness.device,
            graph_breaks=graph_breaks,
            shared_lengths=self.shared_lengths,
            lengths=self.lengths,
            allow_precision_changes=allow_precision_changes,
        )


def prepare(options: SearchOptions) -> Prepared:
    """Resolve `options.model` in a fresh interpreter and draw its batches as every trial will."""
    return prepare_workload(
        options.model,
        device=str(options.device),
        seed=options.seed,
        protocol=options.protocol,
        timeout=options.trial_timeout,
    )


def prepare_workload(spec: str, *, device: str, seed: int, protocol: RunProtocol, timeout: float) -> Prepared:
    """Resolve `spec` in a fresh interpreter and draw its batches with `seed`, as every trial will (search, retune)."""
    workload = resolve(spec, isolated=True)
    batches = workload.draw_batches(seed=seed)
    summary = workload.summary(spec, batches)
    # Buckets are learned from the lengths a trial meets: the fixed batches and the fresh stream after them.
    fresh = workload.fresh_batches(seed=seed, count=protocol.fresh_batches)
    return Prepared(
        summary=summary,
        harness=Harness(spec=spec, summary=summary, device=device, seed=seed, protocol=protocol, timeout=timeout),
        model_fingerprint=environment.model_fingerprint(workload.model, environment.batch_shapes(batches)),
        shared_lengths=shared_length_groups(summary, batches),
        lengths=observed_lengths(summary, [*batches, *fresh]),
    )
