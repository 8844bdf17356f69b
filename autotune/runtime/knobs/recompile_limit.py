"""Dynamic inputs: how many times a compiled region compiles again for new shapes before it runs them eagerly.

`torch.compile(recompile_limit=N)`: a region whose guards fail for a new shape compiles it
again, up to N versions; past that, new shapes run that region eagerly instead of paying
another compile. With inputs whose lengths vary, a small limit caps the compile time of a
long tail of lengths, at the price of running those lengths uncompiled.
"""

from __future__ import annotations

from typing import Any

from autotune.runtime.knobs._knob import ConfigView, Knob


class RecompileLimit(Knob):
    name = "recompile_limit"
    choices = (None, 2, 4, 8)
    summary = (
        "Dynamic inputs: after this many compiles of a region (`torch.compile(recompile_limit=N)`), new shapes "
        "run it eagerly instead of compiling it again; null keeps torch's default."
    )
    needs = "dynamic inputs"
    feature = ("torch", "compile:recompile_limit")
    falls_back_to_eager = True
    example = ({"mark_dynamic": (("input_ids", 1),)}, 2)

    def allows(self, value: Any) -> bool:
        return value is None or (type(value) is int and value >= 1)

    def allowed_text(self) -> str:
        return "null (torch's default) or an integer >= 1"

    def compile_kwargs(self, value: Any, kwargs: dict[str, Any], config: ConfigView) -> dict[str, Any]:
        return {**kwargs, "recompile_limit": int(value)}


KNOB = RecompileLimit()
