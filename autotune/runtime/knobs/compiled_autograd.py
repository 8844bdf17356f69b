"""Training: the backward pass captured as a graph and compiled too (compiled autograd).

Without it, the compiled forward's backward graph is made ahead of time by AOTAutograd and
the rest of the backward runs in autograd's engine. Compiled autograd traces the whole
backward pass at run time, hooks included, and compiles it: more of it is fused, at the
price of another compile. autotune applies it where it calls the backward pass itself, in
the generated `backward(loss)`, so a workload whose own step calls `loss.backward()` is not
offered it.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import BackwardWrapper, ConfigView, Knob


class CompiledAutograd(Knob):
    name = "compiled_autograd"
    choices = (False, True)
    summary = (
        "Training: the backward pass is captured as a graph and compiled too (compiled autograd), where autotune "
        "runs it: the generated `backward(loss)`."
    )
    needs = "autotune's backward"
    feature = ("torch._dynamo.compiled_autograd", "_enable")
    example = ({}, True)

    def allowed_text(self) -> str:
        return "true or false"

    def backward_wrapper(self, value: Any, config: ConfigView) -> BackwardWrapper:
        # The backward graph is compiled like the model, less what applies only to a forward frame.
        kwargs = {k: v for k, v in config.compile_kwargs().items() if k not in ("fullgraph", "recompile_limit")}
        return BackwardWrapper(
            header="The backward pass is compiled too (compiled autograd): call backward(loss) instead of loss.backward().",
            comment="Compiled autograd: the backward pass is captured as a graph and compiled as well.",
            constant="BACKWARD_COMPILE_KWARGS",
            constant_comment="torch.compile arguments for the backward graph.",
            value=kwargs,
            context="torch._dynamo.compiled_autograd._enable(torch.compile(**BACKWARD_COMPILE_KWARGS))",
        )

    def describe(self, value: Any) -> str:
        return "compiled autograd"


KNOB = CompiledAutograd()
