"""A kind of step added in one module, beside its workload, and searched end to end."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autotune import load, resolve
from autotune.errors import WorkloadError
from autotune.workload.steps import step_kinds, step_of

pytestmark = pytest.mark.parallel  # asserts what the search wrote, never how fast

ROOT = Path(__file__).resolve().parents[2]
SPEC = "tests.trial_targets.closure_step:workload"
FAST = str(ROOT / "tests" / "search_spaces" / "fast.yaml")


def test_a_kind_registered_beside_its_workload_is_the_one_that_runs_it() -> None:
    from tests.trial_targets.closure_step import ClosureStep

    workload = resolve(SPEC)
    assert type(step_of(workload)) is ClosureStep
    assert step_kinds()[0] is ClosureStep, "a kind of the default priority is asked before the built-in ones"
    with pytest.raises(TypeError, match="closure"):
        # autotune's own training step, which L-BFGS refuses: what the registered kind is for.
        from autotune.workload.steps import StepRunner
        from autotune.workload.steps.train import TrainStep

        runner = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)
        runner.kind = TrainStep(workload)
        model, (optimizer, runner.extras) = workload.model, workload.build_optimizer(workload.model)
        runner(model, optimizer, workload.draw_batches(seed=0)[0])


def test_no_kind_serving_a_workload_is_an_error_naming_the_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.workload.steps import _kinds

    monkeypatch.setattr(_kinds, "_KINDS", {})
    with pytest.raises(WorkloadError, match="no kind of step serves this workload"):
        step_of(resolve("tests.trial_targets.workloads:tiny_infer"))


@pytest.mark.slow  # a whole search: half a minute of the fast tier's ten; the kind's own rules run above
def test_a_search_of_a_workload_with_its_own_kind_of_step_checks_measures_and_exports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune",
            "search",
            "--model",
            SPEC,
            "--space",
            FAST,
            "--trials",
            "2",
            "--confirm",
            "1",
            "--replicates",
            "2",
            "--max-replicates",
            "2",
            "--sampler",
            "random",
            "--seed",
            "1",
            "--windows",
            "2",
            "--window-seconds",
            "0.1",
            "--device",
            "cpu",
            "--no-compile-cache",
            "--no-doctor",
            "--pruner",
            "none",
            "--slow-ratio",
            "0",
            "--out",
            str(out),
        ],  # fmt: skip
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert load(out / "best.yaml") is not None
    with (out / "trials.csv").open() as rows:
        trials = list(csv.DictReader(rows))
    assert [row["state"] for row in trials] == ["COMPLETE", "COMPLETE"], "each checked against eager and measured"
    assert all(float(row["samples_per_second"]) > 0 for row in trials)
