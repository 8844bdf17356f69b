"""`fullgraph`: a region compiled with the generated arguments traces as one graph or fails at its graph break (the
search's rule, offering it only where plain torch.compile saw none, is tested with the spaces)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from autotune.runtime.config import CompileConfig

pytestmark = pytest.mark.parallel


class Breaks(torch.nn.Module):
    """A model whose forward breaks the graph once, between two graphs of its own."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x) * 2
        torch._dynamo.graph_break()
        return y + 1


def _compiled(config: CompileConfig) -> torch.nn.Module:
    # The eager backend: dynamo traces as it would for Inductor, without compiling kernels.
    torch._dynamo.reset()
    return torch.compile(Breaks(), **{**config.compile_kwargs(), "backend": "eager"})


def test_the_generated_arguments_make_a_graph_break_fail_instead_of_splitting_the_graph() -> None:
    x = torch.randn(4, 8)
    assert torch.equal(_compiled(CompileConfig())(x), torch.relu(x) * 2 + 1)
    with pytest.raises(Exception, match="graph_break"):
        _compiled(CompileConfig(knobs={"fullgraph": True}))(x)
