"""When a campaign looks at its figures and when it stops: the looks it plans (over which it spends its error), and
at each one whether the question is decided, precise enough, has no gain left to find, or has spent its budget."""

from __future__ import annotations

import math

from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._rules import CampaignRules
from autotune.measure.stats import (
    FUTILITY_ERROR,
    Looks,
    claim_chance,
    outcome,
    spaced_looks,
    upper_bound,
)

__all__ = ["measurable", "plan_looks", "why_spent", "why_stop"]


def plan_looks(campaign: Campaign, rules: CampaignRules, replicate_seconds: float | None = None) -> Looks:
    """The looks a campaign takes and the candidates it compares, over which it spends its error.

    The candidates are the configurations measured against `rules.reference` (not eager, not
    a subject that is the reference itself); the looks, after replicates `min_replicates` to
    `max_replicates`, and no earlier than the second (one replicate decides nothing). With a
    seconds budget and a replicate's cost (a guess from the first runs,
    `expected_replicate_seconds`, then what the first replicate took, before any look), the
    last look is the last replicate the budget can hold: error planned for looks that never
    come is power lost (`autotune validate` planned 18 looks and had time for four or five),
    and looks not planned leave the budget unspent (the first runs' guess at the toy's
    replicate was over twice what one took).
    """
    candidates = [
        n
        for n, s in campaign.subjects.items()
        if s.config is not None and n != rules.reference and s.same_as != rules.reference and n != "eager"
    ]
    first = min(max(2, rules.min_replicates), rules.max_replicates)
    last = rules.max_replicates
    if rules.seconds is not None and replicate_seconds:
        last = min(last, max(first, math.floor(rules.seconds / replicate_seconds)))
    at = spaced_looks(first, last, rules.looks) if rules.looks is not None else ()
    return Looks(
        candidates=max(1, len(candidates)),
        first=at[0] if at else first,
        last=last,
        at=at,
        last_share=rules.last_share,
        floor_rule=rules.floor_rule,
    )


def measurable(campaign: Campaign) -> bool:
    """Whether two subjects are left to compare: one alone has no partner for a ratio."""
    return len(campaign.racing()) >= 2


def why_stop(campaign: Campaign, rules: CampaignRules, spent: float, ahead: float = 0.0) -> str:
    """Why to stop now ('' to go on); `ahead` is what the next replicate would take, which the budget must hold."""
    looking = campaign.looks is None or campaign.looks.judges(campaign.replicate_count)
    if campaign.replicate_count >= rules.min_replicates and looking:
        leader = campaign.leader(rules.reference)
        versus = campaign.ratio(leader, rules.reference) if leader else None
        said = outcome(versus, rules.decide_within)
        if leader is None:
            return "nothing left to compare"
        if rules.precision is not None:
            if versus is not None and versus.replicates >= 2 and versus.half_width <= rules.precision:
                return (
                    f"precise after {campaign.replicate_count} replicates: {leader} against {rules.reference} within "
                    f"+/-{versus.half_width:.1%} ({said})"
                )
        elif said != "undecided" and rules.stop_decided:
            return f"decided after {campaign.replicate_count} replicates: {leader} against {rules.reference}: {said}"
        if rules.futility and rules.precision is None and (why := _no_gain_left(campaign, rules)):
            return why
    if rules.seconds is not None and campaign.replicate_count >= rules.min_replicates and spent + ahead > rules.seconds:
        return (
            f"budget spent: {spent:.0f} s of measurement, and another replicate (about {ahead:.0f} s) would pass "
            f"--measure-seconds {rules.seconds:g}; " + _state(campaign, rules)
        )
    return ""


def _no_gain_left(campaign: Campaign, rules: CampaignRules) -> str:
    """Why no subject still measured can be shown faster than the reference any more ('' while one can): under the
    `chance` rule (`CampaignRules.futility_rule`), each one's `claim_chance` at the last look is under
    `CampaignRules.futility_chance`; under `band`, or where the campaign plans no looks, each one's upper bound
    (`upper_bound`, one-sided at `FUTILITY_ERROR`) lies inside the band."""
    if campaign.replicate_count >= rules.max_replicates:
        return ""  # the campaign ends here anyway, its replicates spent: the stop is the budget's, not this one
    reference = rules.reference
    rule, least = rules.futility_rule, rules.futility_chance
    looks = campaign.looks if rule == "chance" else None  # the chance needs the looks' last one
    found: list[tuple[float, float, str]] = []
    for name in campaign.racing():
        subject = campaign.subjects[name]
        if name == reference or subject.same_as == reference:
            continue
        logs = campaign.log_ratios(name, reference)
        if len(logs) < 2 or not all(math.isfinite(v) for v in logs):
            return ""
        windows = sum(len(r.windows) for r in campaign.complete_runs(name))
        parts = campaign.components(name, reference)
        floor = campaign.spread_floor(reference)
        bound = upper_bound(logs, windows, parts, floor=floor)
        if looks is not None:
            odds = claim_chance(logs, looks, windows, parts, rules.decide_within, floor=floor)
            if odds >= least:
                return ""
        elif bound > 1.0 + rules.decide_within:
            return ""
        else:
            odds = 0.0
        found.append((bound, odds, name))
    if not found:
        return ""
    bound, odds, name = max(found)
    said = (
        f"even that fast, it would show a gain at the last look in {'under 1%' if odds < 0.01 else f'{odds:.0%}'} "
        f"of campaigns (the stop asks under {least:.0%})"
        if looks is not None
        else f"inside the +/-{rules.decide_within:.0%} band"
    )
    return (
        f"no gain left to find after {campaign.replicate_count} replicates: the fastest, {name}, runs at most {bound:.3f}x "
        f"{reference} (one-sided {1 - FUTILITY_ERROR:.0%}); {said}"
    )


def why_spent(campaign: Campaign, rules: CampaignRules, held: bool = False) -> str:
    """Why a campaign that ran its last replicate stopped; `held`: its seconds budget set that last replicate."""
    if not measurable(campaign):
        return "nothing left to compare: every configuration but one failed"
    if held and rules.seconds is not None:
        most = f"the most that {rules.seconds:g} s of replicates hold, as planned from the first replicate"
    else:
        most = "the most allowed"
    return f"budget spent: {campaign.replicate_count} replicates ({most}); " + _state(campaign, rules)


def _state(campaign: Campaign, rules: CampaignRules) -> str:
    leader = campaign.leader(rules.reference)
    versus = campaign.ratio(leader, rules.reference) if leader else None
    return f"{leader} against {rules.reference}: {outcome(versus, rules.decide_within)}"
