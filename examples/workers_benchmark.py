"""The workers benchmark: trials per hour with `--workers 1` and `--workers 2` on one device, and what the
compile bounds save.

For each workload it runs the same study (same seed, space and budget) with one worker and
with two on the same device, and records the trials per hour of each (trials finished over
the time from the first trial's start to the last one's end; the baselines before them are
the same either way) and the best trial each found. The two winners are then measured in
one campaign with eager and plain `torch.compile` (fresh processes, rotated rounds, the path
`autotune search` confirms with), so that "an equally good winner" is a measured statement.

With `--bounds` it also runs one `--objective time-to:N` study twice with one worker: with
the compile budget and the time-to bound, and without either, and compares the compile
seconds spent, and those of the configurations the bounds stopped with what the same
configurations took when nobody stopped them.

Every study lives in `--out`/runs/, so an interrupted benchmark resumes where it stopped:
a study that already holds its trials is not run again.

    python -m examples.workers_benchmark --size tiny --workloads toy captioning_dynamic --trials 8
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import optuna

from autotune.measure import CampaignRules, Harness, Subject, Throughput, measure
from autotune.measure.format import interval
from autotune.runtime.config import CompileConfig
from autotune.study.search import SearchOptions, explore
from autotune.study.search import _loop as trial_loop
from autotune.study.storage import record_of
from autotune.trial.request import check_device
from autotune.workload import resolve
from examples.benchmark import WORKLOADS, _figures, _machine, _progress, machine_text

FINISHED = ("COMPLETE", "PRUNED", "FAIL")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ["AUTOTUNE_EXAMPLE_SIZE"] = args.size
    device = check_device(args.device)
    out = Path(args.out)
    results: dict[str, Any] = _load(out / "results.json")
    results.update(
        machine=_machine(device),
        size=args.size,
        trials=args.trials,
        space=args.space,
        seed=args.seed,
        replicates=args.replicates,
    )
    results.setdefault("workloads", {})
    results.setdefault("load", []).append({"when": _now(), "loadavg": _loadavg(), "event": "start"})
    for name in args.workloads:
        spec = WORKLOADS[name]
        entry = results["workloads"].setdefault(name, {"spec": spec})
        entry.update(trials=args.trials, replicates=args.replicates, space=args.space, seed=args.seed)
        for workers in args.workers:
            key = f"workers_{workers}"
            print(f"== {name}: {args.trials} trials, {workers} worker(s)", file=sys.stderr, flush=True)
            entry[key] = study_figures(
                _study(args, name, spec, device, out / "runs" / f"{name}-w{workers}", workers=workers)
            )
            _save(out, results)
        if "campaign" not in entry:
            entry["campaign"] = compare_winners(args, spec, device, entry)
            _save(out, results)
    if args.bounds:
        name = args.bounds
        spec = WORKLOADS[name]
        bounds = results.setdefault("bounds", {"workload": name, "objective": args.bounds_objective})
        for bounded in (True, False):
            key = "bounded" if bounded else "unbounded"
            print(f"== {name} {args.bounds_objective}: {key}", file=sys.stderr, flush=True)
            folder = out / "runs" / f"{name}-{key}"
            study = _study(
                args, name, spec, device, folder, workers=1, objective=args.bounds_objective, bounded=bounded
            )
            bounds[key] = study_figures(study)
            bounds[key]["trials_detail"] = [_trial_detail(t) for t in _finished(study)]
            _save(out, results)
        bounds["saved"] = bound_savings(bounds)
    results["load"].append({"when": _now(), "loadavg": _loadavg(), "event": "end"})
    _save(out, results)
    (out.parent / f"{out.name}.md").write_text(render(results))
    print(f"wrote {out / 'results.json'} and {out.parent / f'{out.name}.md'}", file=sys.stderr)
    return 0


def _study(
    args: argparse.Namespace,
    name: str,
    spec: str,
    device: str,
    folder: Path,
    *,
    workers: int,
    objective: str = "throughput",
    bounded: bool = True,
) -> optuna.Study:
    """Run (or resume) one study's trials; a study that already holds them all is only loaded."""
    study_name = f"workers-{name}"
    storage = f"sqlite:///{(folder / 'study.db').resolve()}"
    if (folder / "study.db").exists():
        study = optuna.load_study(study_name=study_name, storage=storage)
        if len(_finished(study)) >= args.trials:
            print("   already measured; kept", file=sys.stderr)
            return study
    options = SearchOptions(
        model=spec,
        space=args.space,
        trials=args.trials,
        workers=workers,
        device=device,
        out=str(folder),
        study_name=study_name,
        seed=args.seed,
        objective=objective,
        compile_budget=4.0 if bounded else 0.0,
        confirm=0,
        compile_cache=False,
        doctor=False,
        trial_timeout=args.trial_timeout,
    )
    if bounded:
        return explore(options, progress=_progress)
    # No compile budget and no time-to bound: every trial compiles as long as it takes.
    with mock.patch.object(trial_loop, "compile_limit", lambda loop: (None, "")):
        return explore(options, progress=_progress)


def _finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False) if t.state.name in FINISHED]


def study_figures(study: optuna.Study) -> dict[str, Any]:
    """Trials per hour, the states, compile seconds in all, and the best trial."""
    trials = _finished(study)
    starts = [t.datetime_start for t in trials if t.datetime_start]
    ends = [t.datetime_complete for t in trials if t.datetime_complete]
    hours = (max(ends) - min(starts)).total_seconds() / 3600 if starts and ends else 0.0
    measured = [t for t in trials if record_of(t).duplicate_of is None]
    complete = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    best = (max if maximize else min)(complete, key=lambda t: t.value or 0.0, default=None)
    if best is not None and record_of(best).duplicate_of is not None:
        best = study.trials[record_of(best).duplicate_of]
    return {
        "trials": len(trials),
        "states": {s: sum(1 for t in trials if t.state.name == s) for s in FINISHED},
        "trial_phase_seconds": round(hours * 3600, 1),
        "trials_per_hour": round(len(trials) / hours, 2) if hours else None,
        "compile_seconds": round(sum(_compile_seconds(t) for t in measured), 1),
        "compile_concurrent_seconds": round(
            sum((record_of(t).own.compile_concurrent_seconds or 0.0) for t in measured), 1
        ),
        "paused_seconds": round(sum((record_of(t).own.paused_seconds or 0.0) for t in measured), 1),
        "best": None
        if best is None
        else {
            "number": best.number,
            "value": best.value,
            "description": record_of(best).description,
            "config": record_of(best).config,
            "speedup_vs_compile": record_of(best).speedup_vs_compile,
        },
    }


def _compile_seconds(trial: optuna.trial.FrozenTrial) -> float:
    """What the trial compiled: its figure when it got that far, else the time its compile phase ran."""
    if record_of(trial).own.compile_seconds is not None:
        return float(record_of(trial).own.compile_seconds)
    return float((record_of(trial).own.phase_seconds or {}).get("compile", 0.0))


def compare_winners(args: argparse.Namespace, spec: str, device: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The winners of every worker count, measured in one campaign with eager and plain torch.compile."""
    workload = resolve(spec)
    batches = workload.draw_batches(seed=args.seed)
    harness = Harness(spec=spec, summary=workload.summary(spec, batches), device=device, seed=args.seed)
    subjects = Subject.baselines()
    names: dict[str, str] = {}
    by_config: dict[str, str] = {json.dumps(CompileConfig().to_dict(), sort_keys=True): "compile"}
    for workers in args.workers:
        best = entry[f"workers_{workers}"]["best"]
        if best is None:
            continue
        key = json.dumps(best["config"], sort_keys=True)
        if key not in by_config:
            by_config[key] = f"winner w{workers}"
            subjects.append(Subject(name=by_config[key], config=CompileConfig.from_dict(best["config"])))
        names[f"workers_{workers}"] = by_config[key]
    print(f"== measuring {len(subjects)} subjects, {args.replicates} replicates", file=sys.stderr, flush=True)
    campaign = measure(
        harness,
        subjects,
        objective=Throughput(),
        rules=CampaignRules(min_replicates=args.replicates, max_replicates=args.replicates),
    )
    rows = {s.name: _figures(campaign, s.name, s.config.describe() if s.config else "eager") for s in subjects}
    return {"winner_of": names, "rows": rows, "noise": campaign.noise(), "campaign": campaign.to_dict()}


def _trial_detail(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    return {
        "number": trial.number,
        "state": trial.state.name,
        "config": record_of(trial).config,
        "compile_seconds": round(_compile_seconds(trial), 1),
        # A trial that reached its windows compiled to the end; one stopped before them did not.
        "compiled_fully": bool(record_of(trial).own.windows) or trial.state.name == "COMPLETE",
        "message": record_of(trial).message[:200],
    }


def bound_savings(bounds: dict[str, Any]) -> dict[str, Any]:
    """Compile seconds in all with and without the bounds, and the stopped configurations' compile times."""
    bounded, unbounded = bounds["bounded"], bounds["unbounded"]
    unbounded_by_config = {
        json.dumps(t["config"], sort_keys=True): t for t in unbounded["trials_detail"] if t["compiled_fully"]
    }
    stopped = []
    for trial in bounded["trials_detail"]:
        if trial["state"] == "PRUNED" and not trial["compiled_fully"]:
            twin = unbounded_by_config.get(json.dumps(trial["config"], sort_keys=True))
            stopped.append(
                {
                    "number": trial["number"],
                    "compiled_before_stop": trial["compile_seconds"],
                    "compile_unbounded": twin["compile_seconds"] if twin else None,
                    "message": trial["message"],
                }
            )
    return {
        "compile_seconds_bounded": bounded["compile_seconds"],
        "compile_seconds_unbounded": unbounded["compile_seconds"],
        "stopped": stopped,
    }


def render(results: dict[str, Any]) -> str:
    """The Markdown report."""
    machine = results["machine"]
    lines = [
        f"# Workers benchmark ({results['size']}, {machine['device']})",
        "",
        f"Machine: {machine_text(machine)}. Per workload: "
        + "; ".join(
            f"{name}: space `{e.get('space')}`, {e.get('trials')} trials per study, seed {e.get('seed')}, winners "
            f"measured in {e.get('replicates', e.get('rounds'))} replicates"
            for name, e in results["workloads"].items()
        )
        + ".",
        "",
        "Load (1-minute average): "
        + ", ".join(f"{e['event']} {e['when']} {e['loadavg']}" for e in results.get("load", [])),
        "",
        "| workload | workers | trials | trial phase | trials/hour | compile s (beside another) | best trial "
        "(search) | winner vs plain compile (campaign) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, entry in results["workloads"].items():
        campaign = entry.get("campaign") or {}
        for key in sorted(k for k in entry if k.startswith("workers_")):
            figures = entry[key]
            best = figures.get("best") or {}
            subject = (campaign.get("winner_of") or {}).get(key)
            row = (campaign.get("rows") or {}).get(subject or "", {})
            versus = row.get("vs_compile")
            measured = f"{subject}: {_ratio(versus)}" if versus else "not measured"
            lines.append(
                f"| {name} | {key.split('_')[1]} | {figures['trials']} ({_states(figures['states'])}) | "
                f"{figures['trial_phase_seconds']:.0f} s | {figures['trials_per_hour']} | "
                f"{figures['compile_seconds']:.0f} ({figures['compile_concurrent_seconds']:.0f}) | "
                f"{best.get('description', '-')} | {measured} |"
            )
        keys = sorted(k for k in entry if k.startswith("workers_"))
        if len(keys) >= 2 and entry[keys[0]]["trials_per_hour"] and entry[keys[-1]]["trials_per_hour"]:
            gain = entry[keys[-1]]["trials_per_hour"] / entry[keys[0]]["trials_per_hour"]
            lines.append(f"| {name} | gain | | | {gain:.2f}x | | | |")
    bounds = results.get("bounds")
    if bounds and "saved" in bounds:
        saved = bounds["saved"]
        lines += [
            "",
            f"## Compile bounds ({bounds['workload']}, `--objective {bounds['objective']}`, one worker)",
            "",
            f"Compile seconds in all: {saved['compile_seconds_bounded']:.0f} with the compile budget and the time-to "
            f"bound, {saved['compile_seconds_unbounded']:.0f} without.",
        ]
        for stop in saved["stopped"]:
            unbounded = stop["compile_unbounded"]
            lines.append(
                f"- trial {stop['number']} stopped after {stop['compiled_before_stop']:.0f} s of compile"
                + (f"; the same configuration compiled {unbounded:.0f} s unbounded" if unbounded is not None else "")
                + f" ({stop['message']})"
            )
        if not saved["stopped"]:
            lines.append("- no trial was stopped while compiling")
    return "\n".join(lines) + "\n"


def _ratio(versus: dict[str, Any]) -> str:
    return interval(versus)


def _states(states: dict[str, int]) -> str:
    return ", ".join(f"{count} {state.lower()}" for state, count in states.items() if count)


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(out: Path, results: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    staged = out / "results.json.tmp"
    staged.write_text(json.dumps(results, indent=1, default=str))
    os.replace(staged, out / "results.json")


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()
    except OSError:
        return "?"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", default="tiny", choices=("tiny", "small"), help="example model size (default: tiny)")
    p.add_argument("--workloads", nargs="+", default=["toy", "captioning_dynamic"], choices=sorted(WORKLOADS))
    p.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="worker counts to compare (default: 1 2)")
    p.add_argument("--trials", type=int, default=8, help="trials per study (default: 8)")
    p.add_argument("--space", default="default", help="search space (default: default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replicates", type=int, default=3, help="replicates of the winners' campaign (default: 3)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--trial-timeout", type=float, default=900.0)
    p.add_argument("--bounds", metavar="WORKLOAD", help="also compare one study with and without the compile bounds")
    p.add_argument("--bounds-objective", default="time-to:2000", help="its objective (default: time-to:2000)")
    p.add_argument("--out", default="outputs/benchmarks/workers-cpu", help="results folder; the .md goes beside it")
    return p


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"{time.monotonic() - started:.0f} s", file=sys.stderr)
    sys.exit(code)
