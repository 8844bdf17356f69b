"""Fail at any graph break instead of splitting the graph (`torch.compile(fullgraph=True)`).

With it, dynamo traces each compiled region (the model, each module, each block) as one graph
or raises at the first break, so a configuration either runs with no Python between graphs or
the trial says where it broke. It changes nothing of a graph that has no break, so a search
offers it only where plain `torch.compile` saw none: there it may still differ, since a region
that must trace whole guards and specialises differently.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import ConfigView, Knob


class Fullgraph(Knob):
    name = "fullgraph"
    choices = (False, True)
    summary = (
        "`torch.compile(fullgraph=True)`: each compiled region traces as one graph, or the trial fails at its first "
        "graph break instead of splitting the graph there."
    )
    needs = "one graph"
    example = ({}, True)

    def allowed_text(self) -> str:
        return "true or false"

    def compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        return {**kwargs, "fullgraph": True}

    def describe(self, value: Any) -> str:
        return "fullgraph"


KNOB = Fullgraph()
