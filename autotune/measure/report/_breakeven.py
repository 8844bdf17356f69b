"""When compiling pays for itself: the steps after which a subject's compile time is paid back by its faster steps.

Against eager, the whole compile time is the cost; against plain torch.compile, only the
seconds a subject compiles longer (none when it compiles as fast or faster). Each step saves
`t_ref * (1 - 1/r)` seconds, where `t_ref` is the reference's seconds per step and `r` how
many times faster the subject runs, paired replicate by replicate (throughput, whatever the
campaign's objective); a subject that is not faster never pays back (None).

The steps are one figure with no interval. The compile seconds on each side are one cold
compile each, and two cold compiles of one configuration minutes apart can differ by more than
the difference between two configurations; an interval from the speedup alone would claim a
precision the compile times do not have (two validations of one configuration once gave
intervals of 62 [43, 124] and 5,977 [5,149, 7,158] steps that excluded each other).
"""

from __future__ import annotations

import math
from typing import Any

from autotune.measure.engine import Campaign
from autotune.measure.format import number
from autotune.measure.stats import Interval, replicate_interval

__all__ = ["break_even", "break_even_text", "steps_to_pay_back"]


def steps_to_pay_back(compile_seconds: float, step_seconds: float, speedup: float) -> float | None:
    """Steps after which `compile_seconds` are paid back by steps `speedup` times faster than `step_seconds`."""
    if speedup <= 1.0 or step_seconds <= 0:
        return None
    return compile_seconds / (step_seconds * (1.0 - 1.0 / speedup))


def break_even(campaign: Campaign, name: str, reference: str) -> dict[str, Any] | None:
    """`name`'s break-even against `reference` ('eager' or 'compile') as plain data, or None when it does not apply.

    None for the reference itself, when either has no complete run or no compile time, and
    against plain compile when `name` compiles no longer than it does.
    """
    if name == reference:
        return None
    cost = campaign.compile_seconds(name)
    reference_run = campaign.median_run(reference)
    if cost is None or reference_run is None or not reference_run.batches_per_second:
        return None
    if reference != "eager":
        cost -= campaign.compile_seconds(reference) or 0.0
        if cost <= 0:
            return None
    speedup = _throughput_interval(campaign, name, reference)
    if speedup is None:
        return None
    step = 1.0 / reference_run.batches_per_second
    return {
        "compile_seconds": round(cost, 2),
        "compile_measurements": 1,
        "step_seconds": step,
        "speedup": speedup.to_dict(),
        "steps": _rounded(steps_to_pay_back(cost, step, speedup.median)),
    }


def break_even_text(figures: dict[str, Any] | None) -> str:
    """'about 4,800 steps (one cold compile each, no interval)', 'never (not faster)', or '' with nothing to say."""
    if not figures:
        return ""
    if figures.get("steps") is None:
        return "never (not faster)"
    return f"{number(figures['steps'])} steps (one cold compile each, no interval)"


def _throughput_interval(campaign: Campaign, name: str, reference: str) -> Interval | None:
    logs = [
        math.log(a.samples_per_second / b.samples_per_second)
        for a, b in campaign.paired_runs(name, reference)
        if a is not None and b is not None and a.complete and b.complete
        if a.samples_per_second and b.samples_per_second
    ]
    return replicate_interval(logs, looks=campaign.looks) if logs else None


def _rounded(steps: float | None) -> float | None:
    return None if steps is None else float(math.ceil(round(steps, 6)))  # 9999.9999999 is 10,000 steps
