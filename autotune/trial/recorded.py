"""What a checked run leaves for the later runs of the same configuration, and how those runs check themselves.

The first run of a configuration compares it with eager at length (`autotune.trial.references`).
Its later runs (warm restarts, the confirmation's replicates, a run started from the saved
compile cache) run the same code, yet what they load is not what the first run compiled: a
cache entry, a saved artifact. So the first run records, beside its cache folder, what eager
computed over the traced steps (every loss, and the first update of one parameter) or on the
first batch (the outputs), and every later run given that folder checks its own first steps
against it before its windows count. Both runs build the workload from the same seed, so they
start from the same weights and batches.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import nn

from autotune.trial.accuracy import compare, tensor_leaves
from autotune.trial.compile_counts import frames_compiled
from autotune.trial.failure import TrialFailure
from autotune.trial.references import CHECK_SEED, UPDATE_SIZE_LIMIT, EagerReference, WholeStepReference, same_shapes
from autotune.workload.steps import StepRunner

__all__ = ["RECORDED_FILE", "RecordedReference", "recorded_path"]

RECORDED_FILE = "eager-reference.pt"
"""The file a checked run writes into its cache folder, beside Inductor's and Triton's caches."""
MOST_ELEMENTS = 1 << 20
"""The most elements kept of the recorded outputs or update: a larger one is kept as an even sample of its elements."""


def recorded_path() -> Path | None:
    """Where this process's runs of its configuration keep what eager computed: its cache folder, if it has one."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return Path(inductor).parent / RECORDED_FILE if inductor else None


def _sampled(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.detach().cpu().flatten()
    stride = max(1, math.ceil(flat.numel() / MOST_ELEMENTS))
    return flat[::stride].clone()


@dataclass
class RecordedReference:
    """What eager computed, as a checked run recorded it; `check` runs a later process's first steps against it."""

    losses: list[torch.Tensor] | None
    """Training: every micro-batch's loss over the traced steps."""
    update: tuple[str, torch.Tensor] | None
    """Training: one parameter's first update (name, its elements sampled as `_sampled` keeps them)."""
    outputs: list[torch.Tensor | None] | None
    """Inference: the outputs on the first fixed batch, sampled."""
    tolerance: float
    eval_mode: bool
    started_from: str = "a later run of the configuration"
    """Which run this is, in words, for what a failure says."""

    @classmethod
    def of(cls, reference: EagerReference | WholeStepReference) -> RecordedReference:
        """What a checked run's reference holds, as later runs need it: small, on the CPU."""
        if isinstance(reference, WholeStepReference):
            assert reference.expected is not None
            updates = reference.expected.first_updates
            kept = [name for name, value in updates.items() if value.numel() and bool(value.abs().sum() > 0)]
            name = min(kept, key=lambda n: (updates[n].numel() > MOST_ELEMENTS, -updates[n].numel())) if kept else None
            return cls(
                losses=list(reference.expected.losses),
                update=(name, _sampled(updates[name])) if name is not None else None,
                outputs=None,
                tolerance=reference.tolerance,
                eval_mode=reference.eval_mode,
            )
        return cls(
            losses=None,
            update=None,
            outputs=[None if t is None else _sampled(t) for _, t in reference.expected],
            tolerance=reference.tolerance,
            eval_mode=True,
        )

    def save(self, path: Path) -> None:
        """Write the record (replacing one there), so that a run killed meanwhile leaves none half written."""
        staged = path.with_suffix(".partial")
        torch.save(
            {
                "losses": self.losses,
                "update": self.update,
                "outputs": self.outputs,
                "tolerance": self.tolerance,
                "eval_mode": self.eval_mode,
            },
            staged,
        )
        staged.replace(path)

    @classmethod
    def load(cls, path: Path, started_from: str) -> RecordedReference:
        data = torch.load(path, weights_only=True)
        return cls(**data, started_from=started_from)

    def check(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        step: StepRunner,
        batches: list[Any],
        prepare: Callable[[Any], Any],
    ) -> float:
        """Run this process's first steps (or its first batch) compiled and compare them with what eager computed;
        returns the seconds to leave out of the compile time (the steps that compiled nothing, and the comparing)."""
        started, compiling = time.perf_counter(), 0.0
        if self.outputs is not None:
            model.eval()
            got = list(tensor_leaves(step(model, optimizer, prepare(batches[0]))))
            if len(got) != len(self.outputs):
                self._fail(f"it returns {len(got)} outputs, eager {len(self.outputs)}")
            for index, (want, tensor) in enumerate(zip(self.outputs, got, strict=True)):
                if want is not None:
                    self._judge(f"output {index}", want, _sampled(tensor), self.tolerance)
            return time.perf_counter() - started
        assert self.losses is not None and optimizer is not None
        model.train(not self.eval_mode)
        torch.manual_seed(CHECK_SEED)  # as the first run's eager steps drew: the same dropout masks
        first, other = batches[0], next((b for b in batches[1:] if same_shapes(b, batches[0])), batches[0])
        accumulation = step.workload.accumulation_steps
        name, before = None, None
        if self.update is not None:
            name = self.update[0]
            before = _sampled(dict(model.named_parameters())[name])
        for index in range(len(self.losses)):
            frames, began = frames_compiled(), time.perf_counter()
            loss = step(model, optimizer, prepare((first, other)[index % 2])).detach().cpu()
            if frames_compiled() != frames:
                compiling += time.perf_counter() - began
            where = f"step {index // accumulation + 1} of {len(self.losses) // accumulation}"
            self._judge(f"{where}: the loss", self.losses[index], loss, self.tolerance)
            if index + 1 == accumulation and self.update is not None and name is not None and before is not None:
                update = _sampled(dict(model.named_parameters())[name]) - before
                self._judge(f"after step 1: the update of {name}", self.update[1], update, 10 * self.tolerance)
                size = float(torch.linalg.vector_norm(self.update[1].double()))
                if size > 0:
                    ratio = float(torch.linalg.vector_norm(update.double())) / size
                    if abs(ratio - 1.0) > UPDATE_SIZE_LIMIT:
                        self._fail(f"after step 1: the update of {name} is {ratio:.3g}x the size of eager's")
        if self.eval_mode:
            return time.perf_counter() - started
        return max(time.perf_counter() - started - compiling, 0.0)

    def _judge(self, what: str, want: torch.Tensor, got: torch.Tensor, tolerance: float) -> None:
        error = compare(want, got, tolerance)
        if error is not None:
            self._fail(f"{what} differs from eager: relative error {error:.3g} > tolerance")

    def _fail(self, what: str) -> NoReturn:
        raise TrialFailure("accuracy", f"{self.started_from}, checked against what eager computed: {what}")
