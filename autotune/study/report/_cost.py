"""What a search cost: its wall time against the cold compiles no search can skip, and where the rest went.

Every configuration a search tries compiles once, cold, with caches of its own (that is what a
user's first compile costs); no search can take less than those compiles. The rest is what
this search adds to them: the doctor, the baselines' other work, each trial's start-up, checks
and stream pass, its warm restart and its paired windows, the anchors, the confirmation and the
compile-cache runs. The figures are the session's that confirmed and exported: a resumed study's
earlier sessions are not counted.

Every later process of a configuration checks its first steps against what eager computed in
its first run (`autotune.trial.recorded`): a trial's warm restart and every run of the
confirmation's replicates. Those seconds lie inside the warm restarts' and the confirmation's
parts, and are said beside them ("warm restarts 41 s (checks 3 s)"), not added again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from autotune.measure import Campaign
from autotune.study.report._display import duration
from autotune.study.storage import read_study_record, record_of

__all__ = ["SESSION_STAGES", "cost_text", "search_cost"]

SESSION_STAGES = ("doctor", "baselines", "trials", "confirmation", "compile cache")
"""The stages of a search session, in the order it runs them; `search_stages` holds each one's seconds."""


def search_cost(study: optuna.Study) -> dict[str, Any] | None:
    """The exporting session's wall time, its cold compiles, their ratio and the rest by part; None if not recorded.

    The wall time is the session's stages (`SESSION_STAGES`), from the doctor to the compile cache: the start-up
    before them and the export after are left out. With several workers the trials' parts are summed over them,
    so they can exceed the trials' stage, and the ratio can fall below 1.
    """
    study_record = read_study_record(study)
    stages: Mapping[str, float] = study_record.search_stages
    session = study_record.search_session
    if not stages or session is None:
        return None
    records = [record_of(t) for t in study.get_trials(deepcopy=False)]
    ran = [
        r.own.to_dict()
        for r in records
        # The session's own runs: not plain compile's run reused, nor an earlier trial's outcome copied.
        if r.pid == session.pid and r.host == session.host and r.measured
    ]
    plain = float(study_record.baselines.of("compile").compile_seconds or 0.0)
    compiles = [float(t.get("compile_seconds") or 0.0) for t in ran if (t.get("compile_seconds") or 0.0) > 0]
    cold = plain + sum(compiles)
    restarts = windows = others = checks = restart_checks = 0.0
    for figures in ran:
        # The accuracy check of the trial's first run: eager's reference and the compared steps beside the compile.
        checks += float(figures.get("check_seconds") or 0.0)
        # Its warm restart's check of its first steps against that run's record: inside the restart's seconds.
        restart_checks += float(figures.get("restart_check_seconds") or 0.0)
        phases = figures.get("phase_seconds") or {}
        restart, measure = float(phases.get("restart", 0.0)), float(phases.get("measure", 0.0))
        restarts += restart
        windows += measure
        compiled = float(figures.get("compile_seconds") or 0.0)
        # A worker stopped while another of its device measured: that time is the other's, not this trial's.
        own = float(figures.get("wall_seconds") or 0.0) - float(figures.get("paused_seconds") or 0.0)
        others += max(own - compiled - restart - measure, 0.0)
    trials_stage = float(stages.get("trials", 0.0))
    rest = {
        "doctor": float(stages.get("doctor", 0.0)),
        "baselines beyond plain compile's compile": max(float(stages.get("baselines", 0.0)) - plain, 0.0),
        "trials' accuracy checks": checks,
        "trials' starts and stream passes": max(others - checks, 0.0),
        "warm restarts": restarts,
        "paired windows": windows,
        "anchors and the study's bookkeeping": max(trials_stage - sum(compiles) - others - restarts - windows, 0.0),
        "confirmation": float(stages.get("confirmation", 0.0)),
        "compile cache": float(stages.get("compile cache", 0.0)),
    }
    confirmed = study_record.confirmation if stages.get("confirmation") else None
    within = {"warm restarts": restart_checks, "confirmation": _confirmation_checks(confirmed)}
    wall = sum(float(v) for v in stages.values())
    return {
        "wall_seconds": round(wall, 1),
        "cold_compile_seconds": round(cold, 1),
        "cold_compiles": len(compiles) + (1 if plain else 0),
        "ratio": round(wall / cold, 2) if cold > 0 else None,
        "workers": session.workers or 1,
        "rest_seconds": {part: round(seconds, 1) for part, seconds in rest.items()},
        "check_seconds": {part: round(seconds, 1) for part, seconds in within.items()},
    }


def _confirmation_checks(campaign: Campaign | None) -> float:
    """Seconds the confirmation's replicate runs spent checking their first steps against their configuration's
    first run (each process of each replicate, a reference's runs beside other subjects included)."""
    if campaign is None:
        return 0.0
    # A subject that is a baseline (`Subject.same_as`) has that baseline's runs: counted once, as the baseline's.
    runs = [run for name in campaign.measured() for run in campaign.runs.get(name, [])]
    runs += [run for columns in campaign.partners.values() for column in columns.values() for run in column]
    return sum(float(run.check_seconds or 0.0) for run in runs if run is not None)


def cost_text(cost: Mapping[str, Any] | None) -> str:
    """One sentence: the wall time, its ratio to the cold compiles, and where the rest went, with the seconds of
    accuracy checks inside a part beside it; '' when not recorded."""
    if not cost:
        return ""
    ratio = cost.get("ratio")
    over = f", {ratio:.2f}x its " if ratio else ", beside "
    within = cost.get("check_seconds") or {}
    parts = ", ".join(
        f"{part} {duration(s)}" + (f" (checks {duration(within[part])})" if within.get(part, 0.0) >= 0.5 else "")
        for part, s in (cost.get("rest_seconds") or {}).items()
        if s >= 0.5
    )
    workers = int(cost.get("workers") or 1)
    if workers > 1:
        floor, side = f", {workers} workers compiling side by side", f" (trials' parts summed over {workers} workers)"
    else:
        floor, side = ", which one worker cannot do in less", ""
    return (
        f"Cost: {duration(cost['wall_seconds'])} from the doctor to the compile cache{over}"
        f"{duration(cost['cold_compile_seconds'])} of {cost['cold_compiles']} cold compile(s){floor}; "
        f"the rest{side}: {parts or 'none'}."
    )
