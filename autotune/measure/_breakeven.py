"""When compiling pays for itself: the steps after which a subject's compile time is paid back by its faster steps.

Against eager, the whole compile time is the cost; against plain torch.compile, only the
seconds a subject compiles longer (none when it compiles as fast or faster). Each step saves
`t_ref * (1 - 1/r)` seconds, where `t_ref` is the reference's seconds per step and `r` how
many times faster the subject runs, paired replicate by replicate (throughput, whatever the
campaign's objective). The interval of the steps comes from the interval of `r`; a subject
that is not faster never pays back (None), and an interval that reaches 1 has no upper end.
"""

from __future__ import annotations

import math
from typing import Any

from autotune.measure._campaign import Campaign
from autotune.measure._statistics import Interval, replicate_interval
from autotune.measure.format import number

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
        "step_seconds": step,
        "speedup": speedup.to_dict(),
        "steps": _rounded(steps_to_pay_back(cost, step, speedup.median)),
        "low": _rounded(steps_to_pay_back(cost, step, speedup.high)),
        "high": _rounded(steps_to_pay_back(cost, step, speedup.low)) if speedup.rounds > 1 else None,
    }


def break_even_text(figures: dict[str, Any] | None) -> str:
    """'about 4,800 steps [3,900, 6,200]', 'never (not faster)', or '' when there is nothing to say."""
    if not figures:
        return ""
    if figures.get("steps") is None:
        return "never (not faster)"
    text = f"{number(figures['steps'])} steps"
    low, high = figures.get("low"), figures.get("high")
    if low is not None and figures["speedup"].get("rounds", 0) > 1:
        text += f" [{number(low)}, {number(high) if high is not None else 'never'}]"
    return text


def _throughput_interval(campaign: Campaign, name: str, reference: str) -> Interval | None:
    pairs = zip(campaign.runs.get(name, []), campaign.runs.get(reference, []), strict=False)
    logs = [
        math.log(a.samples_per_second / b.samples_per_second)
        for a, b in pairs
        if a is not None and b is not None and a.complete and b.complete
        if a.samples_per_second and b.samples_per_second
    ]
    return replicate_interval(logs) if logs else None


def _rounded(steps: float | None) -> float | None:
    return None if steps is None else float(math.ceil(round(steps, 6)))  # 9999.9999999 is 10,000 steps
