"""Generated code applied to the toy workload with real Inductor compiles on the CPU (padding alone compiles nothing).

Each compile costs tens of seconds here, so a few representative configurations run two
training steps each on the same two batches, and every check is made on those runs:
results match eager, state_dict keys are unchanged, batches are padded and marked as
configured, and exactly the intended submodules are compiled.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

import autotune
from autotune import CompileConfig, ModuleSettings
from autotune.runtime import codegen
from autotune.runtime.summary import WorkloadSummary
from autotune.workload import Workload
from examples.toy import VOCAB
from tests.best_yaml import write_best

pytestmark = pytest.mark.parallel  # times nothing
INDUCTOR = pytest.mark.slow  # compiles the toy with Inductor: tens of seconds

MARKS = (("attention_mask", 1), ("input_ids", 1), ("labels", 1))
BLOCKS = ["encoder.blocks.0", "encoder.blocks.1", "encoder.blocks.2"]


def toy_batch(lengths: list[int], seed: int) -> dict[str, torch.Tensor]:
    """A batch as the toy's collator makes it: padded to its longest row, labels -100 past each row."""
    generator = torch.Generator().manual_seed(seed)
    longest = max(lengths)
    mask = (torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]).long()
    input_ids = torch.randint(1, VOCAB, (len(lengths), longest), generator=generator) * mask
    return {"input_ids": input_ids, "attention_mask": mask, "labels": input_ids.masked_fill(mask == 0, -100)}


# Longest rows 21 and 19: both pad to 24 under alignment 8, so each configuration compiles once.
BATCHES = [toy_batch([21, 9, 15, 4], seed=0), toy_batch([19, 19, 3, 11], seed=1)]


@dataclass
class Run:
    model: nn.Module
    optimizer: torch.optim.Optimizer | None
    losses: list[torch.Tensor]
    outputs: list[torch.Tensor]
    prepared: list[Any]
    graphs: int


def train(
    toy: Workload,
    apply: Callable | None = None,
    prepare: Callable = lambda b: b,
    backward: Callable = torch.Tensor.backward,
) -> Run:
    """Two training steps from the toy's initial weights, optionally compiled by generated code."""
    model = copy.deepcopy(toy.model)
    optimizer = toy.optimizer(model.parameters())  # type: ignore[misc]
    if apply is not None:
        model, optimizer = apply(model, optimizer)
    graphs = counters["stats"]["unique_graphs"]
    losses, outputs, prepared = [], [], []
    for batch in BATCHES:
        batch = prepare(batch)
        output = toy.run_forward(model, batch)
        loss = toy.compute_loss(output, batch)
        backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
        outputs.append(output.logits.detach())
        prepared.append(batch)
    return Run(model, optimizer, losses, outputs, prepared, counters["stats"]["unique_graphs"] - graphs)


def infer(
    toy: Workload, apply: Callable | None = None, prepare: Callable = lambda b: b, batches: list | None = None
) -> Run:
    model = copy.deepcopy(toy.model).eval()
    if apply is not None:
        model, _ = apply(model, None)
    graphs = counters["stats"]["unique_graphs"]
    losses, outputs, prepared = [], [], []
    with torch.no_grad():
        for batch in BATCHES if batches is None else batches:
            batch = prepare(batch)
            output = toy.run_forward(model, batch)
            losses.append(output.loss)
            outputs.append(output.logits)
            prepared.append(batch)
    return Run(model, None, losses, outputs, prepared, counters["stats"]["unique_graphs"] - graphs)


def compiled_modules(model: nn.Module) -> list[str]:
    """Modules compiled in place: by Module.compile(), or (torch's own modules) through their forward."""
    return [name for name, m in model.named_modules() if m._compiled_call_impl is not None or "forward" in vars(m)]


def assert_matches_eager(run: Run, eager: Run) -> None:
    torch.testing.assert_close(torch.stack(run.losses), torch.stack(eager.losses), rtol=1e-4, atol=1e-4)
    for out, ref in zip(run.outputs, eager.outputs, strict=True):
        # Positions past a row's own length are padding: causal attention keeps them from the rest.
        torch.testing.assert_close(out[:, : ref.shape[1]], ref, rtol=1e-3, atol=1e-3)
    assert list(run.model.state_dict()) == list(eager.model.state_dict())
    for (name, value), ref in zip(run.model.state_dict().items(), eager.model.state_dict().values(), strict=True):
        torch.testing.assert_close(value, ref, rtol=1e-3, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


@pytest.fixture(scope="module", autouse=True)
def fresh_compiler(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A cold Inductor cache, so every configuration is really compiled, and no dynamo state between tests."""
    patch = pytest.MonkeyPatch()
    patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("inductor")))
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    patch.undo()


@pytest.fixture(scope="module")
def eager_train(toy: Workload) -> Run:
    return train(toy)


@pytest.fixture(scope="module")
def eager_infer(toy: Workload) -> Run:
    return infer(toy)


def generated(config: CompileConfig, summary: WorkloadSummary) -> Any:
    return codegen.load_module(codegen.generate(config, summary, created="2026-01-01T00:00:00Z", version="test"))


@pytest.mark.parametrize("padding", [8, "pow2", "max"])
def test_padding_leaves_the_loss_unchanged(toy: Workload, toy_summary: WorkloadSummary, padding: object) -> None:
    """The toy is causal and pads labels with -100, so padded batches give the eager loss exactly."""
    module = generated(CompileConfig(padding_alignment=padding), toy_summary)
    model = toy.model
    with torch.no_grad():
        for batch in BATCHES:
            padded = module.prepare_batch(batch)
            assert padded["input_ids"].shape[1] > batch["input_ids"].shape[1]
            torch.testing.assert_close(model(**padded).loss, model(**batch).loss)


@INDUCTOR
def test_whole_model_from_best_yaml(
    toy: Workload, toy_summary: WorkloadSummary, eager_train: Run, tmp_path: Path
) -> None:
    """Write best.yaml, load it back with safe_load and validation, apply it, train: same as eager."""
    config = CompileConfig(padding_alignment=8, mark_dynamic=MARKS)
    written = write_best(tmp_path / "best.yaml", toy_summary, config, created="2026-01-01T00:00:00Z")
    tuned = autotune.load(written)
    assert tuned.config == config

    run = train(toy, tuned.apply, tuned.prepare_batch)

    assert_matches_eager(run, eager_train)
    assert compiled_modules(run.model) == [""]
    assert run.graphs >= 1
    for batch in run.prepared:
        assert {name: tensor.shape[1] for name, tensor in batch.items()} == {
            "input_ids": 24,
            "attention_mask": 24,
            "labels": 24,
        }
        assert all(tensor._dynamo_dynamic_indices == {1} for tensor in batch.values())
        assert (batch["labels"][:, 21:] == -100).all() and (batch["attention_mask"][:, 21:] == 0).all()

    # Marked dynamic, the graph takes a new padded length without compiling again.
    graphs = counters["stats"]["unique_graphs"]
    longer = tuned.prepare_batch(toy_batch([30, 5, 12, 7], seed=2))
    assert longer["input_ids"].shape[1] == 32
    toy.compute_loss(toy.run_forward(run.model, longer), longer).backward()
    assert counters["stats"]["unique_graphs"] == graphs


@INDUCTOR
def test_regional_with_compiled_optimizer(toy: Workload, toy_summary: WorkloadSummary, eager_train: Run) -> None:
    module = generated(CompileConfig(scope="regional", padding_alignment=8, compile_optimizer=True), toy_summary)

    run = train(toy, module.apply_compilation, module.prepare_batch)

    assert_matches_eager(run, eager_train)
    assert compiled_modules(run.model) == BLOCKS
    assert "step" in vars(run.optimizer)  # the compiled step replaced the bound method
    assert run.graphs >= 2  # the blocks' graph and the optimizer step's
    assert all(batch["input_ids"].shape[1] == 24 for batch in run.prepared)


@INDUCTOR
def test_modular_inference_with_per_module_settings(
    toy: Workload, toy_summary: WorkloadSummary, eager_infer: Run
) -> None:
    config = CompileConfig(
        scope="modular",
        dynamic=False,
        padding_alignment="max",
        module_settings={"head": ModuleSettings(mode=None, options={"shape_padding": True})},
    )
    module = generated(config, replace(toy_summary, task="infer"))
    assert module.MODULE_KWARGS["head"]["options"] == {"shape_padding": True}

    run = infer(toy, module.apply_compilation, module.prepare_batch)

    assert_matches_eager(run, eager_infer)
    assert compiled_modules(run.model) == ["embed", "encoder", "head"]
    assert run.graphs >= 3  # one per compiled module
    longest = toy_summary.max_lengths["input_ids"][1]
    assert all(tensor.shape[1] == longest for batch in run.prepared for tensor in batch.values())


@pytest.fixture
def global_settings() -> Any:
    """The stance, matmul precision and dynamic sources are process-wide: put them back for the tests after this one."""
    precision = torch.get_float32_matmul_precision()
    sources = torch.compiler.config.dynamic_sources
    yield
    torch.compiler.set_stance("default")
    torch.set_float32_matmul_precision(precision)
    torch.compiler.config.dynamic_sources = sources


@INDUCTOR
def test_training_with_lite_mode_compiled_autograd_and_eager_rare_shapes(
    toy: Workload, toy_summary: WorkloadSummary, eager_train: Run, global_settings: None
) -> None:
    config = CompileConfig(
        mode="lite",
        mark_dynamic=MARKS,
        knobs={
            "recompile_limit": 2,
            "stance_after_warmup": "eager_on_recompile",
            "compiled_autograd": True,
            "optimizer_mode": "max-autotune-no-cudagraphs",
        },
        compile_optimizer=True,
    )
    module = generated(config, toy_summary)
    captures = counters["compiled_autograd"]["captures"]

    run = train(toy, module.apply_compilation, module.prepare_batch, module.backward)

    assert_matches_eager(run, eager_train)
    assert counters["compiled_autograd"]["captures"] > captures, "the backward pass was captured and compiled"
    assert module.COMPILE_KWARGS["recompile_limit"] == 2
    assert module.OPTIMIZER_COMPILE_KWARGS == {"fullgraph": False, "mode": "max-autotune-no-cudagraphs"}
    # After warm-up, a batch of another size would need a compile: it runs eagerly instead.
    module.finish_warmup()
    graphs = counters["stats"]["unique_graphs"]
    odd = module.prepare_batch(toy_batch([30, 5], seed=3))
    loss = toy.compute_loss(toy.run_forward(run.model, odd), odd)
    assert torch.isfinite(loss)
    assert counters["stats"]["unique_graphs"] == graphs, "nothing compiled after finish_warmup()"


@INDUCTOR
def test_inference_with_unbacked_marks_freezing_and_high_matmul_precision(
    toy: Workload, toy_summary: WorkloadSummary, eager_infer: Run, global_settings: None
) -> None:
    config = CompileConfig(
        mode=None,
        options={"freezing": True, "cpp.weight_prepack": True},
        mark_dynamic=MARKS,
        mark_as="unbacked",
        knobs={"float32_matmul_precision": "high"},
    )
    module = generated(config, replace(toy_summary, task="infer"))

    run = infer(toy, module.apply_compilation, module.prepare_batch)

    assert torch.get_float32_matmul_precision() == "high"
    assert_matches_eager(run, eager_infer)
    for batch in run.prepared:
        assert all(1 in getattr(tensor, "_dynamo_unbacked_indices", ()) for tensor in batch.values()), batch


@INDUCTOR
def test_inference_with_inputs_marked_dynamic_by_name(
    toy: Workload, toy_summary: WorkloadSummary, eager_infer: Run, global_settings: None
) -> None:
    """mark_as='sources': no batch is touched, yet lengths 21 and 19 share one graph from the first compile."""
    config = CompileConfig(mark_dynamic=MARKS, mark_as="sources")
    module = generated(config, replace(toy_summary, task="infer"))
    torch._dynamo.reset()  # the toy's forward compiled by a test before this one must not serve it
    # Fresh tensors: marks that other tests' prepare_batch left on BATCHES' own tensors would count.
    fresh = [{name: tensor.clone() for name, tensor in batch.items()} for batch in BATCHES]

    run = infer(toy, module.apply_compilation, module.prepare_batch, fresh)

    assert_matches_eager(run, eager_infer)
    # Unmarked, the second length would compile a second graph (then dynamic by dynamo's own rule).
    assert run.graphs == 1
    assert module.DYNAMIC_SOURCES in torch.compiler.config.dynamic_sources
    for batch, given in zip(run.prepared, BATCHES, strict=True):
        for tensor in batch.values():
            assert not getattr(tensor, "_dynamo_dynamic_indices", None)
            assert not getattr(tensor, "_dynamo_unbacked_indices", None)
        assert batch["input_ids"].shape == given["input_ids"].shape  # no padding either
