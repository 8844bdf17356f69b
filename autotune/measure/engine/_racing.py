"""Racing: leaving out of a campaign's later replicates the subjects that no longer bear on its question."""

from __future__ import annotations

from autotune.measure.engine._campaign import Campaign
from autotune.measure.stats import BAND, outcome, replicate_interval

__all__ = ["retire"]


def retire(campaign: Campaign, reference: str = "compile", within: float = BAND) -> dict[str, str]:
    """Racing: leave out of later replicates each subject that no longer bears on the question; the ones retired now.

    The question is the leader against `reference`, and what is exported: the best configuration
    decided a gain. So, once its interval (over the replicates so far, at least two) says so:

    * a configuration slower than the leader, or slower than `reference`, cannot be exported;
    * eager slower than `reference` cannot make a configuration need to beat eager too;
    * nor can eager that every configuration still racing is decided faster than (a gain, as `outcome` says): each
      already beats it, whichever leads at the end (`choose` asks that of a configuration only where eager is
      decided faster than plain compile, and a configuration decided faster than eager is then faster than both).

    The leader and `reference` always run. A retired subject keeps its figures, over the
    replicates it ran in, and `Campaign.retired` says after which replicate and why.

    Leaving a configuration out claims nothing, so it reads the plain 95% interval of this
    look, not the campaign's simultaneous one: it can only take a candidate out of the running
    (and cost power where it errs), never make a gain likelier to be claimed. Leaving eager out
    is a claim: that no configuration need beat eager too. So eager leaves only on the
    campaign's own intervals (`Campaign.ratio`: simultaneous over the looks, with the floor), the
    ones its table prints; with the looks' plain intervals, an eager as fast as plain compile could
    be left out wrongly at any of them.
    """
    if campaign.replicate_count < 2:
        return {}
    leader = campaign.leader(reference)
    now: dict[str, str] = {}
    for name in campaign.racing():
        if name in (reference, leader):
            continue
        subject = campaign.subjects[name]
        if (
            subject.config is None
            and campaign.looks is not None
            and not campaign.looks.judges(campaign.replicate_count)
        ):
            continue  # a claim about eager: only where the campaign looks, on the error it planned there
        rivals = [reference] if subject.config is None else [r for r in (leader, reference) if r is not None]
        for rival in rivals:
            if subject.config is None:
                versus, which = campaign.ratio(name, rival), "simultaneous"
            else:
                logs = campaign.log_ratios(name, rival)
                versus, which = (replicate_interval(logs) if logs else None), "95% at this look"
            if versus is not None and versus.replicates >= 2 and versus.high < 1.0:
                now[name] = (
                    f"after replicate {campaign.replicate_count}: slower than {rival}, {versus.median:.2f}x "
                    f"[{versus.low:.2f}, {versus.high:.2f}] ({which})"
                )
                break
        if subject.config is None and name not in now and (why := _eager_beaten(campaign, name, reference, within)):
            now[name] = why
    campaign.retired.update(now)
    return now


def _eager_beaten(campaign: Campaign, eager: str, reference: str, within: float) -> str:
    """Why eager no longer bears on the question ('' while it may): every configuration still racing but `reference`
    is a decided gain over it, on the campaign's own interval."""
    versus = {
        name: campaign.ratio(name, eager)
        for name in campaign.racing()
        if name not in (eager, reference) and campaign.subjects[name].config is not None
    }
    if not versus or any(v is None or outcome(v, within) != "gain" for v in versus.values()):
        return ""
    name, slowest = min(((n, v) for n, v in versus.items() if v is not None), key=lambda item: item[1].low)
    return (
        f"after replicate {campaign.replicate_count}: every configuration racing is decided faster than it, the least of them "
        f"{name} at {slowest.median:.2f}x [{slowest.low:.2f}, {slowest.high:.2f}] (simultaneous)"
    )
