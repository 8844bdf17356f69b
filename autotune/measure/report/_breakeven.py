"""When compiling pays for itself: the steps after which a subject's compile time is paid back by its faster steps.

Against eager, the whole compile time is the cost; against plain torch.compile, only the
seconds a subject compiles longer (none when it compiles as fast or faster). Each step saves
`t_ref * (1 - 1/r)` seconds, where `t_ref` is the reference's seconds per step and `r` how
many times faster the subject runs, paired replicate by replicate (throughput, whatever the
campaign's objective); a subject that is not faster never pays back (None).

Without cold compiles between replicates, the steps are one figure with no interval. The
compile seconds on each side are then one cold compile each, and two cold compiles of one
configuration minutes apart can differ by more than the difference between two configurations;
an interval from the speedup alone would claim a precision the compile times do not have (two
validations of one configuration once gave intervals of 62 [43, 124] and 5,977 [5,149, 7,158]
steps that excluded each other).

With them (`CampaignRules.cold_compiles`: `autotune validate --cold-compiles`, a study whose
objective counts compile time), the extra compile is the mean of the replicates' paired
differences with its 97.5% interval, and the speedup's 97.5% interval joins it: the steps'
interval runs from the fewest extra seconds paid back at the highest speedup to the most at the
lowest, and covers with at least 95% (Bonferroni over the two). Where the speedup's interval
reaches 1, the steps have no upper end.
"""

from __future__ import annotations

import math
from typing import Any

from autotune.measure.engine import Campaign
from autotune.measure.format import number
from autotune.measure.stats import Interval, mean_interval, replicate_interval

__all__ = ["break_even", "break_even_text", "steps_to_pay_back"]

JOINT = 0.975
"""Each of the two intervals the steps' interval joins (extra compile seconds, speedup): 97.5%, so both hold together
with at least 95%."""


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
    repeated = campaign.extra_compile(name, None if reference == "eager" else reference)
    if repeated is not None:
        return _repeated(campaign, name, reference, repeated)
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


def _repeated(campaign: Campaign, name: str, reference: str, extra: Interval) -> dict[str, Any] | None:
    """Break-even from cold compiles paired replicate by replicate: the steps with their interval."""
    reference_run = campaign.median_run(reference)
    if reference_run is None or not reference_run.batches_per_second or extra.median <= 0:
        return None
    speedup = _throughput_interval(campaign, name, reference)
    if speedup is None:
        return None
    step = 1.0 / reference_run.batches_per_second
    cost = campaign.extra_compile(name, None if reference == "eager" else reference, confidence=JOINT)
    wide = _throughput_interval(campaign, name, reference, confidence=JOINT)
    assert cost is not None and wide is not None
    low = steps_to_pay_back(max(cost.low, 0.0), step, wide.high)
    high = steps_to_pay_back(cost.high, step, wide.low) if wide.low > 1.0 else None
    return {
        "compile_seconds": round(extra.median, 2),
        "compile_interval": [round(cost.low, 2), round(cost.high, 2)],
        "compile_measurements": extra.replicates,
        "step_seconds": step,
        "speedup": speedup.to_dict(),
        "steps": _rounded(steps_to_pay_back(extra.median, step, speedup.median)),
        "steps_interval": [_rounded(low) or 0.0, _rounded(high)],
    }


def break_even_text(figures: dict[str, Any] | None) -> str:
    """'about 4,800 steps (one cold compile each, no interval)', '4,800 steps [3,100, 9,000] (4 cold compiles each)',
    'never (not faster)', or '' with nothing to say."""
    if not figures:
        return ""
    if figures.get("steps") is None:
        return "never (not faster)"
    measured = int(figures.get("compile_measurements") or 1)
    if measured < 2 or "steps_interval" not in figures:
        return f"{number(figures['steps'])} steps (one cold compile each, no interval)"
    low, high = figures["steps_interval"]
    upper = number(high) if high is not None else "never"
    return f"{number(figures['steps'])} steps [{number(low)}, {upper}] ({measured} cold compiles each)"


def _throughput_interval(
    campaign: Campaign, name: str, reference: str, confidence: float | None = None
) -> Interval | None:
    logs = [
        math.log(a.samples_per_second / b.samples_per_second)
        for a, b in campaign.paired_runs(name, reference)
        if a is not None and b is not None and a.complete and b.complete
        if a.samples_per_second and b.samples_per_second
    ]
    if not logs:
        return None
    if confidence is not None:
        logged = mean_interval(logs, confidence)
        return Interval(math.exp(logged.median), math.exp(logged.low), math.exp(logged.high), logged.replicates)
    return replicate_interval(logs, looks=campaign.looks, at=campaign.last_pair(name, reference) or len(logs))


def _rounded(steps: float | None) -> float | None:
    return None if steps is None else float(math.ceil(round(steps, 6)))  # 9999.9999999 is 10,000 steps
