"""How long a campaign's next replicate is: its windows per subject, and the seconds it will take."""

from __future__ import annotations

from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._harness import Harness
from autotune.measure.engine._rules import CampaignRules
from autotune.measure.stats import windows_per_replicate

__all__ = ["PROBE_REPLICATES", "next_seconds", "next_windows"]

PROBE_REPLICATES = 2
"""Replicates run with the initial number of windows, before the variance components say how many pay."""


def next_windows(campaign: Campaign, rules: CampaignRules, harness: Harness) -> int:
    """Windows per subject in the next replicate: the initial number, then what the variance components say."""
    if campaign.replicate_count < PROBE_REPLICATES:
        return rules.windows
    leader = campaign.leader(rules.reference)
    parts = campaign.components(leader, rules.reference) if leader else None
    if parts is None or parts.replicates < 2:
        return rules.windows
    subjects = max(len(campaign.racing()), 1)
    window = harness.protocol.window_seconds * subjects  # a turn: one window of every subject
    return windows_per_replicate(
        parts,
        window_seconds=window,
        replicate_seconds=_start_up(campaign),
        least=4,
        most=max(rules.most_windows, rules.windows),
    )


def _start_up(campaign: Campaign) -> float:
    """What a later replicate's start-up will take: the mean of those so far that started from warm folders only.

    The compile-cache proof's replicate (`Replicate.loaded_cache`) started a subject from a saved file, which on a
    CPU holds no compiled kernels: its start-up took 20 to 27 s against 7 to 9 s for the toy's others, and counted
    in, it made the next replicates' windows about 40% more than the rule asks for (21 instead of 15)."""
    warm = [r.ready_seconds for r in campaign.replicates if not r.loaded_cache] or [
        r.ready_seconds for r in campaign.replicates
    ]
    return sum(warm) / len(warm) if warm else 0.0


def next_seconds(campaign: Campaign, windows: int) -> float:
    """What the next replicate will take, from the last one: its start-up, and its windows scaled to `windows`."""
    last = campaign.replicates[-1]
    measuring = max(last.seconds - last.ready_seconds, 0.0)
    ready = _start_up(campaign) if last.loaded_cache else last.ready_seconds
    return last.cold_seconds + ready + measuring * windows / max(last.windows, 1)
