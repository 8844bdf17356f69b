"""Dynamic inputs: once warmed up, shapes without compiled code run eagerly (`torch.compiler.set_stance`).

After the usual input shapes have each run a step, `finish_warmup()` sets the compiler's stance
to 'eager_on_recompile': shapes compiled so far keep their compiled code, and a shape that would
need a new compile runs eagerly instead. A long tail of rare lengths then costs no compile time,
at the price of running those lengths uncompiled.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import Knob, ProcessSetting


class StanceAfterWarmup(Knob):
    name = "stance_after_warmup"
    choices = ("default", "eager_on_recompile")
    summary = (
        "Dynamic inputs: once the usual shapes have run (`finish_warmup()`), a shape without compiled code runs "
        "eagerly instead of compiling (`torch.compiler.set_stance('eager_on_recompile')`)."
    )
    needs = "dynamic inputs"
    feature = ("torch.compiler", "set_stance:eager_on_recompile")
    falls_back_to_eager = True
    example = ({}, "eager_on_recompile")

    def after_warmup(self, value: Any) -> ProcessSetting:
        return ProcessSetting(
            comment=(
                "Shapes compiled so far keep their compiled code; a shape that would need a new\n"
                "compile runs eagerly instead (rare lengths cost no compile time)."
            ),
            target="torch.compiler.set_stance",
            value=str(value),
            call=True,
        )

    def describe(self, value: Any) -> str:
        return f"then {value}"


KNOB = StanceAfterWarmup()
