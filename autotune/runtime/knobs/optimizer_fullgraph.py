"""Training: the compiled optimizer step refuses graph breaks (`torch.compile(optimizer.step, fullgraph=True)`).

Where autotune compiles `optimizer.step`, this makes dynamo fail instead of splitting the step
at a graph break, so one graph runs the whole update or the trial says why it cannot. torch's
own optimizers break the graph in `step` on purpose (around their `_init_group`), so the
bundled spaces do not offer it: it is there for optimizers of your own that trace whole.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import ConfigView
from autotune.runtime.knobs._optimizer_step import OptimizerStepKnob


class OptimizerFullgraph(OptimizerStepKnob):
    name = "optimizer_fullgraph"
    choices = (False, True)
    summary = (
        "Training, with the compiled optimizer step: `torch.compile(optimizer.step, fullgraph=True)`, which fails at a "
        "graph break instead of splitting the step. torch's own optimizers break the graph on purpose, so the bundled "
        "spaces do not offer it; it is for optimizers of your own."
    )
    example = ({"compile_optimizer": True}, True)

    def allowed_text(self) -> str:
        return "true or false"

    def optimizer_compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        return {**kwargs, "fullgraph": True}

    def describe(self, value: Any) -> str:
        return "fullgraph optimizer step"


KNOB = OptimizerFullgraph()
