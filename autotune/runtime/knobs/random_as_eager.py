"""Training with dropout: the compiled code draws its random numbers as eager does (`fallback_random`).

Inductor draws dropout's random numbers with a generator of its own, so compiled and eager
training draw different masks, and the accuracy check of a model with dropout compared the two
in eval mode; training then switched back to train mode, which compiled the model a second
time. With `torch._inductor.config.fallback_random`, the compiled code calls eager's own random
operators: from the same seed both draw the same masks, the check compares training steps in
train mode, dropout included, and the model compiles once. On a 2-core CPU it cost 0.3% of a
training step of four transformer blocks at dropout 0.1 (5 against 5 compiled steps, 12 times,
one thread, interleaved in one process while a simulation ran beside it: a ratio, not a speed).
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import Knob, ProcessSetting

TARGET = "torch._inductor.config.fallback_random"


class RandomAsEager(Knob):
    name = "random_as_eager"
    choices = (False, True)
    summary = (
        "Training with dropout: the compiled code draws random numbers as eager does "
        f"(`{TARGET}`, process-wide), so its dropout masks are checked against eager's in train mode and the model "
        "compiles once, not once more for the check in eval mode."
    )
    needs = "dropout in training"
    feature = ("torch._inductor.config", "fallback_random")
    random_as_eager = True
    # Every trial of a model with dropout draws as eager does, so none compiles twice; plain compile, a baseline,
    # still draws with Inductor's own generator.
    offered = {"quick": (True,), "default": (True,), "thorough": (True,)}
    neutral_offered = False
    example = ({}, True)

    def process_setting(self, value: Any) -> ProcessSetting:
        return ProcessSetting(
            comment=(
                "Dropout draws its masks with eager's random operators, from torch's own generator: compiled\n"
                "training draws what eager training draws from the same seed (set for the whole process)."
            ),
            target=TARGET,
            value=True,
        )

    def describe(self, value: Any) -> str:
        return "random numbers as eager draws them"


KNOB = RandomAsEager()
