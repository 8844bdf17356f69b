"""The Lightning example end to end: searched as `trainer.fit`'s arguments, then trained with the export applied.

`autotune search --model examples.lightning:trainer` derives the workload from the Trainer, module
and datamodule; `AutotuneCallback` puts the exported configuration back into a new fit, which must
train to the loss an uncompiled fit reaches.
"""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import lightning as L
import pytest

from autotune import cli
from autotune.integrations.lightning import AutotuneCallback
from autotune.runtime.tuned import read
from examples import lightning as example
from tests.short_runs import SHORT_FLAGS

SPEC = "examples.lightning:trainer"
STEPS = 12


class Losses(L.Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"]))


def fit(*callbacks: L.Callback, **options: object) -> tuple[L.Trainer, list[float]]:
    losses = Losses()
    trainer, module, data = example.trainer(max_steps=STEPS, callbacks=[*callbacks, losses], **options)
    trainer.fit(module, data)
    return trainer, losses.losses


# Beside other tests: nothing here rests on a figure (no pruner, no slow-ratio rule, either export accepted).
@pytest.mark.slow
@pytest.mark.parallel
def test_the_lightning_example_is_searched_and_its_export_trains_as_eager_does(tmp_path: Path) -> None:
    out = tmp_path / "search"
    progress = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(progress):
        code = cli.main(
            [
                "search", "--no-doctor", "--model", SPEC, "--trials", "1", "--confirm", "1", "--replicates", "1",
                "--max-replicates", "1", "--windows", "3", *SHORT_FLAGS, "--device", "cpu", "--out", str(out),
                "--no-compile-cache", "--pruner", "none", "--slow-ratio", "0",
            ]
        )  # fmt: skip
    assert code == 0, progress.getvalue()[-3000:]
    assert "inferred from the train_dataloader: input_ids: axis 1 varies" in progress.getvalue()
    searched = read(out / "best.yaml")
    assert searched.workload.spec == SPEC and searched.workload.model_class == "CountingLM"
    assert searched.workload.task == "train" and searched.study["trials"]["total"] == 1
    # Whatever was exported (the trial, plain compile or no compilation) trains a new fit to eager's losses.
    _, eager = fit()
    trainer, tuned = fit(AutotuneCallback(out / "best.yaml"))
    assert len(tuned) == len(eager) == STEPS and all(math.isfinite(x) for x in tuned)
    assert max(abs(a - b) for a, b in zip(tuned, eager, strict=True)) < 1e-3, (tuned, eager)
    # The module is compiled in place exactly when the export compiles the whole of it.
    compiled = getattr(trainer.lightning_module, "_compiled_call_impl", None) is not None
    assert compiled == (searched.config.scope == "whole"), searched.config.describe()
