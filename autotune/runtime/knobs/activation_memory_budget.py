"""Training: how much of the forward pass's activations the compiled backward keeps (`activation_memory_budget`).

AOTAutograd's partitioner decides which activations the forward saves for the backward.
At 1.0 (torch's default) it saves what makes the backward fastest; below it, it keeps the
activations within that share of their memory and recomputes the cheapest of the rest in
the backward pass: less peak memory for some recomputation. A memory objective
(`--objective throughput,memory`) is where it pays; for speed alone it rarely does.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import Knob, ProcessSetting

TARGET = "torch._functorch.config.activation_memory_budget"


class ActivationMemoryBudget(Knob):
    name = "activation_memory_budget"
    choices = (1.0, 0.5, 0.2)
    summary = (
        "Training: the share of the activations' memory the compiled forward keeps for the backward pass "
        f"(`{TARGET}`, process-wide); below 1.0 the rest is recomputed in the backward pass."
    )
    needs = "training"
    feature = ("torch._functorch.config", "activation_memory_budget")
    offered = {"thorough": (1.0, 0.5)}
    example = ({}, 0.5)

    def allows(self, value: Any) -> bool:
        return isinstance(value, float) and 0.0 < value <= 1.0

    def allowed_text(self) -> str:
        return "a number above 0 and at most 1.0, written with a decimal point"

    def process_setting(self, value: Any) -> ProcessSetting:
        return ProcessSetting(
            comment=(
                "The compiled forward keeps this share of its activations' memory for the backward\n"
                "pass and recomputes the cheapest of the rest there (set for the whole process)."
            ),
            target=TARGET,
            value=float(value),
        )

    def describe(self, value: Any) -> str:
        return f"activations kept {value:g}"


KNOB = ActivationMemoryBudget()
