"""A PyTorch Lightning target: the Workload `trainer.fit(module, datamodule)` would run, and what is refused.

The Trainer, module and datamodule are examples.lightning's: a 2-block language model on generated
sequences whose lengths vary, padded per batch by the datamodule's collate function.
"""

from __future__ import annotations

import math
import sys

import lightning as L
import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

from autotune import resolve
from autotune.errors import WorkloadError
from autotune.workload.lightning import BATCH_INDEX, is_lightning_target, lightning_workload, target_workload
from autotune.workload.steps import StepRunner
from examples import lightning as example
from tests.targets.lightning_modules import NoLoader, Regression

pytestmark = pytest.mark.parallel

SPEC = "examples.lightning:trainer"
TARGETS = "tests.targets.lightning_modules"


def _parameter_ids(optimizer: torch.optim.Optimizer) -> set[int]:
    return {id(p) for group in optimizer.param_groups for p in group["params"]}


def test_the_workload_is_the_one_fit_would_run(capsys) -> None:
    workload = resolve(SPEC)
    said = capsys.readouterr().err
    assert "Lightning Trainer: precision '32-true' (no autocast), 1 batch per optimizer step" in said
    assert "inferred from the train_dataloader: input_ids: axis 1 varies, padded with 0" in said
    module = workload.model
    assert isinstance(module, example.CountingLM) and module.training and module._trainer is None
    assert workload.task == "train" and workload.autocast is None
    assert workload.accumulation_steps == 1 and workload.num_batches == 8
    assert workload.dynamic_dims == {"input_ids": (1,), "attention_mask": (1,), "labels": (1,)}
    assert workload.pad_values == {"input_ids": 0, "attention_mask": 0, "labels": -100}
    drawn = workload.draw_batches()
    assert len({b["input_ids"].shape[1] for b in drawn}) > 1 and all(b["input_ids"].shape[0] == 8 for b in drawn)
    assert [b["input_ids"].shape for b in drawn] == [b["input_ids"].shape for b in workload.draw_batches()]
    # configure_optimizers' AdamW, on the module's parameters, at its configured rate: its warm-up
    # scheduler set the first rate to a fifth of it and is not stepped while measuring.
    optimizer = workload.optimizer(module.parameters())
    assert type(optimizer) is torch.optim.AdamW
    assert optimizer.param_groups[0]["lr"] == module.lr and optimizer.param_groups[0]["weight_decay"] == 0.01
    assert _parameter_ids(optimizer) == {id(p) for p in module.parameters()}
    # The loss is what training_step returns.
    batch = drawn[0]
    with torch.no_grad():
        ours = workload.compute_loss(workload.run_forward(module, batch), batch)
        theirs = module.training_step(batch, 0)
    assert torch.allclose(ours, theirs)


def test_overrides_replace_what_is_inferred() -> None:
    trainer, module, data = example.trainer()
    chosen = lightning_workload(
        module, trainer=trainer, datamodule=data, dynamic_dims={"input_ids": [1]}, pad_values={"input_ids": 7}
    )
    assert chosen.dynamic_dims == {"input_ids": (1,)} and chosen.pad_values == {"input_ids": 7}


def _with_precision(precision: str) -> tuple:
    trainer, module, data = example.trainer()
    # Lightning turns '16-mixed' into 'bf16-mixed' on a CPU Trainer: set the plugin's value as a GPU Trainer has it.
    trainer.strategy.precision_plugin.precision = precision
    return trainer, module, data


@pytest.mark.parametrize(
    ("build", "dtype"),
    [
        (lambda: example.trainer(precision="32"), None),
        (lambda: example.trainer(precision="bf16-mixed"), torch.bfloat16),
        (lambda: _with_precision("16-mixed"), torch.float16),
    ],
)
def test_the_trainer_precision_chooses_autocast(build, dtype) -> None:
    assert target_workload(build()).autocast == dtype


@pytest.mark.parametrize(
    ("build", "value"),
    [
        (lambda: example.trainer(precision="bf16-true"), "'bf16-true'"),
        (lambda: example.trainer(precision="64-true"), "'64-true'"),
        (lambda: _with_precision("transformer-engine"), "'transformer-engine'"),
    ],
)
def test_a_precision_that_changes_the_weights_is_refused(build, value) -> None:
    with pytest.raises(WorkloadError) as caught:
        target_workload(build())
    message = str(caught.value)
    assert f"Trainer.precision: {value} is not one autotune measures" in message
    assert "allowed: ['32-true', '32', 'bf16-mixed', '16-mixed']" in message


def test_accumulated_batches_make_one_measured_optimizer_step() -> None:
    workload = target_workload(example.trainer(accumulate_grad_batches=3))
    assert workload.accumulation_steps == 3 and workload.num_batches == 9
    trainer, module, data = example.trainer(accumulate_grad_batches=3)
    assert lightning_workload(module, trainer=trainer, datamodule=data, num_batches=4).num_batches == 6


def test_steps_run_as_fit_runs_them_and_the_module_call_is_what_compiles() -> None:
    workload = target_workload(example.trainer(accumulate_grad_batches=2))
    model = workload.model
    optimizer = workload.optimizer(model.parameters())
    step = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)
    before = model.head[1].weight.detach().clone()
    batches = workload.draw_batches()
    losses = [float(step(model, optimizer, batches[0]))]
    assert torch.equal(model.head[1].weight, before), "no optimizer step after the first of two micro-batches"
    losses += [float(step(model, optimizer, b)) for b in batches[1:4]]
    assert not torch.equal(model.head[1].weight, before) and all(math.isfinite(x) for x in losses)
    # training_step calls the module, so compiling the module in place compiles the step's forward.
    torch._dynamo.reset()
    counters.clear()
    try:
        model.compile(backend="eager")
        step(model, optimizer, batches[4])
        assert counters["stats"]["unique_graphs"] >= 1
    finally:
        torch._dynamo.reset()


def test_a_module_with_its_own_loader_is_a_target(capsys) -> None:
    workload = resolve(f"{TARGETS}:regression")
    assert "batches are list, not dicts: lengths that vary are not inferred" in capsys.readouterr().err
    assert workload.dynamic_dims == {} and workload.autocast is None and workload.accumulation_steps == 1
    module = workload.model
    optimizer = workload.optimizer(module.parameters())
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["momentum"] == 0.9
    step = StepRunner(workload, torch.device("cpu"), cuda_graphs=False)
    losses = [float(step(module, optimizer, b)) for b in workload.draw_batches()]
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert set(module.batch_indices) == {BATCH_INDEX}


def _scheduled(module: nn.Module) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.0)


@pytest.mark.parametrize(
    "configure",
    [
        lambda m: _scheduled(m)[0],
        lambda m: [_scheduled(m)[0]],
        lambda m: (_scheduled(m)[0],),
        lambda m: {"optimizer": _scheduled(m)[0]},
        lambda m: dict(zip(("optimizer", "lr_scheduler"), _scheduled(m), strict=True)),
        lambda m: ([(pair := _scheduled(m))[0]], [pair[1]]),
        lambda m: [
            {"optimizer": (pair := _scheduled(m))[0], "lr_scheduler": {"scheduler": pair[1], "interval": "step"}}
        ],
    ],
    ids=["optimizer", "list", "tuple", "dict", "dict-with-scheduler", "lists", "list-of-dicts"],
)
def test_every_form_configure_optimizers_may_return_gives_its_optimizer(configure) -> None:
    module = Regression(configure)
    workload = lightning_workload(module)
    optimizer = workload.optimizer(module.parameters())
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["momentum"] == 0.9
    # A scheduler that set the rate to 0 does not leave the measured steps at 0.
    assert optimizer.param_groups[0]["lr"] == 0.1
    assert _parameter_ids(optimizer) == {id(p) for p in module.parameters()}


def test_the_optimizer_is_built_for_the_parameters_handed_over() -> None:
    # Only the trainable parameters: the optimizer as configured.
    frozen = Regression(lambda m: torch.optim.SGD([m.layer.weight], lr=0.1))
    frozen.layer.bias.requires_grad_(False)
    optimizer = lightning_workload(frozen).optimizer(frozen.parameters())
    assert _parameter_ids(optimizer) == {id(frozen.layer.weight)}
    # Parameters that configure_optimizers did not see: a new optimizer of its class and settings on them.
    module, other = Regression(), nn.Linear(4, 1)
    optimizer = lightning_workload(module).optimizer(other.parameters())
    assert type(optimizer) is torch.optim.SGD and optimizer.defaults["momentum"] == 0.9
    assert _parameter_ids(optimizer) == {id(p) for p in other.parameters()}


def _compiled_submodule() -> Regression:
    module = Regression()
    module.layer = torch.compile(module.layer)  # type: ignore[assignment]
    return module


def _compiled_in_place() -> Regression:
    module = Regression()
    module.compile()
    return module


def _manual() -> Regression:
    module = Regression()
    module.automatic_optimization = False
    return module


class _NoData(L.LightningDataModule):
    pass


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: torch.compile(Regression()), "the module is torch.compile(Regression)"),
        (_compiled_in_place, "the module (Regression) is already compiled"),
        (_compiled_submodule, "its submodule 'layer' (Linear) is already compiled"),
        (_manual, "Regression.automatic_optimization is False: with manual optimisation"),
        (
            lambda: Regression(lambda m: [torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.Adam(m.parameters())]),
            "configure_optimizers returned 2 optimizers (SGD, Adam)",
        ),
        (lambda: Regression(lambda m: None), "configure_optimizers returned NoneType, which holds no optimizer"),
        (NoLoader, "NoLoader: it defines no train_dataloader and no datamodule came with it"),
        (lambda: (example.trainer()[0], NoLoader(), _NoData()), "_NoData: the datamodule defines no train_dataloader"),
        (lambda: example.trainer(devices=2), "Trainer: it runs on 2 devices (DDPStrategy)"),
        (lambda: example.trainer(strategy="ddp"), "Trainer.strategy: DDPStrategy is not a single-device strategy"),
        (lambda: (example.trainer()[0],), "a tuple of (Trainer); expected (trainer, module) or"),
        (lambda: example.trainer() + (None,), "a tuple of (Trainer, LightningModule CountingLM, "),
        (lambda: example.trainer()[:2] + ("data",), "a tuple of (Trainer, LightningModule CountingLM, str)"),
    ],
    ids=[
        "torch.compile",
        "compiled-in-place",
        "compiled-submodule",
        "manual-optimisation",
        "two-optimizers",
        "no-optimizer",
        "no-loader",
        "datamodule-without-loader",
        "two-devices",
        "ddp-strategy",
        "trainer-alone",
        "four-items",
        "not-a-datamodule",
    ],
)
def test_what_cannot_be_measured_is_refused_by_name(build, expected) -> None:
    target = build()
    assert is_lightning_target(target)
    with pytest.raises(WorkloadError) as caught:
        target_workload(target)
    assert expected in str(caught.value)


def test_a_tuple_in_the_wrong_order_is_refused_through_resolve() -> None:
    with pytest.raises(WorkloadError, match=r"a tuple of \(LightningModule Regression, Trainer\); expected"):
        resolve(f"{TARGETS}:swapped")


@pytest.mark.parametrize(
    ("returns", "expected"),
    [
        (lambda loss: None, "training_step returned None: Lightning skips such a batch"),
        (lambda loss: {"mse": loss}, "training_step returned a dict without a 'loss' tensor (keys ['mse'])"),
    ],
)
def test_a_step_without_a_loss_fails_when_the_loss_is_computed(returns, expected) -> None:
    workload = lightning_workload(Regression(step_returns=returns))
    batch = workload.draw_batches()[0]
    with pytest.raises(WorkloadError) as caught:
        workload.compute_loss(workload.run_forward(workload.model, batch), batch)
    assert expected in str(caught.value)


def test_a_dict_with_the_loss_gives_its_loss() -> None:
    workload = lightning_workload(Regression(step_returns=lambda loss: {"loss": loss, "other": 1}))
    batch = workload.draw_batches()[0]
    assert workload.compute_loss(workload.run_forward(workload.model, batch), batch).dim() == 0


def test_two_train_loaders_are_refused(monkeypatch) -> None:
    module = Regression()
    loader = module.train_dataloader()
    monkeypatch.setattr(module, "train_dataloader", lambda: {"a": loader, "b": loader})
    with pytest.raises(WorkloadError, match=r"Regression.train_dataloader returned 2 loaders in a dict"):
        lightning_workload(module)


def test_a_dataloader_in_the_datamodule_place_is_used_as_fit_uses_it() -> None:
    trainer, _, _ = example.trainer()
    loader = Regression().train_dataloader()
    workload = target_workload((trainer, NoLoader(), loader))
    assert len(workload.draw_batches()) == 8


def test_pytorch_lightning_objects_are_targets_too() -> None:
    import pytorch_lightning as pl  # installed with lightning 2.x, which the lightning extra brings: never skipped

    class Older(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, precision="bf16-mixed")
    target = (trainer, Older(), Regression().train_dataloader())
    assert is_lightning_target(target)
    assert target_workload(target).autocast == torch.bfloat16


def test_nothing_is_a_lightning_target_while_lightning_is_not_loaded(monkeypatch) -> None:
    module = Regression()
    for name in ("lightning.pytorch", "pytorch_lightning"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert not is_lightning_target(module)
