"""The kinds of step, one module each: which one a workload runs, and what each does with a batch."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
import torch

from autotune.workload import Workload
from autotune.workload.steps import StepState, step_of
from autotune.workload.steps.infer import InferStep
from autotune.workload.steps.own import OwnStep
from autotune.workload.steps.train import TrainStep

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]


def _workload(**kwargs: object) -> Workload:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    batches = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(4)]
    defaults: dict[str, object] = {"model": model, "batches": batches, "num_batches": 4}
    return Workload(**{**defaults, **kwargs})  # type: ignore[arg-type]


def _loss(output: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.mse_loss(output, batch[1])


def _state() -> StepState:
    return StepState(autocast=contextlib.nullcontext())


def test_the_workload_says_which_kind_of_step_it_runs() -> None:
    assert type(step_of(_workload(task="infer"))) is InferStep
    train = _workload(task="train", optimizer=lambda p: torch.optim.SGD(p, lr=0.1), loss=_loss)
    assert type(step_of(train)) is TrainStep
    own = _workload(task="train", optimizer=lambda p: torch.optim.SGD(p, lr=0.1), step=lambda m, o, b: 1.0)
    assert type(step_of(own)) is OwnStep
    assert [(k.trains, k.checks) for k in (InferStep, TrainStep, OwnStep)] == [
        (False, "output"),
        (True, "loss"),
        (True, "loss"),
    ]


def test_inference_runs_without_gradients_and_returns_copies() -> None:
    workload = _workload(task="infer", forward=lambda model, batch: model(batch[0]))
    (out,) = step_of(workload).run(_state(), workload.model, None, workload.draw_batches(seed=0)[0])
    assert not out.requires_grad and out.shape == (2, 1)


def test_training_steps_the_optimizer_once_every_accumulation_steps_micro_batches() -> None:
    workload = _workload(
        task="train",
        optimizer=lambda p: torch.optim.SGD(p, lr=0.1),
        forward=lambda model, batch: model(batch[0]),
        loss=_loss,
        accumulation_steps=2,
        num_batches=4,
    )
    step, state, model = step_of(workload), _state(), workload.model
    optimizer, _ = workload.build_optimizer(model)
    batches = workload.draw_batches(seed=0)
    before = model.weight.detach().clone()
    step.run(state, model, optimizer, batches[0])
    assert torch.equal(model.weight, before) and model.weight.grad is not None, "half a cycle: gradients only"
    loss = step.run(state, model, optimizer, batches[1])
    assert not torch.equal(model.weight, before) and model.weight.grad is None, "a whole cycle: one step"
    assert state.micro_batches == 2 and loss.numel() == 1 and not loss.requires_grad


def test_the_user_s_own_step_runs_as_it_is_with_the_optimizer() -> None:
    calls: list[object] = []

    def own(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: object) -> float:
        calls.append(optimizer)
        return 0.25

    workload = _workload(task="train", optimizer=lambda p: torch.optim.SGD(p, lr=0.1), step=own)
    optimizer, extras = workload.build_optimizer(workload.model)
    state = _state()
    state.extras = extras
    assert float(step_of(workload).run(state, workload.model, optimizer, workload.draw_batches(seed=0)[0])) == 0.25
    assert calls == [optimizer]


def test_the_task_s_words_appear_only_where_a_task_is_read_from_the_user() -> None:
    """Outside the validation of a task and the builders of workloads from the user's own objects, the package
    asks the step or `trains`, never the task's name."""
    allowed = {
        "autotune/runtime/summary.py",  # best.yaml's task, validated
        "autotune/workload/contract.py",  # Workload.task, validated
        "autotune/cli/_common.py",  # --task
        "autotune/workload/module.py",  # a bare module: an inference workload
        "autotune/workload/hf.py",  # a transformers model: its head says which
        "autotune/workload/trainer.py",  # a Trainer trains
        "autotune/workload/lightning.py",  # a Lightning module trains
        "autotune/study/explain/_repro.py",  # repro.py reads the user's workload with torch alone, no autotune
    }
    found = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "autotune").rglob("*.py")
        if re.search(r"""["'](train|infer)["']""", path.read_text())
    }
    assert found <= allowed, sorted(found - allowed)
