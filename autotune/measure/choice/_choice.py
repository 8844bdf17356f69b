"""What gets exported: never worse than the baselines, and the figures best.yaml records for it.

The exported configuration is the best of {eager, plain torch.compile, every confirmed
configuration}, judged on one campaign's paired replicates:

* a configuration is exported only when its ratio to plain torch.compile is decided a gain
  (`outcome`): its campaign's simultaneous interval lies wholly above 1 + `GAIN_MARGIN` (1.015)
  and its estimate above the +/- `within` band, over at least two replicates; the best such one
  by its estimate wins;
* otherwise plain torch.compile is exported (`CompileConfig()`), unless eager was decided a
  gain over plain compile the same way, or plain compile failed and the failure was reproduced
  (`Campaign.reproduced_failure`: one failed replicate decides nothing), in which case nothing
  is compiled. A configuration that failed once is never exported.

The verdict says in words what was decided for the best configuration against plain
compile: a gain, a loss, equivalent (its interval inside the +/- `within` band), or
undecided within the measurement's budget.

`metrics` is the one builder of best.yaml's `metrics` section, for search, export and retune.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from autotune.measure.engine import BASELINES, Campaign
from autotune.measure.format import interval as show_interval
from autotune.measure.report import break_even, break_even_text, confirmation_rows
from autotune.measure.stats import BAND, Interval, gain_margin, outcome
from autotune.runtime.config import CompileConfig

__all__ = ["BASELINE_FIELDS", "Choice", "baseline_figures", "choose", "metrics"]

BASELINE_FIELDS = (
    "samples_per_second",
    "steady_samples_per_second",
    "batches_per_second",
    "compile_seconds",
    "peak_memory_mb",
    "memory_kind",
    "graphs",
    "graph_breaks",
    "recompiles",
    "fresh_recompiles",
    "state",
    "reason",
)
"""What best.yaml keeps of a baseline's median run."""


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The exported subject and why."""

    subject: str
    """'eager', 'compile' or a configuration's subject name (e.g. 'trial 7')."""
    exported: str
    """What the user gets, in words: 'trial 7', 'plain torch.compile' or 'no compilation'."""
    config: CompileConfig
    """The configuration written to best.yaml (scope 'none' for no compilation)."""
    trial: int | None
    verdict: str
    """One sentence: what is exported and why."""
    decision: str = "undecided"
    """What the campaign decided for the best configuration against plain torch.compile: one of OUTCOMES."""


def choose(campaign: Campaign, *, min_gain: float = 0.0, within: float = BAND) -> Choice:
    """The subject to export from a campaign that measured both baselines and the candidates.

    The verdict ends with when the exported subject's compile time is paid back against eager.
    """
    choice = _choose(campaign, min_gain=min_gain, within=within)
    return replace(choice, verdict=f"{choice.verdict} {pay_back_sentence(campaign, choice.subject)}".strip())


def pay_back_sentence(campaign: Campaign, name: str) -> str:
    """When `name`'s compile time is paid back against eager, and whether within a time-to objective's steps."""
    figures = break_even(campaign, name, "eager")
    if figures is None:
        return ""
    cost = f"Its {figures['compile_seconds']:.0f} s of compiling"
    steps, horizon = figures["steps"], campaign.objective.horizon
    if steps is None:
        return f"{cost} never pays back against eager: it does not run faster than eager."
    text = f"{cost} pays back against eager after {break_even_text(figures)}"
    if horizon is not None and steps > horizon:
        text += f", more than the {horizon:,} steps of the objective: over {horizon:,} steps, eager finishes first"
    return text + "."


def _choose(campaign: Campaign, *, min_gain: float, within: float) -> Choice:
    eager_vs_compile = campaign.ratio("eager", "compile")
    # Plain compile's failure hands eager the lead only once it is reproduced: one failed replicate is no evidence.
    compile_failed = campaign.reproduced_failure("compile")
    eager_leads = compile_failed is not None or outcome(eager_vs_compile, within) == "gain"
    candidates = []
    for name, subject in campaign.subjects.items():
        if name in BASELINES or subject.config is None or campaign.failure(name) is not None:
            continue
        if name in campaign.retired:
            continue  # decided slower than another configuration, or than plain compile: it left the race
        versus = campaign.ratio(name, "compile")
        # Where eager is confirmed faster than plain compile, a configuration must beat eager too.
        if versus is not None and (not eager_leads or _beats(campaign.ratio(name, "eager"), min_gain, within)):
            candidates.append((versus, name))
    best = max(candidates, key=lambda c: c[0].median, default=None)
    # Only a decided gain, over two replicates at least, beyond the band and --min-gain, is exported.
    if best is not None and _beats(best[0], min_gain, within):
        versus, name = best
        subject = campaign.subjects[name]
        assert subject.config is not None
        text = f"{name} is exported: a gain, {show_interval(versus.to_dict())} plain torch.compile"
        eager = campaign.ratio(name, "eager")
        if eager is not None:
            text += f" and {show_interval(eager.to_dict())} eager"
        return Choice(
            subject=name, exported=name, config=subject.config, trial=subject.trial, verdict=text + ".", decision="gain"
        )
    decision = outcome(best[0], within) if best is not None else "undecided"
    why = _why_no_trial(best, campaign, within) if best is not None or not eager_leads else _why_not_eager(campaign)
    if eager_leads:
        reason = (
            f"plain torch.compile failed ({compile_failed.reason}) "
            f"{campaign.failure_note('compile') or 'in its first, cold run'}"
            if compile_failed is not None
            else f"eager ran {show_interval(eager_vs_compile.to_dict() if eager_vs_compile else None)} plain torch.compile"
        )
        return Choice(
            subject="eager",
            exported="no compilation",
            config=CompileConfig(scope="none"),
            trial=None,
            verdict=f"No compilation is exported: {reason}, and {why}.",
            decision=decision,
        )
    return Choice(
        subject="compile",
        exported="plain torch.compile",
        config=CompileConfig(),
        trial=None,
        verdict=f"Plain torch.compile is exported: {why}.",
        decision=decision,
    )


def _beats(versus: Interval | None, min_gain: float, within: float) -> bool:
    """Whether a ratio is a decided gain (see `outcome`) whose whole interval is above 1 + `min_gain`."""
    return versus is not None and outcome(versus, within) == "gain" and versus.low > 1.0 + min_gain


def _why_not_eager(campaign: Campaign) -> str:
    """Why no configuration is exported when eager leads plain compile: none is confirmed faster than eager."""
    measured = [n for n in campaign.subjects if n not in BASELINES and campaign.failure(n) is None]
    if not measured:
        return _why_no_trial(None, campaign)
    ratios = [(campaign.ratio(n, "eager"), n) for n in measured]
    versus, name = max(
        ((r, n) for r, n in ratios if r is not None), key=lambda c: c[0].median, default=(None, measured[0])
    )
    return f"no configuration beat eager (the best, {name}, ran {show_interval(versus.to_dict() if versus else None)} eager)"


def _why_no_trial(best: tuple[Interval, str] | None, campaign: Campaign, within: float = BAND) -> str:
    if best is None:
        measured = [n for n in campaign.subjects if n not in BASELINES]
        return "no configuration completed its confirmation runs" if measured else "no configuration was confirmed"
    versus, name = best
    shown = show_interval(versus.to_dict())
    said = outcome(versus, within)
    if said == "equivalent":
        return f"the best configuration, {name}, is equivalent to it: {shown}, inside +/-{within:.0%}"
    if said == "loss":
        return f"no configuration beat it: the best, {name}, is slower, {shown}"
    if said == "gain":  # above 1, but not by the --min-gain asked for
        return f"the best configuration, {name}, gained less than asked: {shown}"
    if versus.median <= 1.0:
        return f"no configuration beat it: the best, {name}, ran {shown}, undecided within the measurement's budget"
    if versus.replicates < 2:
        return f"the best configuration, {name}, ran {shown} in one replicate, which says nothing of the noise"
    if versus.low > 1.0 and versus.median <= 1.0 + within:
        return (
            f"the best configuration, {name}, ran {shown}: faster, but by less than +/-{_percent(within)} as far as the "
            "measurement tells, not yet told from equivalence"
        )
    if versus.low > 1.0:
        return (
            f"the best configuration, {name}, ran {shown}: faster, but the measurement is not sure of "
            f"{_percent(gain_margin(within))} (a gain needs the interval's lower end above {1 + gain_margin(within):.3f}), "
            "undecided within the measurement's budget"
        )
    return (
        f"the best configuration, {name}, ran {shown}: undecided within the measurement's budget, "
        "an interval that does not exclude no gain"
    )


def baseline_figures(campaign: Campaign, name: str) -> dict[str, Any]:
    """A baseline's figures for best.yaml: its median run, and every run's throughput."""
    record = campaign.median_run(name)
    if record is None:
        failure = campaign.failure(name)
        return {"state": "failed", "reason": failure.reason if failure else "not measured", "runs": []}
    data = record.to_dict()
    figures = {k: data[k] for k in BASELINE_FIELDS if k in data}
    figures["compile_seconds"] = campaign.compile_seconds(name)
    figures["compile_split"] = _cold_split(campaign, name)
    figures["runs"] = [r.samples_per_second for r in campaign.complete_runs(name)]
    return figures


def _cold_split(campaign: Campaign, name: str) -> dict[str, float]:
    """Where the subject's cold compile went (its first run's split; a warm replicate's only when none is known)."""
    subject = campaign.subjects.get(name)
    first = campaign.cold.get(subject.same_as or name) if subject is not None else None
    if first is not None and first.compile_split:
        return dict(first.compile_split)
    runs = campaign.complete_runs(name)
    return dict(runs[0].compile_split) if runs and runs[0].compile_split else {}


def metrics(campaign: Campaign, choice: Choice, *, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """best.yaml's `metrics`: the exported subject's figures, its ratios with intervals, the verdict and the noise."""
    record = campaign.median_run(choice.subject)
    runs = campaign.complete_runs(choice.subject)
    figures: dict[str, Any] = {
        "exported": choice.exported,
        "subject": choice.subject,
        "verdict": choice.verdict,
        "trial": choice.trial,
        "objective": str(campaign.objective),
        "unit": campaign.objective.unit,
        "value": campaign.value(choice.subject),
        "confirmed": True,
        "decision": choice.decision,
        # The method the figures were measured with: a campaign stored by an earlier autotune keeps its own (or none).
        "method": dict(campaign.method) if campaign.method is not None else None,
        "replicates": campaign.replicate_count,
        "design": campaign.design(),
        "noise": campaign.noise(),
        "confirmation": confirmation_rows(campaign),
        "break_even": {f"vs_{r}": break_even(campaign, choice.subject, r) for r in ("eager", "compile")},
    }
    if record is not None:
        data = record.to_dict()
        windows = [w for r in runs for w in r.windows]
        figures.update(
            {k: data.get(k) for k in ("samples_per_second", "batches_per_second", "steady_samples_per_second")}
        )
        figures["samples_per_second"] = statistics.median(r.samples_per_second for r in runs if r.samples_per_second)
        figures["spread"] = {
            "min": min(windows, default=None),
            "median": statistics.median(windows) if windows else None,
            "max": max(windows, default=None),
            "windows": len(windows),
        }
        figures["compile_seconds"] = campaign.compile_seconds(choice.subject)
        figures["compile_split"] = _cold_split(campaign, choice.subject)
        figures.update(
            {
                k: data.get(k)
                for k in ("peak_memory_mb", "memory_kind", "graphs", "graph_breaks", "recompiles", "fresh_recompiles")
            }
        )
    for reference in BASELINES:
        versus = campaign.ratio(choice.subject, reference) if choice.subject != reference else None
        figures[f"vs_{reference}"] = versus.to_dict() if versus else None
        figures[f"speedup_vs_{reference}"] = (
            round(versus.median, 4) if versus else (1.0 if choice.subject == reference else None)
        )
    figures.update(extra or {})
    return figures


def _percent(share: float) -> str:
    """0.02 as '2%', 0.015 as '1.5%', 0.005 as '0.5%'."""
    return f"{share:.1%}".replace(".0%", "%")
