"""The benchmark: is autotune's winner faster than eager, plain torch.compile and careful hand-tuning, and how
long did it take to find?

For each workload it runs one study (`--trials` trials), takes the best trial after the
first N trials for several N, and measures eager, plain `torch.compile`, every applicable
recipe from examples/recipes/ and those trials with the measurement engine `autotune search`
confirms with: each subject first alone and cold, then replicates in which all of them live
side by side and take turns window by window on the same batches, ratios as geometric means
over replicates with 95% t-intervals, replicates added until the best is decided against
plain compile (a gain, a loss, or equivalent within 2%) or the budget is spent. What autotune exports after
N trials is decided by the same rule as `autotune search`: the trial only when its interval
against plain compile lies above 1, else plain compile (or eager when eager beat it). On one workload it also runs a reference search
(brute force over the `quick` space: every configuration once, up to --reference-trials) and counts how many trials autotune needed to
reach 98% of the reference best. It writes a Markdown table and the raw JSON to
outputs/benchmarks/.

    python examples/benchmark.py --size tiny --trials 20
    python examples/benchmark.py --smoke          # one small workload, one trial: checks the pipeline
    python examples/benchmark.py --workloads mypkg.tune:model --trials 20   # a workload of one's own
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from autotune.errors import AutotuneError, ConfigError
from autotune.measure import Campaign, CampaignRules, Harness, Subject, Throughput, choose, measure
from autotune.measure.format import interval
from autotune.measure.stats import BAND, outcome
from autotune.measure.tasks import read_recipes, without_cuda_graphs
from autotune.runtime import environment
from autotune.runtime.config import CompileConfig
from autotune.runtime.device import parse_device
from autotune.study.report import pruning_savings, savings_text
from autotune.study.search import SearchOptions, search
from autotune.study.storage import read_study_record, record_of
from autotune.trial.request import check_device
from autotune.workload import resolve

WORKLOADS = {
    "captioning_static": "examples.captioning:captioning_static",
    "captioning_dynamic": "examples.captioning:captioning_dynamic",
    "gpt2_generate": "examples.gpt2_generate:gpt2_generate",
    "bert_classify": "examples.bert_classify:bert_classify",
    "convnet": "examples.convnet:convnet",
    "toy": "examples.toy:model",
}
RECIPES = Path(__file__).resolve().parent / "recipes"
PHASES = ("start", "build", "compile", "measure")
AGREE_WITHIN = 0.05
"""A search-time ratio agrees with its confirmation inside the confirmed interval or within 5% of its estimate."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.smoke:
        args.workloads = args.workloads or ["convnet"]
        args.space, args.trials, args.checkpoints = "quick", 1, [1]
        args.reference, args.replicates, args.max_replicates, args.recipes = "", 1, 1, ["regional"]
        # One trial must complete for the pipeline to be checked, however a busy machine makes it look.
        args.pruner, args.slow_ratio = "none", 0.0
    args.workloads = args.workloads or list(WORKLOADS)
    checkpoints = sorted({n for n in args.checkpoints if n <= args.trials} | {args.trials})
    os.environ["AUTOTUNE_EXAMPLE_SIZE"] = args.size
    device = check_device(args.device)
    out = Path(args.out)
    runs_dir = out / "runs" / f"{args.size}-{device.split(':')[0]}"
    started = time.monotonic()
    results: dict[str, Any] = {
        "machine": _machine(device),
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "size": args.size,
        "trials": args.trials,
        "checkpoints": checkpoints,
        "space": args.space,
        "rounds": args.replicates,
        "smoke": args.smoke,
        "workloads": {},
    }
    previous = _previous(out, args, device)
    if previous:
        # A rerun with the same settings keeps the workloads already measured, as a search resumes its study.
        results["workloads"] = previous["workloads"]
        results["date"] = previous["date"]
    for name in args.workloads:
        if name in results["workloads"]:
            print(f"== {name}: already measured in this run's results, kept", file=sys.stderr, flush=True)
            # The runs are kept; their intervals and the export decisions follow the current statistics.
            results["workloads"][name] = _reanalysed(results["workloads"][name])
            continue
        print(f"== {name}", file=sys.stderr, flush=True)
        results["workloads"][name] = bench_workload(
            name, WORKLOADS.get(name, name), args, checkpoints, device, runs_dir
        )
        # A rerun adds workloads to results started earlier: each says when it was measured.
        results["workloads"][name]["measured"] = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
        _write(out, results, args, device)
    if args.reference:
        print(f"== reference search on {args.reference}", file=sys.stderr, flush=True)
        results["reference"] = reference(
            args.reference, results["workloads"].get(args.reference), args, device, runs_dir
        )
    results["wall_seconds"] = round(time.monotonic() - started, 1)
    paths = _write(out, results, args, device)
    print(f"wrote {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0


def bench_workload(
    name: str, spec: str, args: argparse.Namespace, checkpoints: list[int], device: str, runs_dir: Path
) -> dict[str, Any]:
    """One study, then interleaved measurements of baselines, recipes and the winners after N trials."""
    started = time.monotonic()
    folder = _folder(name)
    result = search(
        SearchOptions(
            model=spec,
            space=args.space,
            trials=args.trials,
            device=device,
            out=str(runs_dir / folder),
            study_name=f"bench-{folder}",
            pruner=args.pruner,
            slow_ratio=args.slow_ratio,
            confirm=0,
            compile_cache=False,
            doctor=False,  # the benchmark compares speed; `autotune doctor` explains a workload
            seed=args.seed,
            trial_timeout=args.trial_timeout,
        ),
        progress=_progress,
    )
    assert result is not None, "a SQLite study's search always confirms and exports"
    search_seconds = time.monotonic() - started
    study = optuna.load_study(
        study_name=f"bench-{folder}", storage=f"sqlite:///{(runs_dir / folder / 'study.db').resolve()}"
    )
    trials = study.get_trials(deepcopy=False)
    workload = resolve(spec)
    harness = Harness(
        spec=spec,
        summary=workload.summary(spec, workload.draw_batches(seed=args.seed)),
        device=device,
        seed=args.seed,
        timeout=args.trial_timeout,
    )
    subjects = Subject.baselines()
    described: dict[str, str] = {"eager": "no compilation", "compile": "torch.compile(model)"}
    for recipe in read_recipes(RECIPES):
        if args.recipes is not None and recipe.name not in args.recipes:
            continue
        config, note = recipe.whole(), ""
        if config.uses_cuda_graphs and not parse_device(device).offers("triton.cudagraphs"):
            config, note = without_cuda_graphs(config), " (CUDA graphs removed: CPU)"
        try:
            harness.source(config)
        except ConfigError:
            continue  # the recipe names inputs, modules or blocks this workload does not have
        subjects.append(Subject(name=f"recipe {recipe.name}", config=config))
        described[f"recipe {recipe.name}"] = config.describe() + note
    # The study's seeded recipes (autotune.study.search._seeds): the best one is measured beside the winners,
    # so the table shows what the search added over where it started. Plain compile is the baseline.
    seeded = [
        t
        for t in trials
        if record_of(t).recipe not in (None, "plain") and t.state.name == "COMPLETE" and t.value is not None
    ]
    best_seed = max(seeded, key=lambda t: t.value, default=None)
    names: dict[int, str] = {}
    if best_seed is not None:
        names[best_seed.number] = f"recipe {record_of(best_seed).recipe} (seeded, trial {best_seed.number})"
    winners: dict[int, str] = {}
    for n in checkpoints:
        best = _best_within(trials, n)
        if best is not None:
            plain = record_of(best).recipe == "plain"
            winners[n] = "compile" if plain else names.setdefault(best.number, f"trial {best.number}")
    for number, name in sorted(names.items()):
        trial = trials[number]
        config = CompileConfig.from_dict(record_of(trial).config)
        subjects.append(Subject(name=name, config=config, created=record_of(trial).created, trial=trial.number))
        described[name] = config.describe()
    print(f"   measuring {len(subjects)} subjects, {args.replicates} replicate(s) or more", file=sys.stderr, flush=True)
    campaign = measure(
        harness,
        subjects,
        objective=Throughput(),
        rules=CampaignRules(min_replicates=args.replicates, max_replicates=max(args.max_replicates, args.replicates)),
        on_run=lambda name, index, r: print(
            f"   {'first run' if index < 0 else f'replicate {index + 1}'}: {name}: {_outcome(r)}",
            file=sys.stderr,
            flush=True,
        ),
        seed=args.seed,
    )
    print(f"   {campaign.stopped}", file=sys.stderr, flush=True)
    rows, exported = _analyse(campaign, described, {str(n): name for n, name in winners.items()})
    finished = [
        t for t in trials if t.state.name in ("COMPLETE", "PRUNED", "FAIL") and record_of(t).duplicate_of is None
    ]
    return {
        "spec": spec,
        "rows": rows,
        "winner_after": {str(n): name for n, name in winners.items()},
        "exported_after": exported,
        "rounds": campaign.replicate_count,
        "design": campaign.design(),
        "noise": campaign.noise(),
        "campaign": campaign.to_dict(),
        "search_seconds": round(search_seconds, 1),
        # What the search itself measured of each confirmed trial: its warm restart paired with the live plain
        # compile, the reference's own level taken out (autotune.measure.tasks.LiveReference.level); raw beside it.
        "search_time": {name: _search_ratio(record_of(trials[number]).flat()) for number, name in names.items()},
        "search_time_raw": {name: record_of(trials[number]).paired_ratio for number, name in names.items()},
        "reference_levels": {
            device: found.levels for device, found in read_study_record(study).reference_levels.items()
        },
        "trial_states": {s: sum(1 for t in trials if t.state.name == s) for s in ("COMPLETE", "PRUNED", "FAIL")},
        "failure_reasons": _count((record_of(t).reason or "?") for t in trials if t.state.name == "FAIL"),
        "pruning": pruning_savings(trials, harness.protocol.to_dict()),
        "trial_seconds": round(sum(record_of(t).own.wall_seconds for t in finished), 1),
        "overhead_seconds": {
            phase: round(statistics.median([record_of(t).own.phase_seconds.get(phase, 0.0) for t in finished]), 2)
            for phase in PHASES
        }
        if finished
        else {},
        "history": [
            {
                "number": t.number,
                "state": t.state.name,
                "value": t.value,
                "description": record_of(t).description,
            }
            for t in trials
        ],
        "search_best_trial": result.best_number,
        "seeded": [
            {"number": t.number, "recipe": record_of(t).recipe, "state": t.state.name, "value": t.value}
            for t in trials
            if record_of(t).recipe is not None
        ],
        "best_seeded_recipe": names.get(best_seed.number) if best_seed is not None else None,
    }


def reference(
    name: str, bench: dict[str, Any] | None, args: argparse.Namespace, device: str, runs_dir: Path
) -> dict[str, Any]:
    """Brute force over the quick space, then: after how many trials did the benchmark's study reach 98% of its best?"""
    spec, folder = WORKLOADS.get(name, name), _folder(name)
    started = time.monotonic()
    search(
        SearchOptions(
            model=spec,
            space="quick",
            trials=args.reference_trials,
            device=device,
            out=str(runs_dir / f"{folder}-reference"),
            study_name=f"reference-{folder}",
            sampler="bruteforce",
            pruner="none",
            confirm=0,
            compile_cache=False,
            doctor=False,  # the benchmark compares speed; `autotune doctor` explains a workload
            seed=args.seed,
            trial_timeout=args.trial_timeout,
        ),
        progress=_progress,
    )
    study = optuna.load_study(
        study_name=f"reference-{folder}",
        storage=f"sqlite:///{(runs_dir / f'{folder}-reference' / 'study.db').resolve()}",
    )
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    distinct = [t for t in complete if record_of(t).duplicate_of is None]
    best = max((t.value for t in complete), default=None)
    reached = None
    if best and bench:
        for entry in bench["history"]:
            if entry["state"] == "COMPLETE" and entry["value"] >= 0.98 * best:
                reached = entry["number"] + 1
                break
    return {
        "workload": name,
        "space": "quick",
        "configurations_measured": len(distinct),
        "best_samples_per_second": best,
        "best_description": record_of(max(complete, key=lambda t: t.value)).description if complete else None,
        "benchmark_study_trials_to_98_percent": reached,
        "benchmark_study_trials": args.trials,
        "seconds": round(time.monotonic() - started, 1),
    }


def _best_within(trials: list[optuna.trial.FrozenTrial], n: int) -> optuna.trial.FrozenTrial | None:
    complete = [t for t in trials if t.number < n and t.state.name == "COMPLETE" and t.value is not None]
    best = max(complete, key=lambda t: t.value, default=None)
    if best is not None and record_of(best).duplicate_of is not None:
        return trials[record_of(best).duplicate_of]
    return best


def _analyse(
    campaign: Campaign, described: dict[str, str], winners: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each subject's figures and intervals, and what `autotune search` would export after N trials."""
    rows = {name: _figures(campaign, name, described.get(name, name)) for name in campaign.subjects}
    exported = {}
    for n, name in winners.items():
        choice = choose(campaign.only(list(dict.fromkeys(["eager", "compile", name]))))
        exported[n] = {
            "winner": name,
            "subject": choice.subject,
            "exported": choice.exported,
            "verdict": choice.verdict,
            "decision": choice.decision,
        }
    return rows, exported


def _search_ratio(attrs: dict[str, Any]) -> float | None:
    """A trial's search-time ratio to plain compile: anchored where the search anchored it, else its raw pairing."""
    value = attrs.get("speedup_vs_compile", attrs.get("paired_ratio"))
    return float(value) if value is not None else None


def search_agreement(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Each confirmed trial's search-time ratio to plain compile beside its confirmed one, and whether they agree.

    They agree when the search-time ratio lies inside the confirmed interval or within
    `AGREE_WITHIN` of its estimate. Trials without a search-time figure, or confirmed on fewer
    than two replicates, are left out: there is nothing to compare.
    """
    rows = []
    for name, ratio in (bench.get("search_time") or {}).items():
        confirmed = (bench["rows"].get(name) or {}).get("vs_compile")
        if ratio is None or not confirmed or confirmed.get("replicates", confirmed.get("rounds", 0)) < 2:
            continue
        inside = confirmed["low"] <= ratio <= confirmed["high"]
        close = abs(ratio / confirmed["median"] - 1.0) <= AGREE_WITHIN
        rows.append({"subject": name, "search": ratio, "confirmed": confirmed, "agrees": inside or close})
    return rows


def rank_swaps(
    agreement: list[dict[str, Any]], band: float = BAND, campaign: Campaign | None = None
) -> list[tuple[str, str]]:
    """Pairs (a, b) the search put a ahead of b and the confirmation b ahead of a, each by more than the band.

    With the confirmation's `campaign`, b is ahead of a only where the confirmation decides it: b's
    paired ratio to a, over the replicates they shared, is a gain at the band. Two medians a few
    percent apart inside intervals of +/-15% are not an order the confirmation gives, so the
    search cannot have swapped it (`unordered_pairs` names those).
    """
    return [
        (a["subject"], b["subject"])
        for a, b in _reversed_medians(agreement, band)
        if campaign is None or _decided_ahead(campaign, b["subject"], a["subject"], band)
    ]


def unordered_pairs(agreement: list[dict[str, Any]], campaign: Campaign, band: float = BAND) -> list[tuple[str, str]]:
    """Pairs whose medians the search and the confirmation order oppositely, where the confirmation decides nothing."""
    return [
        (a["subject"], b["subject"])
        for a, b in _reversed_medians(agreement, band)
        if not _decided_ahead(campaign, b["subject"], a["subject"], band)
    ]


def _reversed_medians(agreement: list[dict[str, Any]], band: float) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (a, b)
        for a in agreement
        for b in agreement
        if a["search"] > b["search"] * (1.0 + band)
        and b["confirmed"]["median"] > a["confirmed"]["median"] * (1.0 + band)
    ]


def _decided_ahead(campaign: Campaign, name: str, other: str, band: float) -> bool:
    """Whether the confirmation decides `name` faster than `other`: their paired ratio a gain at `band`."""
    ratio = campaign.ratio(name, other) if {name, other} <= set(campaign.subjects) else None
    return ratio is not None and outcome(ratio, band) == "gain"


def _pair_text(campaign: Campaign, name: str, other: str) -> str:
    ratio = campaign.ratio(name, other)
    return interval(ratio.to_dict() if ratio is not None else None)


def _campaign(bench: dict[str, Any]) -> Campaign | None:
    return Campaign.from_dict(bench["campaign"]) if bench.get("campaign") else None


def _agreement_text(bench: dict[str, Any]) -> str:
    agreement = search_agreement(bench)
    if not agreement:
        return "Search time against confirmation: no trial beyond plain compile was confirmed."
    agreeing = sum(1 for a in agreement if a["agrees"])
    campaign = _campaign(bench)
    swaps = rank_swaps(agreement, campaign=campaign)
    order = (
        "the rank order differs: "
        + "; ".join(f"the search put {a} ahead of {b}, the confirmation {b}" for a, b in swaps)
        if swaps
        else "the rank order is the same wherever the confirmation decides it"
        if len(agreement) > 1
        else "one trial, no order to compare"
    )
    if campaign is not None and (unordered := unordered_pairs(agreement, campaign)):
        order += "; the confirmation does not decide " + "; ".join(
            f"between {a} and {b} (the search put {a} ahead, the confirmation's medians {b}: "
            f"{b} against {a} {_pair_text(campaign, b, a)})"
            for a, b in unordered
        )
    return (
        f"Search time against confirmation: {agreeing} of {len(agreement)} confirmed trial(s) agree "
        f"(the search-time ratio inside the confirmed interval or within {AGREE_WITHIN:.0%} of it); {order}."
        + _anchor_text(bench)
    )


def _anchor_text(bench: dict[str, Any]) -> str:
    """The reference's anchors, and the search-time ratios as they read before the reference's level was taken out."""
    levels = [x for values in (bench.get("reference_levels") or {}).values() for x in values]
    if not levels:
        return ""
    raw = bench.get("search_time_raw") or {}
    unanchored = ", ".join(f"{name} {ratio:.2f}x" for name, ratio in raw.items() if ratio is not None)
    return (
        f" The live reference was anchored by {len(levels)} fresh plain-compile restart(s), which ran "
        f"{', '.join(f'{x:.3f}x' for x in levels)} it; unanchored, the search-time ratios read {unanchored or '–'}."
    )


def _reanalysed(bench: dict[str, Any]) -> dict[str, Any]:
    """A kept workload with its figures recomputed from its recorded runs by the current statistics."""
    campaign = Campaign.from_dict(bench["campaign"])
    described = {name: row.get("description", name) for name, row in bench["rows"].items()}
    rows, exported = _analyse(campaign, described, bench["winner_after"])
    return {**bench, "rows": rows, "exported_after": exported, "noise": campaign.noise()}


def _figures(campaign: Campaign, name: str, description: str) -> dict[str, Any]:
    runs = campaign.complete_runs(name)
    row: dict[str, Any] = {"description": description, "runs": len(campaign.runs.get(name, [])), "complete": len(runs)}
    failure = campaign.failure(name)
    if not runs:
        row["failure"] = f"{failure.reason}: {failure.message[:200]}" if failure else "not run"
        return row
    median = campaign.median_run(name)
    row.update(
        samples_per_second=statistics.median(r.samples_per_second or 0.0 for r in runs),
        compile_seconds=campaign.compile_seconds(name),
        peak_memory_mb=max(r.peak_memory_mb or 0.0 for r in runs),
        memory_kind=runs[0].memory_kind,
        fresh_recompiles=median.fresh_recompiles if median else None,
        noisy_runs=sum(1 for r in runs if r.noisy),
    )
    for reference in ("eager", "compile"):
        versus = campaign.ratio(name, reference) if name != reference else None
        same = {"median": 1.0, "low": 1.0, "high": 1.0, "replicates": len(runs)}
        row[f"vs_{reference}"] = versus.to_dict() if versus else (same if name == reference else None)
    recipes = [n for n in campaign.subjects if n.startswith("recipe") and campaign.complete_runs(n)]
    best_recipe = max(recipes, key=lambda n: campaign.value(n) or 0.0, default=None)
    versus = campaign.ratio(name, best_recipe) if best_recipe and best_recipe != name else None
    row["vs_best_recipe"] = versus.to_dict() if versus else None
    return row


def _write(out: Path, results: dict[str, Any], args: argparse.Namespace, device: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{'smoke' if args.smoke else args.size}-{device.split(':')[0]}"
    json_path = out / f"{stem}.json"
    md_path = out / f"{stem}.md"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    md_path.write_text(render(results))
    return md_path, json_path


def _measured(results: dict[str, Any]) -> bool:
    """Whether the workloads record when each was measured (results written before that do not)."""
    return any(bench.get("measured") for bench in results["workloads"].values())


def render(results: dict[str, Any]) -> str:
    """The Markdown report of a benchmark run."""
    m = results["machine"]
    lines = [
        f"# autotune benchmark ({results['size']}{', smoke run' if results.get('smoke') else ''}, {m['device']})",
        "",
        f"Run {'started ' if _measured(results) else ''}{results['date']} on {machine_text(m)}. Space `{results['space']}`, {results['trials']} trials per workload, at least "
        f"{results['rounds']} replicate(s) of paired windows per subject, each subject first alone and cold. "
        "Throughput is samples/s over one pass of the fresh stream, recompiles included (median over replicates); "
        "ratios are geometric means of paired replicates with 95% t-intervals.",
        "",
    ]
    agreement = {name: search_agreement(bench) for name, bench in results["workloads"].items()}
    compared = [a for rows in agreement.values() for a in rows]
    if compared:
        campaigns = {name: _campaign(bench) for name, bench in results["workloads"].items()}
        swapped = [name for name in results["workloads"] if rank_swaps(agreement[name], campaign=campaigns[name])]
        undecided = [
            name
            for name, campaign in campaigns.items()
            if campaign is not None and unordered_pairs(agreement[name], campaign)
        ]
        lines += [
            f"**Search time against confirmation**: {sum(a['agrees'] for a in compared)} of {len(compared)} confirmed "
            f"trials agree (the search-time ratio inside the confirmed interval or within {AGREE_WITHIN:.0%} of it); "
            + (
                f"the rank order differs where the confirmation decides it in {', '.join(swapped)}"
                if swapped
                else "the rank order is the same in every workload wherever the confirmation decides it"
            )
            + (
                f" (medians ordered oppositely, undecided by the confirmation, in {', '.join(undecided)})."
                if undecided
                else "."
            ),
            "",
        ]
    for name, bench in results["workloads"].items():
        when = [f"Measured {bench['measured']}.", ""] if bench.get("measured") else []
        lines += [f"## {name} (`{bench['spec']}`)", "", *when, *_workload_table(bench), ""]
    ref = results.get("reference")
    if ref:
        reached = ref["benchmark_study_trials_to_98_percent"]
        lines += [
            f"## Reference search ({ref['workload']})",
            "",
            f"A brute-force search of the `{ref['space']}` space, each configuration at most once "
            f"({ref['configurations_measured']} measured in {ref['seconds']:.0f} s): "
            f"best {ref['best_samples_per_second']:.4g} samples/s with {ref['best_description']}. "
            + (
                f"The benchmark's study reached 98% of that after {reached} trial(s)."
                if reached
                else f"The benchmark's study did not reach 98% of that within {ref['benchmark_study_trials']} trials."
            ),
            "",
        ]
    return "\n".join(lines)


def _design_text(bench: dict[str, Any]) -> str:
    design = bench.get("design") or {}
    if not design:
        return f"{bench.get('rounds', '?')} rotated round(s) of fresh processes (the earlier measurement path)"
    windows = design.get("windows_per_replicate") or []
    parts = design.get("components") or {}
    text = f"{design.get('replicates')} replicate(s) of {'/'.join(map(str, windows))} paired windows"
    if parts and parts.get("replicates", 0) >= 2:
        text += f" (window sd {parts['window_sd']}, replicate sd {parts['replicate_sd']})"
    return text + f", {design.get('stopped') or 'stopped'}"


def _span(values: dict[str, Any] | None) -> str:
    return f"{values['min']} to {values['max']}" if values else "–"


def _exported_why(exported: dict[str, Any]) -> str:
    """Why the search's rule exports what it does: the decision on its best trial, or that plain compile was best."""
    if exported.get("winner") == "compile":
        return "the best trial of the search was plain torch.compile itself"
    return str(exported.get("decision", "undecided"))


def _workload_table(bench: dict[str, Any]) -> list[str]:
    lines = [
        "| subject | samples/s | vs plain compile | at search time | vs eager | vs best recipe | compile s "
        "| new-shape compiles | configuration |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    search_time = bench.get("search_time") or {}
    for subject, row in bench["rows"].items():
        if "samples_per_second" not in row:
            lines.append(f"| {subject} | failed | | | | | | | {row['description']}: {row.get('failure', '')} |")
            continue
        at_search = f"{search_time[subject]:.2f}x" if search_time.get(subject) is not None else "–"
        lines.append(
            f"| {subject} | {row['samples_per_second']:.4g} | {interval(row['vs_compile'])} | {at_search} "
            f"| {interval(row['vs_eager'])} | "
            f"{interval(row['vs_best_recipe'])} | {row['compile_seconds'] or 0.0:.1f} | {row.get('fresh_recompiles', '–')} "
            f"| {row['description']} |"
        )
    noise = bench.get("noise") or {}
    exported = ", ".join(
        f"{n} trials → {e['exported']} ({_exported_why(e)})" for n, e in bench.get("exported_after", {}).items()
    )
    states = bench["trial_states"]
    overhead = bench["overhead_seconds"]
    failures = ", ".join(f"{k} {v}" for k, v in bench["failure_reasons"].items())
    lines += [
        "",
        f"**What autotune exports** (the rule of `autotune search`): {exported or 'nothing completed'}.",
        _agreement_text(bench),
        f"Best trial after N trials: {', '.join(f'{n} → {s}' for n, s in bench['winner_after'].items()) or 'none'}.",
        f"Measurement: {_design_text(bench)}; {noise.get('noisy_runs', 0)} run(s) saw the machine busy; "
        f"1-minute load {_span(noise.get('load'))}, calibration probe {_span(noise.get('probe_ms'))} ms.",
        f"Study: {sum(states.values())} trials ({states['COMPLETE']} complete, {states['PRUNED']} pruned, "
        f"{states['FAIL']} failed{': ' + failures if failures else ''}) in {bench['search_seconds']:.0f} s; "
        f"{savings_text(bench)}.",
        "Median per-trial time by phase: "
        + ", ".join(f"{p} {overhead.get(p, 0):.1f} s" for p in PHASES)
        + " (start = process start and imports; build = workload and batches; compile = compile, accuracy check and warm-up).",
    ]
    seeds = bench.get("seeded") or []
    if seeds:
        lines.append(
            "Seeded recipes (the study's first trials): "
            + ", ".join(f"{s['recipe']} (trial {s['number']}, {s['state'].lower()})" for s in seeds)
            + f"; the best measured here: {bench.get('best_seeded_recipe') or 'plain compile'}."
        )
    lines += _versus_seeded(bench)
    slower = _slower_than_recipe(bench)
    return lines + (["", slower] if slower else [])


def _versus_seeded(bench: dict[str, Any]) -> list[str]:
    """The winner after each checkpoint against the best seeded recipe, paired in the same rounds."""
    seed = bench.get("best_seeded_recipe")
    rows = bench["rows"]
    if not seed or seed not in rows or "samples_per_second" not in rows[seed]:
        return []
    lines = ["", "| after N trials | winner | vs best seeded recipe | vs plain compile |", "|---|---|---|---|"]
    for n, name in bench["winner_after"].items():
        row = rows.get(name, {})
        if name == seed:
            versus = "1.00x (the recipe itself)"
        elif name == "compile" and "vs_compile" in rows.get(seed, {}) and rows[seed]["vs_compile"]:
            ratio = rows[seed]["vs_compile"]
            versus = interval(
                {
                    "median": 1 / ratio["median"],
                    "low": 1 / ratio["high"],
                    "high": 1 / ratio["low"],
                    "replicates": ratio.get("replicates", ratio.get("rounds")),  # rounds: results of earlier versions
                }
            )
        else:
            versus = interval(row.get("vs_best_recipe")) if row.get("vs_best_recipe") else "–"
        lines.append(f"| {n} | {name} | {versus} | {interval(row.get('vs_compile')) if row else '–'} |")
    return lines


def _slower_than_recipe(bench: dict[str, Any]) -> str:
    rows = bench["rows"]
    final = list(bench["winner_after"].values())[-1] if bench["winner_after"] else None
    if not final or "vs_best_recipe" not in rows.get(final, {}):
        return ""
    versus = rows[final]["vs_best_recipe"]
    if versus is not None and versus["median"] < 1.0:
        return f"**autotune's best trial is slower than the best recipe here ({interval(versus)}).**"
    return ""


def _workload(text: str) -> str:
    """A --workloads value: a bundled workload's name, or a module:attribute spec."""
    if text in WORKLOADS or ":" in text:
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a bundled workload ({', '.join(WORKLOADS)}) nor a module:attribute spec"
    )


def _folder(name: str) -> str:
    """The name of a workload's study folder: a spec's colon made a dot."""
    return name.replace(":", ".")


def _previous(out: Path, args: argparse.Namespace, device: str) -> dict[str, Any] | None:
    """Results of an earlier run into the same files with the same settings, if any."""
    path = out / f"{'smoke' if args.smoke else args.size}-{device.split(':')[0]}.json"
    if not path.is_file():
        return None
    previous = json.loads(path.read_text())
    same = all(
        previous.get(k) == v for k, v in (("trials", args.trials), ("space", args.space), ("rounds", args.replicates))
    )
    return previous if same else None


def _machine(device: str) -> dict[str, Any]:
    fingerprint = environment.fingerprint("cpu")
    return {
        "device": device,
        "device_name": fingerprint["device_name"] if device == "cpu" else "(see trials)",
        "cores": os.cpu_count(),
        "torch": fingerprint["torch"],
        "python": fingerprint["python"],
        "autotune": fingerprint["autotune"],
        "platform": platform.platform(terse=True),
    }


def machine_text(machine: dict[str, Any]) -> str:
    """'AMD EPYC (2 cores), torch 2.13.0+cpu, Python 3.11.7, autotune 0.1.0'."""
    return (
        f"{machine['device_name']} ({machine['cores']} cores), torch {machine['torch']}, Python {machine['python']}, "
        f"autotune {machine['autotune']}"
    )


def _progress(progress: Any) -> None:
    if progress.message:
        print(f"   {progress.message}", file=sys.stderr, flush=True)


def _outcome(record: Any) -> str:
    if record.complete:
        noisy = f" [noisy: {record.noisy}]" if record.noisy else ""
        return f"{record.samples_per_second:.4g} samples/s, compile {record.compile_seconds or 0.0:.1f} s{noisy}"
    return f"{record.state} {record.reason}"


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", choices=("tiny", "full"), default="tiny", help="example size: tiny (CPU) or full (GPU)")
    p.add_argument("--trials", type=int, default=20, help="trials per workload study (default: 20)")
    p.add_argument(
        "--checkpoints", type=int, nargs="+", default=[5, 10, 20, 40], help="report the winner after these many trials"
    )
    p.add_argument(
        "--workloads",
        nargs="+",
        type=_workload,
        metavar="WORKLOAD",
        help=f"bundled workloads ({', '.join(WORKLOADS)}) or module:attribute specs of your own, as "
        "`autotune search --model` takes them (default: every bundled one; convnet with --smoke)",
    )
    p.add_argument("--space", default="default", help="search space for the studies (default: default)")
    p.add_argument(
        "--reference",
        default="toy",
        help="workload for the exhaustive reference search over the quick space ('' to skip)",
    )
    p.add_argument(
        "--reference-trials", type=int, default=40, help="trial budget of the reference search (default: 40)"
    )
    p.add_argument(
        "--recipes",
        nargs="*",
        default=[],
        help="hand-written recipes from examples/recipes/ to measure too (default: none; the study's seeded "
        "recipes are measured anyway)",
    )
    p.add_argument("--replicates", type=int, default=3, help="replicates of paired windows, at least (default: 3)")
    p.add_argument(
        "--max-replicates", type=int, default=8, help="replicates at most, while the best is undecided (default: 8)"
    )
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pruner", choices=("median", "hyperband", "none"), default="median", help="the studies' pruner")
    p.add_argument("--slow-ratio", type=float, default=0.5, help="prune trials below this fraction of eager")
    p.add_argument("--trial-timeout", type=float, default=900.0)
    p.add_argument(
        "--out", default="outputs/benchmarks", help="where the Markdown and JSON go (default: outputs/benchmarks)"
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="one workload (convnet unless --workloads names one), one trial, one round: checks the pipeline end to end",
    )
    return p


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AutotuneError as exc:
        print(f"benchmark: error: {exc}", file=sys.stderr)
        sys.exit(2)
