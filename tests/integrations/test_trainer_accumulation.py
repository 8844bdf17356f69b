"""Gradient accumulation in a Hugging Face Trainer: searched as the Trainer runs it, then applied back.

Its own file, so that its search runs beside test_trainer.py's (the parallel pass hands out whole
files), not after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import math
from pathlib import Path
from unittest import mock

import pytest
import torch

from autotune import cli
from autotune.runtime.tuned import read
from autotune.workload.trainer import trainer_workload
from examples import trainer as example
from tests.integrations.test_trainer import SPACE, TUNED, _train, _write
from tests.short_runs import SHORT_FLAGS

ACCUMULATING = "examples.trainer:accumulating_trainer"


# Beside other tests: nothing here rests on a figure.
@pytest.mark.slow
@pytest.mark.parallel
def test_an_accumulating_trainer_is_searched_and_applied_with_a_compiled_step_and_an_eager_stance(
    tmp_path: Path,
) -> None:
    workload = trainer_workload(example.accumulating_trainer())
    assert workload.accumulation_steps == example.ACCUMULATION and workload.num_batches % example.ACCUMULATION == 0
    out = tmp_path / "search"
    progress = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(progress):
        code = cli.main(
            [
                "search", "--no-doctor", "--model", ACCUMULATING, "--space", SPACE, "--trials", "1", "--confirm", "1",
                "--replicates", "1", "--max-replicates", "1", "--windows", "3", *SHORT_FLAGS, "--device", "cpu",
                "--out", str(out), "--no-compile-cache", "--pruner", "none", "--slow-ratio", "0",
            ]
        )  # fmt: skip
    assert code == 0, progress.getvalue()[-3000:]
    assert read(out / "best.yaml").workload.accumulation_steps == example.ACCUMULATION
    # Applied to a Trainer that steps its optimizer every 4 batches: the compiled step runs only on those, and
    # the eager stance begins after 8 optimizer steps (32 batches); the losses are eager's.
    staged = dataclasses.replace(TUNED, knobs={**TUNED.knobs, "stance_after_warmup": "eager_on_recompile"})
    best = _write(tmp_path / "best.yaml", staged, accumulation_steps=example.ACCUMULATION)
    accumulate = {"gradient_accumulation_steps": example.ACCUMULATION}
    _, eager = _train(tmp_path / "eager", None, 12, **accumulate)
    stances: list[str] = []
    set_stance = torch.compiler.set_stance

    @functools.wraps(set_stance)  # its documented stances are what tells that this torch has the setting
    def recorded(stance: str = "default", **kwargs: object) -> object:
        stances.append(stance)
        return set_stance(stance, **kwargs)  # type: ignore[arg-type]

    try:  # the stance is process-wide: the steps after the warm-up really run under it
        with mock.patch.object(torch.compiler, "set_stance", recorded):
            trainer, tuned = _train(tmp_path / "tuned", best, 12, **accumulate)
    finally:
        set_stance("default")
    assert len(tuned) == len(eager) == 12 and all(math.isfinite(x) for x in tuned)
    assert max(abs(a - b) for a, b in zip(tuned, eager, strict=True)) < 1e-3, (tuned, eager)
    assert trainer.optimizer.optimizer.step.__name__ == "step", "the optimizer step was compiled"
    assert stances == ["eager_on_recompile"], "finish_warmup ran once, after the warm-up's optimizer steps"
