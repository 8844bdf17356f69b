"""The measurement engine: first runs, then replicates of paired windows until the question is decided.

`measure` is what search confirmation, `autotune validate`, `autotune retune` and the
benchmark call. It

1. runs every subject that has no first run yet alone and cold, one after another, in a
   cache folder of its own (`Campaign.cold`); a subject that fails there is not measured again;
2. chooses who lives together from the first runs' memory (`co_residence`);
3. runs replicates (`run_replicate`): new processes from the warm folders, turns window by
   window; the first `PROBE_REPLICATES` hold `CampaignRules.windows` windows each, later ones as many as
   the variance components and the costs of a window and of a replicate say
   (`windows_per_replicate`);
4. with `race`, leaves out of later replicates the subjects that no longer bear on the question
   (`retire`): a configuration decided slower than the leader or than `reference`, eager
   decided slower than `reference`. The leader and `reference` always run;
5. looks after the replicates it planned (`CampaignRules.looks`; by default, and in a search's
   confirmation, after every one from `min_replicates`), and stops
   at a look where the leading configuration's ratio to `reference` is decided (a gain, a loss,
   or equivalent within +/- `decide_within`) and, with `precision`, its interval is that narrow;
   with `futility`, also where no subject can be shown faster than `reference` any more; or when
   `max_replicates` replicates or `seconds` of measurement are spent, and says which
   (`Campaign.stopped`);
6. sets aside a replicate measured on a busy machine and runs it again, up to `CampaignRules.reruns` times
   (`autotune.measure.engine._spoiled`).

Every planned look and every configuration compared counts against the campaign's error
(`Campaign.looks`, `autotune.measure.stats.Looks`): the intervals it judges and prints are
simultaneous over them, so stopping at whichever look decided first does not make a false gain
likelier. The stop for want of a gain claims nothing and spends no error.

Where runs happen is a `Lab`: worker processes (`Processes`), or stand-ins that draw figures
from a known distribution (`examples.decision_error`), which run this very engine.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from autotune.measure.engine._callbacks import ReplicateCallback, RunCallback
from autotune.measure.engine._campaign import Campaign, start
from autotune.measure.engine._harness import Harness, Subject
from autotune.measure.engine._lab import Lab, Processes
from autotune.measure.engine._next_replicate import next_replicate
from autotune.measure.engine._proof import CacheProof, path_name
from autotune.measure.engine._racing import retire
from autotune.measure.engine._replicate import expected_replicate_seconds
from autotune.measure.engine._rules import CampaignRules
from autotune.measure.engine._sizing import next_seconds, next_windows
from autotune.measure.engine._spoiled import measured_again
from autotune.measure.engine._starts import cache_folder, cold_compiles, first_runs, warm_requests
from autotune.measure.engine._stopping import measurable, plan_looks, why_spent, why_stop
from autotune.measure.stats import Objective

__all__ = ["measure"]


def measure(
    harness: Harness,
    subjects: Sequence[Subject],
    *,
    objective: Objective,
    rules: CampaignRules | None = None,
    on_run: RunCallback | None = None,
    on_replicate: ReplicateCallback | None = None,
    campaign: Campaign | None = None,
    cache_root: str | Path | None = None,
    seed: int = 0,
    lab: Lab | None = None,
    cache_proof: CacheProof | None = None,
) -> Campaign:
    """Measure `subjects` against each other; see the module docstring.

    Given an earlier `campaign` of the same subjects, its replicates count and more are added,
    and its looks stay those it was planned with. `cache_root` holds the cache folders of
    subjects that have none (default: a temporary folder, removed at the end). With
    `cache_proof`, the first two replicates also save each configuration's compile artifacts and
    start the leader from its saved file (`CacheProof`), which the proof records.
    """
    rules = rules or CampaignRules()
    lab = lab or Processes()
    campaign = campaign if campaign is not None else start(harness, subjects, objective)
    rng = random.Random(seed + 7919 * campaign.replicate_count)
    with cache_folder(cache_root) as root:
        folders = {
            name: s.cache_dir or str(root / path_name(name))
            for name, s in campaign.subjects.items()
            if s.same_as is None
        }
        if cache_root is not None:
            # A campaign continued later (a retune making sure of a regression) finds its subjects' folders again.
            for name, folder in folders.items():
                campaign.subjects[name] = replace(campaign.subjects[name], cache_dir=folder)
        first_runs(harness, campaign, folders, on_run, lab)
        held, asked = False, rules
        planning = campaign.looks is None
        if planning:
            # Planned once the first runs say what a replicate costs, before any replicate is seen.
            firsts = {name: campaign.cold.get(name) for name in campaign.racing()}
            expected = expected_replicate_seconds(firsts, rules.windows, harness.protocol.window_seconds)
            if rules.cold_compiles:
                expected += sum(r.compile_seconds or 0.0 for r in firsts.values() if r is not None)
            campaign.looks = plan_looks(campaign, asked, expected)
            held = campaign.looks.last < asked.max_replicates  # the seconds, not --max-replicates, set the last look
            rules = replace(asked, max_replicates=campaign.looks.last)
        elif campaign.looks is not None and rules.max_replicates > campaign.looks.last:
            # A campaign continued (a retune making sure of a regression) stops at the last look it planned: past it,
            # no error is left to spend.
            last = campaign.looks.last
            rules = replace(rules, min_replicates=min(rules.min_replicates, last), max_replicates=last)
        requests = warm_requests(harness, campaign, folders)
        started = lab.clock()
        while campaign.replicate_count < rules.max_replicates and measurable(campaign):
            if rules.race:  # before a replicate: only one that runs can leave anyone out
                retire(campaign, rules.reference, rules.decide_within)
            if on_replicate:
                on_replicate(campaign, rules)
            cold = cold_compiles(harness, campaign, root, rng, lab, on_run) if rules.cold_compiles else 0.0
            next_replicate(harness, campaign, requests, rules, rng, on_run, lab, cold, cache_proof)
            if measured_again(campaign, rules.reruns, cache_proof):
                continue  # spoiled by a busy machine: set aside, not counted (`_spoiled`)
            if planning and campaign.replicate_count == 1 and asked.seconds is not None and campaign.replicates:
                # Planned again from what the first replicate cost, not the first runs' guess at it: no look has been
                # taken yet (one replicate decides nothing), so the error is still all to spend.
                campaign.looks = plan_looks(campaign, asked, next_seconds(campaign, campaign.replicates[-1].windows))
                held = campaign.looks.last < asked.max_replicates
                rules = replace(rules, max_replicates=campaign.looks.last)
            ahead = next_seconds(campaign, next_windows(campaign, rules, harness))
            why = why_stop(campaign, rules, lab.clock() - started, ahead)
            if why:
                campaign.stopped = why
                break
        else:
            campaign.stopped = campaign.stopped or why_spent(campaign, rules, held)
    return campaign
