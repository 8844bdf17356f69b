"""`OptimizerStepKnob`: what every knob of the compiled optimizer step shares."""

from __future__ import annotations

from typing import ClassVar

from autotune.runtime.knobs._knob import ConfigView, Knob, Need


class OptimizerStepKnob(Knob):
    """A knob of how `optimizer.step` is compiled: it needs training, and applies only where the configuration
    compiles the step (`compile_optimizer`); its change is `optimizer_compile_kwargs`."""

    needs: ClassVar[Need | None] = "training"

    def why_not(self, config: ConfigView) -> str | None:
        if config.compile_optimizer:
            return None
        return "it sets how optimizer.step is compiled, but compile_optimizer is false"
