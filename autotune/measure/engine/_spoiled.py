"""A replicate the machine spoiled is measured again, not counted.

Pairing cancels what a busy machine does to both sides of a pair only while it does the same
to both: a neighbour that takes the CPU for a minute slows every subject of that replicate,
unequally, and one such replicate can widen every interval of a confirmation past deciding.
A replicate is spoiled when at least half of its runs saw other processes take the CPU during
their windows (`RunRecord.noisy`), or when every subject ran far below its own level in the
replicates before (`FALL`), as they do together only on a busy machine, or when a subject's run
timed out where every run of it before completed (`timed_out`): a loaded machine's timeout, which
says nothing of the configuration until it happens again. Its runs are set aside
(`Campaign.spoiled` says why) and the replicate is run again, at most `CampaignRules.reruns`
times in a campaign: on a machine busy for good, the campaign goes on with what it gets.
"""

from __future__ import annotations

import statistics

from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._proof import CacheProof
from autotune.trial.run_record import RunRecord

__all__ = ["FALL", "measured_again", "set_aside", "spoiled", "timed_out"]

FALL = 0.8
"""A replicate in which every subject ran below this share of its median in the replicates before was spoiled (its
speed: of a figure to minimize, the inverse)."""


def measured_again(campaign: Campaign, reruns: int, proof: CacheProof | None = None) -> bool:
    """Set the campaign's last replicate aside when it was spoiled and fewer than `reruns` were, with what it saved or
    loaded for the compile cache's `proof`; whether it was."""
    why = spoiled(campaign) if len(campaign.spoiled) < reruns else ""
    if why:
        if proof is not None:
            proof.forget(campaign.replicate_count)
        set_aside(campaign, why)
    return bool(why)


def spoiled(campaign: Campaign) -> str:
    """Why the campaign's last replicate was measured on a busy machine; '' when it was not."""
    index = campaign.replicate_count - 1
    if index < 0:
        return ""
    ran: dict[str, RunRecord] = {}
    for name in campaign.measured():
        runs = campaign.runs.get(name, [])
        record = runs[index] if len(runs) > index else None
        if record is not None and record.complete:
            ran[name] = record
    late = timed_out(campaign)
    if late:
        return late
    if not ran:
        return ""
    busy = [record.noisy for record in ran.values() if record.noisy]
    if 2 * len(busy) >= len(ran):
        return f"{len(busy)} of its {len(ran)} runs saw the machine busy ({busy[0]})"
    falls = []
    for name, record in ran.items():
        before = [campaign.value_of(name, r) for r in campaign.runs[name][:index] if r is not None and r.complete]
        if not before:
            return ""
        share = campaign.value_of(name, record) / statistics.median(before)
        falls.append(share if campaign.objective.direction == "maximize" else 1.0 / share)
    if len(falls) >= 2 and max(falls) < FALL:
        return f"every subject ran at {min(falls):.0%} to {max(falls):.0%} of its level in the replicates before"
    return ""


def timed_out(campaign: Campaign) -> str:
    """Which subject's run timed out in the campaign's last replicate, when every run of it before completed (its
    first, cold run and its replicates) and no timeout of its was set aside before; '' when none did.

    A configuration that hangs times out again in the replicate measured in this one's place, and that
    timeout counts: one rerun for each subject, at most.
    """
    index = campaign.replicate_count - 1
    for name in campaign.measured():
        runs = campaign.runs.get(name, [])
        record = runs[index] if len(runs) > index else None
        if record is None or record.complete or record.reason != "timeout":
            continue
        said = f"{name}'s run timed out"
        if any(said in why for why in campaign.spoiled):
            continue
        first = campaign.cold.get(campaign.subjects[name].same_as or name)
        if (first is None or first.complete) and all(r is None or r.complete for r in runs[:index]):
            return f"{said}, where every run of it before completed"
    return ""


def set_aside(campaign: Campaign, why: str) -> None:
    """Take the campaign's last replicate out of its figures, keeping why; the next replicate takes its place."""
    index = campaign.replicate_count - 1
    campaign.replicates.pop()
    for name in campaign.measured():
        runs = campaign.runs.get(name, [])
        if len(runs) > index:
            del runs[index:]
    for columns in campaign.partners.values():
        for column in columns.values():
            del column[index:]
    for compiles in campaign.compiles.values():
        del compiles[index:]
    campaign.spoiled.append(f"replicate {index + 1}: {why}")
