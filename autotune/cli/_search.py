"""`autotune search`: search the compile-configuration space for a workload and export the winner."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from autotune.cli._common import (
    EXIT_OK,
    add_inputs,
    add_no_compile_cache,
    add_pick,
    add_replicates,
    model_with_inputs,
    options_from,
    print_result,
    with_display,
)
from autotune.errors import ConfigError

if TYPE_CHECKING:
    from autotune.study.search import SearchOptions
    from autotune.trial.request import RunProtocol

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "search"
HELP = "search the compile-configuration space for a workload and export the winner"
DESCRIPTION = (
    "Run an Optuna study over torch.compile configurations for a workload. Every trial runs in a "
    "fresh process with its own Inductor/Triton caches and a hard timeout, is checked against eager, "
    "and is measured with the same protocol as the eager and plain torch.compile baselines."
)
EPILOG = """\
outputs (in --out, default outputs/<study-name>/):
  best.yaml             the winning configuration with its metrics, baselines, study summary and environment
  apply_compilation.py  the generated code that applies it (needs only torch)
  trials.csv            every trial: state, reason, compile seconds, throughput, speedups, memory, its configuration
  report.md             verdict, tables and plots (decision.png first, then history.png,
                        throughput_vs_compile.png, importances.png)
  compile_cache.bin     the winner's compile artifacts; load_compile_cache() loads them with the same torch and device
  study.db              the Optuna study (SQLite), unless --storage names another

Re-running the same command resumes the study: finished trials count towards --trials.
Ctrl-C (exit 130) and SIGTERM (exit 143) stop it with every worker killed and the running trial
recorded as interrupted; the same command then resumes.
With --storage postgresql://... or journal:///SHARED/PATH (a file on a shared file system, no server)
several hosts run the same command on one study: --trials is the study's total, and the host that
finishes its last trial confirms and exports.

examples:
  autotune search --model examples.toy:model --trials 8
  autotune search --model mypkg.tune:model --space quick --device cuda:1 --objective time-to:500
"""


def add_flags(p: argparse.ArgumentParser) -> None:
    """The flags, in groups: what to search, budget, measurement, scale, output."""
    _what(p.add_argument_group("what to search"))
    _budget(p.add_argument_group("budget"))
    _measurement(p.add_argument_group("measurement"))
    _scale(p.add_argument_group("scale: devices, workers, shared studies"))
    _output(p.add_argument_group("output"))
    p.set_defaults(run=run)


def _what(g: Any) -> None:
    from autotune.measure import DEFAULT_PICK  # lazy: see the package docstring
    from autotune.study.search import EFFORTS  # lazy: see the package docstring
    from autotune.trial.accuracy import PRECISION_TOLERANCE  # lazy: see the package docstring

    g.add_argument(
        "--model",
        required=True,
        metavar="PKG.MOD:ATTR",
        help="the workload: a Workload (your own training step, or model, batches, optimizer and loss), an "
        "nn.Module with --inputs or an example_inputs() method (inference; transformers models get synthesised "
        "batches), a transformers.Trainer, a LightningModule, or a zero-argument factory or class of one of them",
    )
    add_inputs(g)
    levels = "; ".join(f"{name}: {level.describe()}" for name, level in EFFORTS.items())
    g.add_argument(
        "--effort",
        choices=list(EFFORTS),
        default="default",
        help=f"how much to try, setting --space, --trials, --confirm, --replicates and --max-replicates together "
        f"(each flag given explicitly wins) ({levels}; default: default)",
    )
    g.add_argument(
        "--space",
        metavar="NAME|PATH",
        help="a bundled search space (see `autotune spaces`) or a YAML file (default: from --effort)",
    )
    g.add_argument(
        "--objective",
        default=_default("objective"),
        metavar="OBJECTIVE[,TRADE-OFF...]",
        help="throughput (maximise samples/s, the default) or time-to:N (minimise compile time plus N steps); "
        "add compile-time and/or peak-memory (e.g. throughput,compile-time) for a multi-objective search that "
        "exports a Pareto front (pareto.yaml, pareto/<point>/)",
    )
    add_pick(g, DEFAULT_PICK)
    g.add_argument(
        "--allow-precision-changes",
        action="store_true",
        help="also search settings that change numerics (float32 matmul precision 'high'/'medium', unsafe math); "
        f"such a trial passes the accuracy check within a relative error of {PRECISION_TOLERANCE:g} instead of "
        "the dtype's own tolerance, and the generated code says so",
    )
    g.add_argument(
        "--sampler",
        choices=("tpe", "random", "bruteforce"),
        default=_default("sampler"),
        help="tpe (seeded, default), random, or bruteforce (every configuration of the space once)",
    )
    g.add_argument(
        "--seed", type=int, default=_default("seed"), help="seeds the sampler and the batches drawn (default: 0)"
    )
    g.add_argument(
        "--no-recipes",
        dest="recipes",
        action="store_false",
        help="do not start a new study with plain torch.compile and the generic expert recipes (mark_dynamic on "
        "declared dynamic inputs, regional, max-autotune-no-cudagraphs, padding to 8, compiled optimizer); they "
        "take at most half of --trials, but at least 3 (plain compile and the two most likely to help) where --trials allows; a space file with its own `recipes:` section starts with those instead, "
        "as many as --trials allows; once they have run, those faster than plain compile are tried together",
    )
    _explaining(g)
    g.add_argument(
        "--no-doctor",
        dest="doctor",
        action="store_false",
        help="skip the first phase, which finds the workload's graph breaks and recompiles (see `autotune doctor`)",
    )


def _explaining(g: Any) -> None:
    """The flags of a search that explains its failures (`autotune explain`)."""
    g.add_argument(
        "--explain-failures",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="narrow each trial that fails for a reason a setting can cause (compile error, accuracy, recompile "
        "limit, out of memory, graph break) to the settings and the compiler stage that cause it, write "
        "failures/trial-N/repro.py, and sample those settings no more (default: on with --effort thorough; see "
        "`autotune explain`)",
    )
    g.add_argument(
        "--explain-budget",
        type=float,
        metavar="SECONDS",
        help="seconds each failure's narrowing may take (default: four times the failing trial's own run)",
    )


def _default(name: str) -> Any:
    """The default of SearchOptions' field `name`: the flags restate no default of their own."""
    import dataclasses

    from autotune.study.search import SearchOptions  # lazy: see the package docstring

    (field,) = [f for f in dataclasses.fields(SearchOptions) if f.name == name]
    return field.default


def _budget(g: Any) -> None:
    g.add_argument("--trials", type=int, help="trials in the study, resumed ones included (default: from --effort)")
    g.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop starting new trials after this many seconds (default: none)",
    )
    g.add_argument(
        "--time-budget",
        type=float,
        metavar="SECONDS",
        help="the whole search, confirmation included, in about this many seconds: no trial starts that would "
        "leave the confirmation too little time (a typical trial and the confirmation's guessed length are kept "
        "free), and the confirmation adds no replicate past it, beyond its first --replicates (default: none)",
    )
    g.add_argument(
        "--trial-timeout",
        type=float,
        default=_default("trial_timeout"),
        metavar="SECONDS",
        help="kill a trial's whole process group after this many seconds (default: 900)",
    )
    g.add_argument(
        "--pruner",
        choices=("median", "hyperband", "none"),
        default=_default("pruner"),
        help="stops trials whose throughput windows trail the others (default: median)",
    )
    g.add_argument(
        "--slow-ratio",
        type=float,
        default=_default("slow_ratio"),
        help="prune trials whose paired windows show them below this fraction of eager's throughput (default: 0.5)",
    )
    g.add_argument(
        "--max-compile-seconds",
        type=float,
        metavar="SECONDS",
        help="stop trials whose compile and warm-up take longer; replaces --compile-budget (default: none)",
    )
    g.add_argument(
        "--compile-budget",
        type=float,
        default=_default("compile_budget"),
        metavar="K",
        help="stop a trial as soon as its compile and warm-up run longer than K times plain torch.compile's "
        "(measured when the session starts; never less than 60 s); with --objective time-to:N also once it has run "
        "longer than the best complete trial's whole time (default: 4; 0: no budget)",
    )
    g.add_argument(
        "--max-failure-rate",
        type=float,
        default=_default("max_failure_rate"),
        help="stop the search when more than this fraction of (at least 5) trials failed (default: 0.8)",
    )


def _measurement(g: Any) -> None:
    from autotune.trial.request import RunProtocol  # lazy: see the package docstring

    g.add_argument(
        "--confirm",
        type=int,
        help="measure the best N trials again with both baselines, in replicates of paired windows, before choosing "
        "(default: from --effort; 0 to skip)",
    )
    add_replicates(
        g,
        least=(
            None,
            "replicates of the confirmation before it may stop: each is a new process per subject, warm from its "
            "own cache, taking turns window by window with the others (default: from --effort)",
        ),
        most=(
            None,
            "replicates at most, added while the leader's interval against plain compile is undecided "
            "(default: from --effort)",
        ),
        old_least="--rounds",
    )
    g.add_argument(
        "--windows",
        type=int,
        default=RunProtocol().windows,
        help="paired windows each trial measures beside a live plain torch.compile; the pruner sees each "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--window-seconds",
        type=float,
        default=RunProtocol().window_seconds,
        metavar="SECONDS",
        help="a window is as many batches of the fresh stream as run in about this long, the same slice for every "
        "subject it is compared with (default: %(default)s)",
    )
    g.add_argument(
        "--fresh-batches",
        type=int,
        default=RunProtocol().fresh_batches,
        help="the fresh stream: batches no run has seen before, which windows take in turn; a configuration that "
        "meets a new length compiles inside its window, and that counts (default: %(default)s; 0: the fixed "
        "batches only)",
    )


def _scale(g: Any) -> None:
    g.add_argument(
        "--device",
        metavar="cpu|cuda|cuda:N[,cuda:M...]",
        help="where trials run (default: cuda when available, else cpu); several CUDA devices run trials side by "
        "side, one worker each (baselines and the confirmation run on the first)",
    )
    g.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="trials run at once (default: one on a CPU; on a GPU host one per 4 cores of each GPU's share of them, "
        "at most 4 per GPU, as the search says once its baselines ran); workers that share a device compile side by side and "
        "measure one at a time, the others stopped meanwhile (on a GPU once their queued work is done, their "
        "allocator's cache kept; each may use an equal share of its memory, and a trial out of memory there runs "
        "again alone); workers on different GPUs get their own share of the host's CPU cores",
    )
    g.add_argument(
        "--storage",
        metavar="URL",
        help="an Optuna storage URL (default: sqlite in --out); postgresql://USER@HOST/DB (pip install "
        "autotune[postgres]) or journal:///PATH, a file on a file system they share, lets several hosts share the study",
    )
    g.add_argument("--study-name", help="the study's name (default: derived from --model, e.g. examples.toy-model)")
    g.add_argument(
        "--json",
        action="store_true",
        help="print one machine-readable summary (JSON) on standard output instead of the text; progress stays on "
        "standard error (fields: docs/json.md)",
    )
    g.add_argument(
        "--new",
        action="store_true",
        help="start the study afresh instead of resuming it: its trials are deleted from the storage first (the "
        "files in --out stay until the new search exports its own)",
    )
    g.add_argument(
        "--heartbeat-interval",
        type=int,
        default=_default("heartbeat_interval"),
        metavar="SECONDS",
        help="with a shared --storage (not SQLite): a running trial records a heartbeat this often (default: 10)",
    )
    g.add_argument(
        "--grace-period",
        type=int,
        default=_default("grace_period"),
        metavar="SECONDS",
        help="with a shared --storage: a trial without a heartbeat for this long is failed as abandoned by any host "
        "and its configuration queued again, once (default: 60)",
    )


def _output(g: Any) -> None:
    g.add_argument("--out", metavar="DIR", help="output folder (default: outputs/<study-name>)")
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (the adapted space, the trials and recipes, the confirmation) and an estimate of the "
        "search's wall time from one cold compile of plain torch.compile; nothing is searched, stored or exported",
    )
    add_no_compile_cache(
        g, "saving them costs two more runs of the winner: one warm from its measured cache, one with the file loaded"
    )


def protocol_from(args: argparse.Namespace) -> RunProtocol:
    """The measurement protocol of `autotune search`'s flags; a bad value is named by its flag."""
    from autotune.trial.request import RunProtocol  # lazy: see the package docstring

    given = {name: getattr(args, name) for name in ("windows", "fresh_batches", "window_seconds")}
    try:
        return RunProtocol(**given)
    except ConfigError as exc:
        message = str(exc)
        for name in given:
            message = message.replace(f"protocol.{name}:", f"--{name.replace('_', '-')}:")
        raise ConfigError(message) from None


def run(args: argparse.Namespace) -> int:
    """`autotune search`."""
    from autotune.study.search import SearchOptions, effort, search  # lazy: see the package docstring
    from autotune.study.storage import shown  # lazy: see the package docstring

    level = effort(args.effort)
    for name in ("space", "trials", "confirm", "explain_failures"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(level, name))
    if args.replicates is None:
        args.replicates = (
            level.replicates if args.max_replicates is None else min(level.replicates, args.max_replicates)
        )
    if args.max_replicates is None:
        # More --replicates than the level's most: those replicates are what was asked for.
        args.max_replicates = max(level.max_replicates, args.replicates)
    args.model = model_with_inputs(args)
    options = options_from(SearchOptions, args, protocol=protocol_from(args))
    if args.dry_run:
        return _dry_run(options, args)
    if args.new:
        from autotune.study.storage import discard_study  # lazy: see the package docstring

        discarded = discard_study(options.storage_url, options.name)
        if discarded is not None:
            print(
                f"autotune: --new: deleted study {options.name!r} ({discarded} trial(s)) from "
                f"{shown(options.storage_url)}; starting it afresh",
                file=sys.stderr,
            )
    print(
        f"autotune: searching {options.model} on {','.join(options.devices)}: study {options.name!r}, "
        f"up to {options.trials} trial(s) in all, space {options.space!r} (effort {args.effort}), "
        f"storage {shown(options.storage_url)}",
        file=sys.stderr,
    )
    result = with_display(args, lambda progress: search(options, progress=progress))
    if args.json:
        from autotune.cli._json import emit, tuned_summary  # lazy: see the package docstring

        if result is not None and result.tuned_path is not None:
            emit("search", tuned_summary(result.tuned_path))
        else:
            note = (
                "another host's search confirms and exports the shared study" if result is None else "nothing exported"
            )
            emit("search", {"exported": None, "note": note})
    elif result is not None:  # None: another host's search confirms and exports the shared study
        print_result(result)
    return EXIT_OK


def _dry_run(options: SearchOptions, args: argparse.Namespace) -> int:
    """`autotune search --dry-run`: the plan and its estimate on stdout (or as JSON); the study is not opened."""
    from autotune.study.search import dry_run  # lazy: see the package docstring

    planned = with_display(args, lambda progress: dry_run(options, progress=progress))
    if args.json:
        from autotune.cli._json import emit  # lazy: see the package docstring

        emit("search", {"dry_run": planned.to_dict()})
    else:
        print("\n".join(planned.lines()))
    return EXIT_OK
