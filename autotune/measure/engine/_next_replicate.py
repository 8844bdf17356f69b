"""A campaign's next replicate: who lives together (from the first runs' memory), for how many windows, and which
subject starts from its saved file where the compile cache is being proven; run in the lab and recorded in the
campaign."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import replace

from autotune.measure.engine._callbacks import RunCallback
from autotune.measure.engine._campaign import Campaign
from autotune.measure.engine._harness import Harness
from autotune.measure.engine._lab import Lab
from autotune.measure.engine._proof import CacheProof
from autotune.measure.engine._replicate import ReplicatePlan, batches_for, co_residence
from autotune.measure.engine._rules import CampaignRules
from autotune.measure.engine._sizing import next_windows
from autotune.trial.request import TrialRequest
from autotune.trial.run_record import RunRecord

__all__ = ["next_replicate"]


def next_replicate(
    harness: Harness,
    campaign: Campaign,
    every: Mapping[str, TrialRequest],
    rules: CampaignRules,
    rng: random.Random,
    on_run: RunCallback | None,
    lab: Lab,
    cold_seconds: float = 0.0,
    proof: CacheProof | None = None,
) -> None:
    """Run the campaign's next replicate of the subjects still racing, from their warm `every` requests, and record
    its figures (`Campaign.replicates`, `Campaign.runs`, and each subject's partner run of the reference where the
    design pairs them); `cold_seconds` is what the cold compiles before it took."""
    names = campaign.racing()
    requests = {name: every[name] for name in names}
    if proof is not None:
        configured = {n for n in names if campaign.subjects[n].config is not None}
        # The leader's file is the likeliest to ship; with no configuration but the reference, the reference's.
        leader = campaign.leader(rules.reference)
        requests = proof.requests(requests, leader if leader in configured else rules.reference, configured)
    memory = {n: _peak(campaign.cold.get(n)) for n in names}
    design, groups = co_residence(names, memory, _free_mb(campaign), rules.reference)
    batches: int | Callable[..., int] = (
        campaign.replicates[0].batches_per_window
        if campaign.replicates
        else batches_for(harness.protocol.window_seconds)
    )
    plan = ReplicatePlan(
        groups=groups,
        design=design,
        windows=next_windows(campaign, rules, harness),
        batches_per_window=batches,
        window_seconds=harness.protocol.window_seconds,
    )
    replicate, runs, partners = lab.replicate(requests, plan, rng)
    index = campaign.replicate_count
    loaded = any(r.load_cache_path for r in requests.values())
    campaign.replicates.append(replace(replicate, cold_seconds=cold_seconds, loaded_cache=loaded))
    if proof is not None:
        proof.take(requests, runs, campaign.replicate_count)
    for name in campaign.measured():
        run = runs.get(name)
        record = run.record() if run is not None else None
        campaign.runs[name].append(record)
        if partners or rules.reference in campaign.partners:
            # Where the reference ran in each subject's group (the 'pairs' design), the subject's ratio pairs with
            # that run of the reference, not with the reference's run in another group.
            column = campaign.partners.setdefault(rules.reference, {}).setdefault(name, [])
            column.extend([None] * (index - len(column)))
            partner = partners.get(name)
            column.append(partner.record() if partner is not None else None)
        if run is not None:
            campaign.environment = campaign.environment or dict(run.environment)
        if record is not None and on_run:
            on_run(name, index, record)


def _peak(record: RunRecord | None) -> float | None:
    """The most memory a subject's first run needed: its steady peak, or its compile-time peak where that is more
    (a replicate's processes start together and compile, or load, side by side), and on a GPU what its allocator
    reserved, where that is more: a subject stopped for another's window keeps its cached blocks."""
    if record is None:
        return None
    figures = (
        record.peak_memory_mb,
        record.compile_peak_memory_mb,
        record.peak_reserved_mb,
        record.compile_peak_reserved_mb,
    )
    peaks = [p for p in figures if p is not None]
    return max(peaks) if peaks else None


def _free_mb(campaign: Campaign) -> float | None:
    """What the device had free for the subjects: the most any first run saw beside its own use."""
    seen = [
        (r.device_free_mb or 0.0) + (r.peak_memory_mb or 0.0)
        for r in campaign.cold.values()
        if r.device_free_mb is not None
    ]
    return max(seen) if seen else None
