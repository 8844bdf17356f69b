"""The knob registry: each module here declares one search dimension (see `Knob`).

Nothing else lists a knob: `CompileConfig` holds its value under its name, the search space
asks it, codegen writes what it changes, the feature probes and the docs' table read it.
"""

from autotune.runtime.knobs._knob import (
    APPLIES_ONLY_WITH,
    BackwardWrapper,
    ConfigView,
    Knob,
    Need,
    ProcessSetting,
    knob,
    registered,
    same_value,
)

__all__ = [
    "APPLIES_ONLY_WITH",
    "BackwardWrapper",
    "ConfigView",
    "Knob",
    "Need",
    "ProcessSetting",
    "knob",
    "registered",
    "same_value",
]
