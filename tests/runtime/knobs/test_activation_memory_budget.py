"""`activation_memory_budget`: the generated file sets torch's process-wide budget, and the partitioner then saves
fewer activations for the backward pass of a real compiled training step, which still matches eager."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
import torch
import torch._functorch.config
from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
from torch._dynamo.backends.common import aot_autograd

from autotune.runtime import codegen
from autotune.runtime.config import CompileConfig
from autotune.study.search import load_space, params_for
from tests.study.summaries import SHARED, TOY_LIKE

pytestmark = pytest.mark.parallel


class FirstChoices:
    """Answers every question of a space with its first choice."""

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return choices[0]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)  # the same weights for the compiled and the eager copy
    layers = (
        torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64), torch.nn.LayerNorm(64))
        for _ in range(4)
    )
    return torch.nn.Sequential(*layers)


def _saved_and_grads() -> tuple[int, list[torch.Tensor], list[torch.Tensor]]:
    """How many tensors the compiled forward saves for the backward (AOTAutograd's min-cut partitioner, as
    Inductor uses it), and the compiled and eager gradients of one training step."""
    saved: list[int] = []

    def forward(graph: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> object:
        saved.append(len(next(iter(graph.graph.find_nodes(op="output"))).args[0]))
        return make_boxed_func(graph.forward)

    def backward(graph: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> object:
        return make_boxed_func(graph.forward)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=forward, bw_compiler=backward, partition_fn=min_cut_rematerialization_partition)
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    compiled, eager = _model(), _model()
    torch.compile(compiled, backend=backend)(x).square().mean().backward()
    eager(x).square().mean().backward()
    return saved[0], [p.grad for p in compiled.parameters()], [p.grad for p in eager.parameters()]


def test_the_generated_file_sets_the_budget_and_the_partitioner_then_saves_less_with_the_same_gradients() -> None:
    config = CompileConfig(knobs={"activation_memory_budget": 0.5})
    source = codegen.generate(config, TOY_LIKE, created="2026-01-02T03:04:05Z", version="0.0.0")
    assert "import torch._functorch.config\n" in source
    assert "    torch._functorch.config.activation_memory_budget = 0.5\n" in source
    before = torch._functorch.config.activation_memory_budget
    full, grads, eager = _saved_and_grads()
    try:
        # Applying the file sets the budget for the process (here, an eager configuration's scope leaves the
        # model alone, so only the setting is applied).
        codegen.load_module(source).apply_compilation(torch.nn.Linear(2, 2))
        assert torch._functorch.config.activation_memory_budget == 0.5
        kept, budget_grads, _ = _saved_and_grads()
    finally:
        torch._functorch.config.activation_memory_budget = before
    assert kept < full, f"the forward saved {kept} tensors at half the budget, {full} at the whole"
    for got, want in zip(grads + budget_grads, eager + eager, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_the_thorough_space_asks_it_of_a_training_workload_and_finds_the_answer_again() -> None:
    space = load_space("thorough").adapt(TOY_LIKE, "cpu", shared_lengths=SHARED)
    assert space.knobs["activation_memory_budget"] == (1.0, 0.5)
    # The space's first answer to every question (plain compile, in its options' spelling), at half the budget.
    wanted = dataclasses.replace(space.suggest(FirstChoices()), knobs={"activation_memory_budget": 0.5})
    params = params_for(space, wanted)
    assert params is not None and params["activation_memory_budget"] == 0.5
    inference = load_space("thorough").adapt(TOY_LIKE.__class__(spec="m:m", task="infer"), "cpu")
    assert "activation_memory_budget" not in inference.knobs
    assert any(d.startswith("activation_memory_budget [0.5]: inference") for d in inference.dropped)


def test_code_for_an_inference_workload_is_refused_naming_what_it_lacks() -> None:
    from autotune.errors import ConfigError
    from autotune.runtime.summary import WorkloadSummary

    config = CompileConfig(knobs={"activation_memory_budget": 0.5})
    with pytest.raises(ConfigError, match="activation_memory_budget: 0.5 needs training, which this infer workload"):
        codegen.generate(config, WorkloadSummary(spec="m:m", task="infer"), created="now", version="0")
