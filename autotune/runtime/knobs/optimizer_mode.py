"""Training, with the compiled optimizer step: that step's own `torch.compile` mode.

The optimizer step is a long run of small element-wise updates, one per parameter tensor, so
what pays there is not what pays for the model: `max-autotune-no-cudagraphs` may tune its
fused kernels, and `reduce-overhead` replays it as a CUDA graph (on a GPU). It is asked only
where autotune compiles `optimizer.step`, and its default is the model's usual: `default`.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import ConfigView
from autotune.runtime.knobs._optimizer_step import OptimizerStepKnob


class OptimizerMode(OptimizerStepKnob):
    name = "optimizer_mode"
    choices = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
    summary = (
        "Training, with the compiled optimizer step: that step's own `torch.compile` mode, e.g. "
        "`max-autotune-no-cudagraphs`; a CUDA-graph mode (`reduce-overhead`) only on a GPU."
    )
    example = ({"compile_optimizer": True}, "max-autotune-no-cudagraphs")

    def allows(self, value: Any) -> bool:
        return super().allows(value) and value in _installed_modes()

    def allowed_text(self) -> str:
        return f"one of {list(_installed_modes())}"

    def device_setting_for(self, value: Any) -> str | None:
        return str(value)

    def optimizer_compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        return {**kwargs, "mode": value}

    def describe(self, value: Any) -> str:
        return f"optimizer mode={value}"


def _installed_modes() -> tuple[str, ...]:
    """The modes the installed torch knows (an older one lacks lite), as the configuration's own mode is checked."""
    import torch._inductor  # loads in seconds: only when a value is checked, not on `import autotune`

    return tuple(torch._inductor.list_mode_options())


KNOB = OptimizerMode()
