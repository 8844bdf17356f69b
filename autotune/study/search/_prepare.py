"""What a search knows of its workload before it runs anything: its summary, lengths and harness."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.measure import Harness
from autotune.runtime import environment
from autotune.runtime.summary import InputKey, WorkloadSummary
from autotune.study.search._options import SearchOptions
from autotune.study.search._space import SearchSpace, observed_lengths, shared_length_groups
from autotune.workload import resolve

__all__ = ["Prepared", "prepare"]


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

    def space(self, base: SearchSpace, options: SearchOptions, graph_breaks: int) -> SearchSpace:
        """`base` adapted to this workload, the device and plain compile's graph breaks."""
        return base.adapt(
            self.summary,
            str(options.device),
            graph_breaks=graph_breaks,
            shared_lengths=self.shared_lengths,
            lengths=self.lengths,
            allow_precision_changes=options.allow_precision_changes,
        )


def prepare(options: SearchOptions) -> Prepared:
    """Resolve `options.model` in a fresh interpreter and draw its batches as every trial will."""
    workload = resolve(options.model, isolated=True)
    batches = workload.draw_batches(seed=options.seed)
    summary = workload.summary(options.model, batches)
    # Buckets are learned from the lengths a trial meets: the fixed batches and the fresh stream after them.
    fresh = workload.fresh_batches(seed=options.seed, count=options.protocol.fresh_batches)
    return Prepared(
        summary=summary,
        harness=Harness(
            spec=options.model,
            summary=summary,
            device=str(options.device),
            seed=options.seed,
            protocol=options.protocol,
            timeout=options.trial_timeout,
        ),
        model_fingerprint=environment.model_fingerprint(workload.model, environment.batch_shapes(batches)),
        shared_lengths=shared_length_groups(summary, batches),
        lengths=observed_lengths(summary, [*batches, *fresh]),
    )
