"""The retune decision rule: keep, replace, or call a regression, from one campaign's paired replicates.

A pure function of measurements, so that it can be tested on synthetic runs:

* The incumbent **regressed** when it fails and the failure is reproduced (its first, cold
  run failed, or two of its replicates did: one failed replicate, a timeout on a loaded
  machine, is a warning and nothing more), or when its ratio to plain torch.compile (to eager
  where the incumbent is plain compile, or best.yaml records no ratio to it), measured in the same replicates, fell below the ratio
  recorded at tuning time by more than `max_regression`, with an interval over two replicates
  at least that excludes "no change": today's interval lies wholly below the recorded one
  (below its median when only a median was recorded). One baseline judges, so the error is not
  spent twice; a ratio to eager that fell while the ratio to plain compile held is a warning:
  an eager that got faster after an upgrade, or compiled code that got slower whatever its
  configuration, is no regression of the configuration (`examples/decision_error.py
  --retune` called it one in 6 to 14% of nights). An absolute throughput recorded on another
  day is context, never the evidence: machines drift. The recorded interval holds the tuning
  day's variation only; what moves between days beyond it is not modelled by the rule, and the
  simulation shows what a day-to-day component of 2% does to it.
* A challenger **replaces** the incumbent when it ran every replicate without failing, is not
  decided slower than plain torch.compile, and its paired ratio to the incumbent has a median
  above 1 + `min_gain` and is a gain by the rule every choice uses (`outcome`: its interval's
  lower end above 1 + `GAIN_MARGIN`, 1.015). An incumbent that failed, or has no run to pair
  with, is replaced only by a challenger that is a decided gain over plain torch.compile.
* An incumbent **decided slower than plain torch.compile** that no challenger replaces, and that
  did not regress, is warned of: a regression means worse than when tuned (and schedulers act
  on it), which nothing recorded may show (an older file, another method, a small fall), but a
  user should know that plain compile now serves them better.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.measure.engine import BASELINES, Campaign
from autotune.measure.stats import BAND, Interval, outcome

__all__ = ["DECISIONS", "Decision", "decide", "recorded_ratios"]

DECISIONS = ("unchanged", "improved", "regression")
INCUMBENT, CHALLENGER = "incumbent", "challenger"


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the measurements say: keep, replace, and whether the incumbent regressed."""

    decision: str
    """'unchanged', 'improved' or 'regression'."""
    replaced: bool
    regressions: list[str]
    gain: float | None
    """The challenger's median paired ratio to the incumbent, minus one."""
    warnings: tuple[str, ...] = ()
    """What the user should know that is no regression: the kept incumbent is decided slower than plain compile."""


def decide(
    campaign: Campaign, *, recorded: Mapping[str, Interval | None], min_gain: float, max_regression: float
) -> Decision:
    """Decide on a campaign measuring 'incumbent' (and maybe 'challenger') with 'eager' and 'compile'.

    `recorded` holds the incumbent's ratios to 'compile' and 'eager' from best.yaml (None when unknown).
    """
    regressions: list[str] = []
    warnings: list[str] = []
    failure = campaign.reproduced_failure(INCUMBENT)
    once = campaign.failure_note(INCUMBENT) if failure is None else ""
    if failure is not None:
        where = campaign.failure_note(INCUMBENT) or "in its first, cold run"
        regressions.append(f"the incumbent failed ({failure.reason}) {where}: {failure.message[:300]}")
    elif not campaign.complete_runs(INCUMBENT):
        if once:
            warnings.append(f"the incumbent's {once}; with no other run of it, nothing is claimed about it")
        else:
            regressions.append("the incumbent was not measured")
    else:
        if once:
            warnings.append(f"the incumbent's {once}: its figures rest on its other replicates")
        # One baseline judges: plain compile, which runs on the same stack as the incumbent, so that what moves
        # both (a faster eager after an upgrade, a slower Inductor) is no regression of the configuration; eager only
        # where the incumbent is plain compile itself. Judging either would spend the error twice.
        judge = next((b for b in ("compile", "eager") if recorded.get(b) is not None), None)
        held: list[str] = []
        for baseline, label in (("compile", "plain torch.compile"), ("eager", "eager")):
            before = recorded.get(baseline)
            now = campaign.ratio(INCUMBENT, baseline)
            if before is None or now is None or now.replicates < 2:
                continue  # one replicate is a number, not a measurement: it calls nothing a regression
            if now.median < before.median * (1 - max_regression) and now.high < before.low:
                fell = (
                    f"the incumbent now runs {now.median:.2f}x {label} [{now.low:.2f}, {now.high:.2f}] over "
                    f"{now.replicates} replicate(s), against {before.median:.2f}x [{before.low:.2f}, {before.high:.2f}] "
                    f"when tuned"
                )
                if baseline == judge:
                    regressions.append(f"{fell}: slower by more than --max-regression {max_regression:.0%}")
                elif held:
                    warnings.append(
                        f"{fell}, while against plain torch.compile it held: eager got faster here, or compiled code "
                        "slower, whatever the configuration; no regression of the configuration"
                    )
                elif not regressions:
                    warnings.append(
                        f"{fell}; against plain torch.compile, which judges, it could not be compared over two "
                        "replicates today, so no regression is called"
                    )
            elif baseline == judge:
                held.append(baseline)  # measured against the judge, over two replicates at least, and no fall
    gain = None
    replaced = False
    if CHALLENGER in campaign.subjects and campaign.failure(CHALLENGER) is None and campaign.complete_runs(CHALLENGER):
        versus = campaign.ratio(CHALLENGER, INCUMBENT)
        gain = versus.median - 1 if versus is not None else None
        if _behind_plain_compile(campaign, CHALLENGER):
            replaced = False  # never worse than plain compile: a challenger decided slower than it replaces nothing
        elif failure is not None or not campaign.complete_runs(INCUMBENT):
            # Nothing of the incumbent's to pair it with: like any export, it must be a decided gain over plain
            # compile (a challenger level with it would ship a configuration that gains nothing).
            replaced = outcome(campaign.ratio(CHALLENGER, "compile"), BAND) == "gain"
        elif versus is not None and versus.replicates >= 2:
            # One replicate is a number, not a measurement: a challenger must win in several.
            # The proof's own rule for a gain (`outcome`: the interval's lower end above 1 + GAIN_MARGIN), and the
            # estimate above what the user asked a replacement to gain.
            replaced = versus.median > 1 + min_gain and outcome(versus, BAND) == "gain"
    decision = "regression" if regressions else ("improved" if replaced else "unchanged")
    if not regressions and not replaced and _behind_plain_compile(campaign, INCUMBENT):
        now = campaign.ratio(INCUMBENT, "compile")
        assert now is not None  # decided slower: there is an interval
        warnings.append(
            f"the incumbent now runs {now.median:.2f}x plain torch.compile [{now.low:.2f}, {now.high:.2f}] over "
            f"{now.replicates} replicate(s): plain torch.compile is faster here; no regression against what best.yaml "
            "records, so the files stay: search again, or ship plain torch.compile"
        )
    return Decision(decision=decision, replaced=replaced, regressions=regressions, gain=gain, warnings=tuple(warnings))


def _behind_plain_compile(campaign: Campaign, name: str) -> bool:
    """Whether `name` is decided slower than plain torch.compile in these replicates (`outcome`'s loss, over two
    replicates at least). The rule every export keeps: never worse than plain compile."""
    subject = campaign.subjects.get(name)
    if subject is None or subject.same_as == "compile":
        return False
    return outcome(campaign.ratio(name, "compile"), BAND) == "loss"


def recorded_ratios(figures: Mapping[str, Any]) -> dict[str, Interval | None]:
    """The incumbent's ratios to the baselines when it was tuned, as best.yaml records them.

    Files written before intervals were recorded hold a single ratio: it stands for an interval of one point.
    """
    itself = {"plain torch.compile": "compile", "no compilation": "eager"}.get(str(figures.get("exported")))
    ratios: dict[str, Interval | None] = {}
    for name in BASELINES:
        if name == itself:
            ratios[name] = None  # the incumbent is this baseline: it cannot fall behind itself
            continue
        recorded = figures.get(f"vs_{name}")
        try:
            ratios[name] = Interval.from_dict(recorded) if isinstance(recorded, Mapping) else None
        except (KeyError, TypeError, ValueError):
            ratios[name] = None
        single = figures.get(f"speedup_vs_{name}")
        if ratios[name] is None and isinstance(single, (int, float)) and not isinstance(single, bool) and single > 0:
            ratios[name] = Interval(float(single), float(single), float(single), 1)
    return ratios
