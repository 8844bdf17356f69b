"""`python -m examples.gpu_check`: the GPU check's driver (`run`, what `bash .ci/gpu` calls) and its stages.

    python -m examples.gpu_check run [--dry-run] [--stages a,b] [--limit stage=seconds] [--budget SECONDS] [--out DIR]

The other commands are the stages' own bodies, each run by the driver in a process of its own:
`environment`, `search` (`autotune search`, then its figures and files copied out),
`validate` (`autotune validate` through the library, with its figures) and `subject` (one real
model's configurations, each one cold run; see `_bench`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from examples.gpu_check._bench import BENCH_STAGES
from examples.gpu_check._stages import (
    FAULT_VARIABLE,
    FIGURES_VARIABLE,
    GPU_SECONDS,
    OUT_VARIABLE,
    STAGE_NAMES,
    CheckError,
    parse_faults,
    parse_limits,
    parse_stages,
    plan,
    remove_tree,
    run_check,
    stage_table,
)

DRY_OUT = Path("outputs") / "gpu-dry-run"
"""The dry run's output folder without $OUT: ignored by git, apart from the GPU's results."""
GPU_OUT = Path("outputs") / "benchmarks" / "gpu"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.gpu_check", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the stages (what `bash .ci/gpu` does)")
    run.add_argument("--dry-run", action="store_true", help="on the CPU, tiny workload and budgets, nothing installed")
    run.add_argument("--stages", help=f"comma-separated, from {', '.join(STAGE_NAMES)} (default: all)")
    run.add_argument("--limit", action="append", default=[], metavar="STAGE=SECONDS", help="replace a stage's limit")
    run.add_argument(
        "--budget",
        type=float,
        help=f"seconds for the whole run: a stage that would not fit what is left is skipped (default: {GPU_SECONDS} "
        "on a GPU, none in a dry run)",
    )
    run.add_argument("--out", type=Path, help="output folder (default: $OUT/gpu, else outputs/benchmarks/gpu)")
    env = commands.add_parser("environment", help="the environment stage")
    env.add_argument("--dry-run", action="store_true")
    search = commands.add_parser("search", help="the search stage: `autotune search ARGS`, then its figures")
    search.add_argument("--work", type=Path, required=True, help="the search's folder (--out of autotune search)")
    search.add_argument("args", nargs=argparse.REMAINDER, help="-- then autotune search's arguments")
    tests = commands.add_parser("tests", help="the tests stage: pytest ARGS, then each test's outcome")
    tests.add_argument("--junit", type=Path, required=True, help="where pytest writes its JUnit XML report")
    tests.add_argument("args", nargs=argparse.REMAINDER, help="-- then pytest's arguments")
    validate = commands.add_parser("validate", help="the validate stage: `autotune validate`, with its figures")
    validate.add_argument("path")
    validate.add_argument("--model", required=True)
    validate.add_argument("--device", required=True)
    validate.add_argument("--replicates", type=int, default=2)
    validate.add_argument("--max-replicates", type=int, default=3)
    validate.add_argument("--measure-seconds", type=float, default=20.0)
    validate.add_argument("--trial-timeout", type=float, default=60.0)
    validate.add_argument("--windows", type=int, default=3, help="paired windows (a replicate measures twice as many)")
    validate.add_argument("--window-seconds", type=float, default=0.25)
    validate.add_argument("--fresh-batches", type=int, default=8)
    bench = commands.add_parser("subject", help="a real model's stage: its configurations, each one cold run")
    bench.add_argument("name", help=f"one of {', '.join(BENCH_STAGES)}")
    bench.add_argument("--dry-run", action="store_true", help="on the CPU, at the examples' tiny size")
    bench.add_argument("--seconds", type=float, default=600.0, help="what its runs may take in all")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "environment":
            return _environment(dry_run=args.dry_run)
        if args.command == "tests":
            return _tests(args.junit, [a for a in args.args if a != "--"])
        if args.command == "search":
            return _search(args.work, [a for a in args.args if a != "--"])
        if args.command == "subject":
            from examples.gpu_check._subject import run_subject

            return run_subject(args.name, dry_run=args.dry_run, seconds=args.seconds)
        return _validate(args)
    except CheckError as exc:
        print(f"gpu check: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    only = parse_stages(args.stages)
    limits = parse_limits(args.limit)
    faults = parse_faults(os.environ.get(FAULT_VARIABLE))
    if args.budget is not None and not 0 < args.budget <= 3600:
        raise CheckError(f"--budget {args.budget:g}: expected seconds in (0, 3600].")
    out: Path = (
        args.out
        or (Path(os.environ["OUT"]) / "gpu" if os.environ.get("OUT") else None)
        or (DRY_OUT if args.dry_run else GPU_OUT)
    )
    # What need not come back (the search's folder, the tests' report, the wheels' site) stays outside an $OUT
    # that is copied back, which takes only a few files a few folders deep.
    if args.out:
        work = args.out.parent / f"{args.out.name}-work"
    elif os.environ.get("OUT"):
        work = Path(tempfile.mkdtemp(prefix="autotune-gpu-check-"))
    else:
        work = out / "runs"  # ignored by git, beside the results
    remove_tree(work)
    for old in out.glob("*") if out.is_dir() else []:
        if old.is_file():
            old.unlink()  # the files of an earlier check: what is there now is this check's
    site = None if args.dry_run else work / "site"
    stage_env: dict[str, str] = {}
    path = [str(site)] if site is not None else []
    stage_env["PYTHONPATH"] = os.pathsep.join([*path, str(Path.cwd()), *_split(os.environ.get("PYTHONPATH"))])
    if site is not None:
        os.environ["PYTHONPATH"] = stage_env["PYTHONPATH"]  # for the driver's own probes (pytest_timeout)
    stages = plan(dry_run=args.dry_run, python=sys.executable, site=site, limits=limits)
    budget = args.budget if args.budget is not None else None if args.dry_run else float(GPU_SECONDS)
    summary = run_check(
        stages,
        out=out,
        work=work,
        only=only,
        faults=faults,
        env=stage_env,
        dry_run=args.dry_run,
        budget=budget,
        echo=sys.stdout,
    )
    print()
    print(stage_table(summary))
    print(
        f"\n{'passed' if summary['passed'] else 'FAILED'} in {summary['seconds']:.0f} s; summary: {out / 'summary.json'}"
    )
    return 0 if summary["passed"] else 1


def _split(value: str | None) -> list[str]:
    return [p for p in (value or "").split(os.pathsep) if p]


def _environment(*, dry_run: bool) -> int:
    from examples.gpu_check._environment import environment, headline

    facts, problems = environment(dry_run=dry_run)
    print(json.dumps(facts, indent=2))
    facts["headline"] = headline(facts)
    if problems:
        facts["problems"] = problems
        print("\nproblems:\n" + "\n".join(f"  {p}" for p in problems))
    _write_figures(facts)
    return 1 if problems else 0


def _tests(junit: Path, arguments: list[str]) -> int:
    import pytest

    code = int(pytest.main([*arguments, f"--junitxml={junit}"]))
    if junit.exists():
        from examples.gpu_check._figures import junit_figures

        _write_figures(junit_figures(junit))
    return code


def _search(work: Path, arguments: list[str]) -> int:
    from autotune.cli import main as autotune_main

    shutil.rmtree(work, ignore_errors=True)
    code = autotune_main(["search", *arguments, "--out", str(work)])
    if not (work / "best.yaml").exists():
        print(f"\nno best.yaml in {work}: nothing to summarise", flush=True)
        return code or 1
    from examples.gpu_check._figures import search_figures, unmeasured

    figures = search_figures(work)
    _write_figures(figures)
    out = os.environ.get(OUT_VARIABLE)
    if out:
        for name, copy in (("best.yaml", "search-best.yaml"), ("report.md", "search-report.md")):
            if (work / name).exists():
                shutil.copyfile(work / name, Path(out) / copy)
    why = unmeasured(figures)
    if why:
        print(f"\nthe stage fails: {why}", flush=True)
        return code or 1
    return code


def _validate(args: argparse.Namespace) -> int:
    from autotune.measure import validate
    from autotune.trial.request import RunProtocol
    from examples.gpu_check._figures import validation_figures

    # Shorter windows than `autotune validate`'s (5 of half a second): the toy's steps take a millisecond on a
    # GPU, and the stage has about a minute for three cold compiles and two replicates.
    protocol = RunProtocol(windows=args.windows, window_seconds=args.window_seconds, fresh_batches=args.fresh_batches)
    report = validate(
        args.path,
        model=args.model,
        device=args.device,
        replicates=args.replicates,
        max_replicates=args.max_replicates,
        measure_seconds=args.measure_seconds,
        trial_timeout=args.trial_timeout,
        protocol=protocol,
        on_run=_said_run,
        on_replicate=lambda campaign, budget: print(f"replicate {campaign.replicate_count + 1} starts", flush=True),
    )
    print(report.render(), flush=True)
    _write_figures(validation_figures(report))
    return 0 if report.ok else 1


def _said_run(subject: str, replicate: int, record: Any) -> None:
    """One line per run as it ends, so that a validation stopped at its limit leaves how far it got."""
    when = "cold" if replicate < 0 else f"replicate {replicate + 1}"
    state = "complete" if record.complete else f"{record.reason}: {record.message}"
    figures = {
        k: v
        for k, v in record.to_dict().items()
        if k in ("compile_seconds", "samples_per_second", "wall_seconds") and v
    }
    print(f"{subject} ({when}): {state} {figures}", flush=True)


def _write_figures(figures: Mapping[str, Any]) -> None:
    target = os.environ.get(FIGURES_VARIABLE)
    if target:
        Path(target).write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
