"""The stages of the GPU check, their limits, and the driver that runs them one after another.

Each stage is a list of commands run in one new process group under one deadline: at the
deadline the group gets SIGTERM, and SIGKILL `KILL_GRACE` seconds later, as `timeout -k` would
do. Its output goes straight to its log file in the output folder, so whatever it printed
before it was stopped is kept. A stage may also leave its headline figures as JSON in the file
named by `FIGURES_VARIABLE`; they go into `summary.json`, which is rewritten as each stage starts
and ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from examples.gpu_check._cost import GPU_SECONDS, SEARCH_PROCESSES, gpu_limit

try:
    from autotune.errors import AutotuneError
except Exception:  # torch missing or broken here: the environment stage says what; the driver runs on
    AutotuneError = Exception  # type: ignore[misc,assignment]

__all__ = [
    "FAULT_VARIABLE",
    "FIGURES_VARIABLE",
    "KILL_GRACE",
    "GPU_LIMITS",
    "GPU_SECONDS",
    "OUT_VARIABLE",
    "REQUIRED",
    "SEARCH_PROCESSES",
    "SEARCH_TIMEOUT",
    "STAGE_NAMES",
    "CheckError",
    "Stage",
    "StageResult",
    "parse_faults",
    "parse_limits",
    "plan",
    "run_check",
]

STAGE_NAMES = (
    "environment",
    "tests",
    "search",
    "validate",
    "captioning",
    "gpt2-train",
    "gpt2-infer",
    "captioning-dynamic",
)
"""The stages, in the order they run: the check's, then the real models'."""
FAULT_VARIABLE = "AUTOTUNE_GPU_FAULT"
"""`stage:fail` or `stage:hang`, comma-separated: that stage's commands are replaced by one that fails or hangs,
to show that the check records it and goes on."""
FIGURES_VARIABLE = "AUTOTUNE_GPU_FIGURES"
"""The file a stage may write its headline figures to, as one JSON object."""
OUT_VARIABLE = "AUTOTUNE_GPU_OUT"
"""The check's output folder, for a stage that copies a file there (the search's best.yaml and report)."""
FAULTS = ("fail", "hang")
KILL_GRACE = 5.0
"""Seconds between SIGTERM and SIGKILL for a stage past its limit."""
WHEEL_DIR = ".whl"
"""Where `.ci/gpu-wheels` leaves the wheels a GPU machine lacks; the check installs them with pip, offline."""

SEARCH_TRIALS = 2
"""The search stage's trials: plain torch.compile (its baseline's run, reused) and the CUDA-graph recipe."""
SEARCH_TIMEOUT = 120
"""The search stage's --timeout: no trial starts later. The baselines and the anchor come first (`SEARCH_PROCESSES`)."""
GPU_LIMITS = {name: gpu_limit(name) for name in STAGE_NAMES}
"""Each stage's limit on a GPU, from its modelled cost (`_cost`)."""
REQUIRED = ("environment", "tests", "captioning")
"""The stages a GPU run always starts (their limits add up to `GPU_SECONDS` at most); the others start only where
the time left still holds every required stage after them."""
# The dry run's limits are about twice what each stage took alone on the 2-core CPU host, or more. The real models'
# are wider: with the host shared (load 6 on 2 cores) GPT-2's training took three times as long as alone, and the
# captioning model under bfloat16 autocast, which this CPU emulates, compiles for minutes even at the tiny size.
DRY_LIMITS = {
    "environment": 60.0,
    "tests": 90.0,
    "search": 150.0,
    "validate": 180.0,
    "captioning": 600.0,
    "gpt2-train": 300.0,
    "gpt2-infer": 200.0,
    "captioning-dynamic": 400.0,
}
SLOW_GPU_TESTS = (
    "paired_and_decided",
    "worker_runs_on_the_gpu",
    "cuda_graph_recording",
    "two_workers_on_one_gpu",
)
"""GPU tests the tests stage leaves out, each of 30 to 60 s: what they show, a worker on the GPU, CUDA graphs recorded
and counted, reduce-overhead against plain compile, the search and the validation show too, and the real models
need the time. `pytest tests/gpu` runs them all."""
TEST_TIMEOUT = 80
"""pytest-timeout's limit for one GPU test, where the plugin is installed."""

GPU_MODEL = "examples.toy:model"
DRY_MODEL = "tests.trial_targets.workloads:tiny_infer"
"""Compiles in a second or two on a CPU: the dry run proves the plumbing, not the numbers."""
SPACE = "examples/spaces/cuda_graphs.yaml"
RECIPE = "examples/recipes/reduce_overhead.yaml"


class CheckError(AutotuneError):
    """The GPU check was asked for something it cannot do (an unknown stage, a bad limit or fault)."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage: what it shows, the commands it runs, and how long they may take together."""

    name: str
    what: str
    """One line for the summary."""
    commands: Callable[[Path], list[list[str]]]
    """The commands, made when the stage starts (from the work folder), so that they can depend on what the
    stages before them installed."""
    limit: float
    """Seconds for all its commands together, in this run (a dry run's are the CPU's)."""
    gpu_limit: float
    """Its limit on a GPU, from its modelled cost."""
    required: bool = True
    """False: it starts only where the time left still holds every required stage after it."""


@dataclass(kw_only=True)
class StageResult:
    """What became of a stage: its status, its time, its log and its figures."""

    name: str
    what: str
    status: str = "pending"
    """'pending', 'running', 'passed', 'failed', 'timed out', 'skipped' (it would not fit the time left; `reason`
    says why) or 'not run' (left out by --stages)."""
    seconds: float | None = None
    limit_seconds: float = 0.0
    """Its limit in this run."""
    gpu_limit_seconds: float = 0.0
    """Its limit on a GPU."""
    required: bool = True
    reason: str | None = None
    exit_code: int | None = None
    log: str | None = None
    fault: str | None = None
    """The fault injected by AUTOTUNE_GPU_FAULT, if any."""
    figures: dict[str, Any] = field(default_factory=dict)


def parse_faults(text: str | None, names: Sequence[str] = STAGE_NAMES) -> dict[str, str]:
    """`stage:fail,stage:hang` -> {stage: fault}, of the stages `names`; raises CheckError naming what is wrong."""
    faults: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        stage, _, fault = item.partition(":")
        if stage not in names or fault not in FAULTS:
            raise CheckError(
                f"{FAULT_VARIABLE}: {item!r} is not STAGE:FAULT with STAGE one of {', '.join(names)} "
                f"and FAULT one of {', '.join(FAULTS)}."
            )
        faults[stage] = fault
    return faults


def parse_limits(items: Sequence[str], names: Sequence[str] = STAGE_NAMES) -> dict[str, float]:
    """`['tests=20', ...]` (from --limit) -> {stage: seconds}, of the stages `names`; raises CheckError naming what is
    wrong."""
    limits: dict[str, float] = {}
    for item in items:
        stage, _, seconds = item.partition("=")
        try:
            value = float(seconds)
        except ValueError:
            value = -1.0
        if stage not in names or not 0 < value <= 3600:
            raise CheckError(
                f"--limit {item!r}: expected STAGE=SECONDS with STAGE one of {', '.join(names)} "
                "and SECONDS a number in (0, 3600]."
            )
        limits[stage] = value
    return limits


def parse_stages(text: str | None, names: Sequence[str] = STAGE_NAMES) -> list[str]:
    """`--stages a,b` -> the stages to run, of `names` and in their order; all of them when None."""
    if text is None:
        return list(names)
    wanted = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in names]
    if unknown or not wanted:
        raise CheckError(f"--stages {text!r}: expected a comma-separated list of {', '.join(names)}.")
    return [s for s in names if s in wanted]


def plan(*, dry_run: bool, python: str, site: Path | None, limits: Mapping[str, float] | None = None) -> list[Stage]:
    """Every stage for a GPU machine, or with `dry_run` for the CPU (the real models at their tiny size); `limits`
    replaces some stages' limits in this run."""
    base = DRY_LIMITS if dry_run else GPU_LIMITS
    limit = {**base, **(limits or {})}
    model, device = (DRY_MODEL, "cpu") if dry_run else (GPU_MODEL, "cuda")
    me = [python, "-m", "examples.gpu_check"]

    def environment(work: Path) -> list[list[str]]:
        commands = [] if dry_run or site is None else [_install(python, site)]
        return [*commands, [*me, "environment", *(["--dry-run"] if dry_run else [])]]

    def tests(work: Path) -> list[list[str]]:
        return [_tests(python, dry_run=dry_run, junit=work / "tests.xml")]

    def search(work: Path) -> list[list[str]]:
        budget = (
            # On a loaded CPU a replicate takes seconds: two of them and one trial beside the baselines.
            ["--trials", "2", "--windows", "2", "--window-seconds", "0.1", "--fresh-batches", "4", "--no-compile-cache"]
            if dry_run
            # The space's first two recipes (plain reuses the baseline's run); no trial starts after
            # SEARCH_TIMEOUT; a configuration whose compile and warm-up take over 45 s is stopped. The compile
            # cache is saved: it is what torch.compiler's mega-cache does on a GPU.
            else ["--trials", str(SEARCH_TRIALS), "--timeout", str(SEARCH_TIMEOUT), "--max-compile-seconds", "45"]
            + ["--windows", "3", "--window-seconds", "0.25"]
        )
        return [
            [*me, "search", "--work", str(work / "search"), "--", "--model", model, "--device", device]
            + ["--space", SPACE, "--no-doctor", "--confirm", "1", "--replicates", "2", "--max-replicates", "2"]
            + ["--trial-timeout", "60" if dry_run else "90", *budget]
        ]

    def validate(work: Path) -> list[list[str]]:
        budget = (
            ["--max-replicates", "2", "--measure-seconds", "3", "--windows", "2", "--window-seconds", "0.1"]
            + ["--fresh-batches", "4"]
            if dry_run
            else ["--max-replicates", "3", "--measure-seconds", "20", "--windows", "3", "--window-seconds", "0.25"]
        )
        return [
            [*me, "validate", RECIPE, "--model", model, "--device", device, "--replicates", "2", *budget]
            + ["--trial-timeout", "60"]
        ]

    what = {
        "environment": "GPU, driver, torch, Triton and CUDA versions, compute mode; every import the project needs",
        "tests": "the quick GPU tests (tests/gpu)" if not dry_run else "the GPU path's CPU tests (stand-in)",
        "search": f"a search of {model} in {SPACE}: plain, CUDA graphs over learned buckets, max-autotune",
        "validate": f"{RECIPE} (reduce-overhead) against plain torch.compile and eager",
    }
    commands: dict[str, Callable[[Path], list[list[str]]]] = {
        "environment": environment,
        "tests": tests,
        "search": search,
        "validate": validate,
    }
    from examples.gpu_check._bench import BENCH_SUBJECTS, subject_commands

    for entry in BENCH_SUBJECTS:
        what[entry.name] = entry.what
        commands[entry.name] = subject_commands(entry.name, python=python, dry_run=dry_run, limit=limit[entry.name])
    return [
        Stage(
            name=n,
            what=what[n],
            commands=commands[n],
            limit=limit[n],
            gpu_limit=GPU_LIMITS[n],
            required=n in REQUIRED,
        )
        for n in STAGE_NAMES
    ]


def _install(python: str, site: Path) -> list[str]:
    wheels = sorted(str(p) for p in Path(WHEEL_DIR).glob("*.whl"))
    if not wheels:
        return [python, "-c", f"print('no wheels in {WHEEL_DIR}/: nothing installed')"]
    return [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target", str(site)] + [
        *wheels
    ]


def _tests(python: str, *, dry_run: bool, junit: Path) -> list[str]:
    common = [python, "-m", "examples.gpu_check", "tests", "--junit", str(junit), "--", "-q", "-rA", "-p"]
    common += ["no:cacheprovider"]
    if dry_run:
        # tests/gpu is not collected without CUDA; the CPU tests of the GPU path stand in for it.
        return [*common, "tests/trial/test_gpu_path.py", "-m", "parallel"]
    # pytest-timeout, where installed, stops one hanging test instead of the whole stage.
    timeout = ["-p", "timeout", f"--timeout={TEST_TIMEOUT}"] if _importable(python, "pytest_timeout") else []
    return [*common, *timeout, "tests/gpu", "-k", " and ".join(f"not {name}" for name in SLOW_GPU_TESTS)]


def _importable(python: str, module: str) -> bool:
    try:
        found = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, timeout=30, env=os.environ.copy(), check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


def _fault_command(python: str, stage: str, fault: str) -> list[str]:
    if fault == "fail":
        return [python, "-c", f"import sys; print('{stage}: failure injected by {FAULT_VARIABLE}'); sys.exit(3)"]
    # A hang with a child of its own: the whole process group must be stopped, not only the stage's first process.
    return [
        python,
        "-c",
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']); "
        f"print('{stage}: hang injected by {FAULT_VARIABLE}', flush=True); time.sleep(3600)",
    ]


def run_check(
    stages: Sequence[Stage],
    *,
    out: Path,
    work: Path,
    only: Sequence[str] | None = None,
    faults: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    dry_run: bool = False,
    budget: float | None = None,
    echo: TextIO | None = None,
) -> dict[str, Any]:
    """Run `stages` (those named in `only`, all by default) one after another; return what `summary.json` says.

    A stage that fails or passes its limit is recorded and the next one runs. With a `budget` (seconds for the
    whole run), a stage whose limit exceeds the time left is skipped, not started; an optional one also where
    it would leave too little for the required stages after it. `out` receives one log per stage and
    `summary.json`, rewritten as each stage starts and ends; `work` holds what need not come back.
    """
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    faults = dict(faults or {})
    wanted = set(only) if only is not None else {s.name for s in stages}
    summary: dict[str, Any] = {
        "check": "dry run (CPU)" if dry_run else "GPU",
        "started": _now(),
        "finished": None,
        "seconds": None,
        "passed": None,
        "out": str(out),
        "budget_seconds": budget,
        "gpu_seconds": GPU_SECONDS,
        "stages": [],
    }
    results = [
        StageResult(name=s.name, what=s.what, limit_seconds=s.limit, gpu_limit_seconds=s.gpu_limit, required=s.required)
        for s in stages
    ]
    for result in results:
        if result.name not in wanted:
            result.status = "not run"
    summary["stages"] = results
    started = time.monotonic()
    _write_summary(out, summary)
    for index, (stage, result) in enumerate(zip(stages, results, strict=True)):
        if result.status == "not run":
            continue
        if budget is not None:
            later = [s for s, r in zip(stages[index + 1 :], results[index + 1 :], strict=True) if r.status != "not run"]
            result.reason = _no_room(stage, budget - (time.monotonic() - started), later)
            if result.reason is not None:
                result.status = "skipped"
                _say(echo, f"gpu check: {stage.name} skipped: {result.reason}")
                _write_summary(out, summary)
                continue
        result.status, result.log, result.fault = "running", f"{stage.name}.txt", faults.get(stage.name)
        _write_summary(out, summary)
        _say(echo, f"gpu check: {stage.name} (limit {stage.limit:.0f} s): {stage.what}")
        figures_path = work / f"{stage.name}.figures.json"
        figures_path.unlink(missing_ok=True)
        stage_env = {
            **os.environ,
            **(env or {}),
            FIGURES_VARIABLE: str(figures_path),
            OUT_VARIABLE: str(out.resolve()),
            "PYTHONUNBUFFERED": "1",
        }
        begun = time.monotonic()
        with open(out / result.log, "w", encoding="utf-8", buffering=1) as log:
            try:
                commands = stage.commands(work)
            except Exception as exc:  # a stage that cannot even be planned is a failed stage
                log.write(f"{stage.name}: could not prepare its commands: {exc!r}\n")
                commands = []
                result.exit_code = -1
            if result.fault is not None:
                commands = [_fault_command(sys.executable, stage.name, result.fault)]
            if commands:
                result.exit_code, timed_out = _run_commands(commands, log, stage_env, deadline=begun + stage.limit)
            else:
                timed_out = False
        result.seconds = round(time.monotonic() - begun, 1)
        result.figures = _read_figures(figures_path, out / result.log)
        result.status = "timed out" if timed_out else "passed" if result.exit_code == 0 else "failed"
        _say(echo, f"gpu check: {stage.name} {result.status} in {result.seconds:.0f} s")
        _write_summary(out, summary)
    ran = [r for r in results if r.status not in ("not run", "skipped")]
    summary["finished"] = _now()
    summary["seconds"] = round(time.monotonic() - started, 1)
    # An optional stage that did not fit is no failure; a required one is.
    missed = [r for r in results if r.status == "skipped" and r.required]
    summary["passed"] = bool(ran) and not missed and all(r.status == "passed" for r in ran)
    _write_summary(out, summary)
    return _jsonable(summary)


def _no_room(stage: Stage, left: float, later: Sequence[Stage]) -> str | None:
    """Why `stage` is not started with `left` seconds of the run's budget, or None where it fits: its limit must fit
    what is left, and an optional stage's must also leave the limits of the required stages after it."""
    if stage.limit > left:
        return f"its limit of {stage.limit:g} s exceeds the {max(left, 0):.0f} s left"
    if stage.required:
        return None
    kept = sum(s.limit for s in later if s.required)
    if stage.limit > left - kept:
        return (
            f"its limit of {stage.limit:g} s exceeds the {max(left, 0):.0f} s left less the {kept:g} s "
            "of the required stages after it"
        )
    return None


def _run_commands(
    commands: Sequence[Sequence[str]], log: TextIO, env: Mapping[str, str], *, deadline: float
) -> tuple[int, bool]:
    """Run `commands` in turn, each even when one before it failed (the environment is probed when installing
    failed); (the first non-zero exit code or 0, whether the deadline stopped them)."""
    first = 0
    for command in commands:
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        try:
            process = subprocess.Popen(
                list(command), stdout=log, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
            )
        except OSError as exc:
            log.write(f"cannot start it: {exc}\n")
            first = first or 127
            continue
        try:
            code = process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _stop_group(process)
            log.write("\nstopped: the stage ran past its limit\n")
            return 124, True
        finally:
            _reap_group(process.pid)
        first = first or code
    return first, False


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the stage's process group, SIGKILL after KILL_GRACE seconds (what `timeout -k` does)."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, KILL_GRACE)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _reap_group(pgid: int) -> None:
    """Stop what a finished stage left running in its group (a worker its parent did not wait for)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_figures(path: Path, log: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        figures = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"\nthe stage's figures could not be read: {exc}\n")
        return {}
    return figures if isinstance(figures, dict) else {"value": figures}


def _write_summary(out: Path, summary: Mapping[str, Any]) -> None:
    """Write summary.json whole or not at all: a check stopped mid-write keeps the previous one."""
    staged = out / "summary.json.partial"
    staged.write_text(json.dumps(_jsonable(summary), indent=2) + "\n", encoding="utf-8")
    os.replace(staged, out / "summary.json")


def _jsonable(summary: Mapping[str, Any]) -> dict[str, Any]:
    return {k: [asdict(r) for r in v] if k == "stages" else v for k, v in summary.items()}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _say(echo: TextIO | None, line: str) -> None:
    if echo is not None:
        print(line, file=echo, flush=True)


def stage_table(summary: Mapping[str, Any]) -> str:
    """The stages as a small table: status, seconds, limit and a few headline figures."""
    rows = [("stage", "status", "seconds", "limit", "figures")]
    for stage in summary["stages"]:
        seconds = "-" if stage["seconds"] is None else f"{stage['seconds']:.1f}"
        said = stage.get("reason") if stage["status"] == "skipped" else _headline(stage)
        rows.append((stage["name"], stage["status"], seconds, f"{stage['limit_seconds']:.0f}", said or ""))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4] for row in rows
    )


def _headline(stage: Mapping[str, Any]) -> str:
    figures = stage.get("figures") or {}
    headline = figures.get("headline")
    return str(headline) if headline else ""


def remove_tree(path: Path) -> None:
    """Remove a folder a previous check left (the site of installed wheels, a search folder), if any."""
    shutil.rmtree(path, ignore_errors=True)
