"""A workload that carries the user's own training step (and setup): what it accepts, refuses and runs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autotune import CompileConfig, Workload
from autotune.errors import WorkloadError
from autotune.runtime.device import parse_device
from autotune.study.search import adapt, load_space
from autotune.trial.runner import TrialRequest, run_trial
from tests.short_runs import run_config, source_for
from tests.trial_targets import workloads


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor) -> torch.Tensor:
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.detach()


def _own(**given) -> Workload:
    given.setdefault("optimizer", lambda params: torch.optim.SGD(params, lr=0.1))
    return Workload(model=workloads.TinyMLP(bias=False), batches=workloads._batches, step=_step, **given)


@pytest.mark.parallel  # times nothing
@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"task": "infer"}, "Workload.step: your own training step needs task='train', not 'infer'"),
        ({"loss": lambda output, batch: output.sum()}, "Workload.loss: your own step computes the loss itself"),
        ({"forward": lambda model, batch: model(batch)}, "Workload.forward: your own step computes the loss itself"),
        ({"accumulation_steps": 2}, "Workload.accumulation_steps: 2 applies to the step autotune runs"),
        ({"setup": lambda model: None}, "Workload.optimizer and Workload.setup both build the optimizer"),
        ({"optimizer": None}, "Workload.optimizer: a train workload needs an optimizer factory"),
    ],
)
def test_a_step_with_what_it_replaces_or_without_an_optimizer_is_refused_by_name(given: dict, said: str) -> None:
    with pytest.raises(WorkloadError, match=said.replace("(", r"\(").replace(")", r"\)")):
        _own(**given)


@pytest.mark.parallel  # times nothing
def test_a_setup_without_a_step_is_refused() -> None:
    with pytest.raises(WorkloadError, match="Workload.setup: it builds what your own step uses, and no step is given"):
        Workload(model=workloads.TinyMLP(), batches=workloads._batches, setup=lambda model: None)


@pytest.mark.parallel  # times nothing
def test_setup_extras_reach_the_step_and_its_loss_comes_back_detached() -> None:
    seen = []

    def step(model, optimizer, batch, extras):
        seen.append(extras)
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    def setup(model):
        return torch.optim.SGD(model.parameters(), lr=0.1), {"schedule": "cosine"}

    workload = Workload(model=workloads.TinyMLP(bias=False), batches=workloads._batches, step=step, setup=setup)
    optimizer, extras = workload.build_optimizer(workload.model)
    loss = workload.run_step(workload.model, optimizer, workload.draw_batches()[0], extras)
    assert seen == [{"schedule": "cosine"}]
    assert loss.numel() == 1 and not loss.requires_grad
    assert workload.summary("x:y", workload.draw_batches()).own_step


@pytest.mark.parallel  # times nothing
@pytest.mark.parametrize(
    ("returned", "said"),
    [
        (None, "Workload.step returned None; it must return the step's loss"),
        (torch.ones(3), r"Workload.step returned a tensor of shape \(3,\)"),
    ],
)
def test_a_step_that_returns_no_loss_is_named(returned: object, said: str) -> None:
    workload = Workload(
        model=workloads.TinyMLP(bias=False),
        batches=workloads._batches,
        step=lambda model, optimizer, batch: returned,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
    )
    optimizer, extras = workload.build_optimizer(workload.model)
    with pytest.raises(WorkloadError, match=said):
        workload.run_step(workload.model, optimizer, workload.draw_batches()[0], extras)


@pytest.mark.parallel  # times nothing
def test_a_setup_that_returns_no_optimizer_is_named() -> None:
    workload = Workload(
        model=workloads.TinyMLP(bias=False), batches=workloads._batches, step=_step, setup=lambda model: "sgd"
    )
    with pytest.raises(WorkloadError, match="Workload.setup returned 'sgd'; it must return the optimizer"):
        workload.build_optimizer(workload.model)


@pytest.mark.parallel  # times nothing
def test_compiled_autograd_is_not_searched_for_a_step_that_calls_backward_itself() -> None:
    workload = workloads.own_step_train()
    summary = workload.summary("tests:own", workload.draw_batches())
    space = adapt(load_space("thorough"), summary, str(parse_device("cpu")))
    assert space.knobs.get("compiled_autograd", (False,)) == (False,)
    assert any(
        d.startswith("compiled_autograd [True]: compiled autograd runs where autotune calls") for d in space.dropped
    )
    assert space.compile_optimizer == (False, True), "the optimizer step is still searched"


@pytest.mark.parallel  # waits on no clock
def test_the_users_own_step_runs_compiled_and_passes_the_whole_step_check() -> None:
    # Clipping, a warm-up schedule stepped every step and AdamW over two groups with a tensor learning rate:
    # two whole steps of the user's own code, compiled model and optimizer step, against the same steps eagerly.
    spec = "tests.trial_targets.dynamo_only:own_step_train"
    config = CompileConfig(compile_optimizer=True)
    run = run_trial(TrialRequest(spec=spec, source=source_for(spec, config), timeout=300)).record()
    assert run.state == "complete", run.message + run.stderr_tail


@pytest.mark.parallel  # waits on no clock
def test_the_users_own_step_with_a_compiled_optimizer_that_goes_its_own_way_fails_by_name() -> None:
    spec = "tests.trial_targets.dynamo_only:own_step_ignores_its_learning_rate_when_compiled"
    config = CompileConfig(compile_optimizer=True)
    run = run_trial(TrialRequest(spec=spec, source=source_for(spec, config), timeout=300)).record()
    assert (run.state, run.reason) == ("failed", "accuracy"), run.message + run.stderr_tail
    assert "after step 1 of 2: the update of body.0.weight differs from eager" in run.message, run.message


@pytest.mark.parallel  # waits on no clock
def test_a_float_learning_rate_that_compiles_the_step_once_more_is_searched_and_noted() -> None:
    # A schedule that sets a Python float every step: the compiled optimizer step compiles again when the rate first
    # changes and reads every later value (what dynamo does on this release). Counted, not assumed.
    spec = "tests.trial_targets.dynamo_only:own_step_float_schedule"
    compiled = run_config(spec, CompileConfig(compile_optimizer=True))
    assert compiled.state == "complete", compiled.message + compiled.stderr_tail
    assert compiled.notes == [
        "one recompile of the step when the learning rate first changed; none in the 6 steps after"
    ]


@pytest.mark.parallel  # waits on no clock
def test_a_float_setting_that_compiles_the_step_at_every_new_value_is_refused_with_the_count() -> None:
    spec = "tests.trial_targets.dynamo_only:own_step_rising_schedule"
    compiled = run_config(spec, CompileConfig(compile_optimizer=True))
    assert (compiled.state, compiled.reason) == ("failed", "invalid_config"), compiled.message + compiled.stderr_tail
    assert "changes the learning rate as Python floats" in compiled.message, compiled.message
    assert "compiled again at every new value, 7 recompile(s) over 7 steps after the first" in compiled.message
    # The same step with the optimizer step left alone compiles nothing per value: it is searched.
    plain = run_config(spec)
    assert plain.state == "complete", plain.message + plain.stderr_tail
    assert plain.notes == []


@pytest.mark.slow  # Inductor compiles the optimizer step at every value of the schedule's betas
@pytest.mark.parallel  # waits on no clock
def test_one_cycle_betas_that_inductor_compiles_again_at_every_value_refuse_the_compiled_step_with_the_count() -> None:
    # OneCycleLR sets AdamW's first beta as a Python float every step; Inductor specialises on it, so each new value
    # compiles the step again (counted here on the running release, as the search counts it).
    spec = "tests.trial_targets.workloads:own_step_one_cycle"
    compiled = run_config(spec, CompileConfig(compile_optimizer=True), timeout=900)
    assert (compiled.state, compiled.reason) == ("failed", "invalid_config"), compiled.message + compiled.stderr_tail
    assert "changes betas as Python floats" in compiled.message, compiled.message
    assert "compiled again at every new value, 7 recompile(s) over 7 steps after the first" in compiled.message
