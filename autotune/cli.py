"""The `autotune` command line: a thin layer over the library, one function per subcommand.

Each command imports the library when it runs (`# lazy:` below), so that `autotune --help`
answers without loading torch, Optuna and Inductor.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from autotune.errors import AutotuneError, ConfigError

if TYPE_CHECKING:
    from autotune.trial.request import Protocol

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REGRESSION", "main"]

EXIT_OK = 0
EXIT_FINDINGS = 1
"""`autotune doctor`: the model has graph breaks or recompiles (the report says which and how to fix them)."""
EXIT_ERROR = 2
EXIT_REGRESSION = 3
"""`autotune retune`: the tuned configuration fails or got slower here (see its report)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT): the running trial is recorded as failed ('interrupted') and its worker killed."""

Command = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        return int(args.run(args))
    except AutotuneError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`autotune show ... | head`): nothing left to say, and no one to say it to.
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:
        # Not one of ours: still one of the documented exit codes, so a scheduler can tell it apart
        # from a regression; the traceback goes first, since this is a bug to report or a storage failing.
        traceback.print_exc()
        where = "the study storage failed" if type(exc).__module__.startswith("sqlalchemy") else "unexpected error"
        print(f"autotune: error: {where}: {type(exc).__name__}: {_first_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else ""


def build_parser() -> argparse.ArgumentParser:
    """The parser for every subcommand (each documents its flags in --help)."""
    parser = argparse.ArgumentParser(
        prog="autotune",
        description=(
            "Find the fastest torch.compile configuration for your own model and workload, prove it "
            "against eager and plain torch.compile, and export it as best.yaml plus a standalone "
            "apply_compilation.py."
        ),
        epilog="Run `autotune COMMAND --help` for a command's options.",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name, (summary, description, epilog, add_flags) in _COMMANDS.items():
        add_flags(_command(commands, name, help=summary, description=description, epilog=epilog))
    return parser


_SEARCH_EPILOG = """\
outputs (in --out, default outputs/<study-name>/):
  best.yaml             the winning configuration with its metrics, baselines, study summary and environment
  apply_compilation.py  the generated code that applies it (needs only torch)
  trials.csv            every trial: state, reason, compile seconds, throughput, speedups, memory, its configuration
  report.md             verdict, tables and plots (history.png, throughput_vs_compile.png, importances.png)
  compile_cache.bin     the winner's compile artifacts; load_compile_cache() loads them with the same torch and device
  study.db              the Optuna study (SQLite), unless --storage names another

Re-running the same command resumes the study: finished trials count towards --trials.
With --storage postgresql://... several hosts run the same command on one study: --trials is
the study's total, and the host that finishes its last trial confirms and exports.

examples:
  autotune search --model examples.toy:model --trials 8
  autotune search --model mypkg.tune:model --space quick --device cuda:1 --objective time-to:500
"""


def _command(
    commands: argparse._SubParsersAction, name: str, *, help: str, description: str, epilog: str | None = None
) -> argparse.ArgumentParser:
    """A subcommand's parser; an epilog keeps its own line breaks (exit codes, examples)."""
    formatter = argparse.RawDescriptionHelpFormatter if epilog else argparse.HelpFormatter
    return commands.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=formatter)


def _no_compile_cache(p: argparse.ArgumentParser, consequence: str) -> None:
    p.add_argument(
        "--no-compile-cache",
        dest="compile_cache",
        action="store_false",
        help=f"do not save the winner's compile artifacts ({consequence})",
    )


def _add_search(p: argparse.ArgumentParser) -> None:
    from autotune.study.effort import EFFORTS  # lazy: see the module docstring
    from autotune.study.pareto import DEFAULT_PICK  # lazy: see the module docstring
    from autotune.trial.measure import PRECISION_TOLERANCE  # lazy: see the module docstring
    from autotune.trial.request import Protocol  # lazy: see the module docstring

    p.add_argument(
        "--model",
        required=True,
        metavar="PKG.MOD:ATTR",
        help="the workload: a Workload, an nn.Module (transformers models get synthesised batches) or a zero-argument factory of either",
    )
    levels = "; ".join(f"{name}: {level.describe()}" for name, level in EFFORTS.items())
    p.add_argument(
        "--effort",
        choices=list(EFFORTS),
        default="default",
        help=f"how much to try, setting --space, --trials, --confirm, --rounds and --max-rounds together "
        f"(each flag given explicitly wins) ({levels}; default: default)",
    )
    p.add_argument(
        "--space",
        metavar="NAME|PATH",
        help="a bundled search space (see `autotune spaces`) or a YAML file (default: from --effort)",
    )
    p.add_argument("--trials", type=int, help="trials in the study, resumed ones included (default: from --effort)")
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop starting new trials after this many seconds (default: none)",
    )
    p.add_argument(
        "--trial-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="kill a trial's whole process group after this many seconds (default: 900)",
    )
    p.add_argument(
        "--device",
        metavar="cpu|cuda|cuda:N[,cuda:M...]",
        help="where trials run (default: cuda when available, else cpu); several CUDA devices run trials side by "
        "side, one worker each (baselines and the confirmation run on the first)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="trials run at once (default: one per device); workers that share a device compile side by side and "
        "measure one at a time, the others stopped meanwhile",
    )
    p.add_argument("--out", metavar="DIR", help="output folder (default: outputs/<study-name>)")
    p.add_argument("--study-name", help="the study's name (default: derived from --model, e.g. examples.toy-model)")
    p.add_argument(
        "--storage",
        metavar="URL",
        help="an Optuna storage URL (default: sqlite in --out); postgresql://USER@HOST/DB lets several hosts share "
        "the study (pip install autotune[postgres])",
    )
    p.add_argument(
        "--heartbeat-interval",
        type=int,
        default=10,
        metavar="SECONDS",
        help="with a shared --storage (not SQLite): a running trial records a heartbeat this often (default: 10)",
    )
    p.add_argument(
        "--grace-period",
        type=int,
        default=60,
        metavar="SECONDS",
        help="with a shared --storage: a trial without a heartbeat for this long is failed as abandoned by any host "
        "and its configuration queued again, once (default: 60)",
    )
    p.add_argument(
        "--sampler",
        choices=("tpe", "random", "bruteforce"),
        default="tpe",
        help="tpe (seeded, default), random, or bruteforce (every configuration of the space once)",
    )
    p.add_argument(
        "--pruner",
        choices=("median", "hyperband", "none"),
        default="median",
        help="stops trials whose throughput windows trail the others (default: median)",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds the sampler and the batches drawn (default: 0)")
    p.add_argument(
        "--objective",
        default="throughput",
        metavar="OBJECTIVE[,TRADE-OFF...]",
        help="throughput (maximise samples/s, the default) or time-to:N (minimise compile time plus N steps); "
        "add compile-time and/or peak-memory (e.g. throughput,compile-time) for a multi-objective search that "
        "exports a Pareto front (pareto.yaml, pareto/<point>/)",
    )
    _pick(p, DEFAULT_PICK)
    p.add_argument(
        "--max-compile-seconds",
        type=float,
        metavar="SECONDS",
        help="stop trials whose compile and warm-up take longer; replaces --compile-budget (default: none)",
    )
    p.add_argument(
        "--compile-budget",
        type=float,
        default=4.0,
        metavar="K",
        help="stop a trial as soon as its compile and warm-up run longer than K times plain torch.compile's "
        "(measured when the session starts; never less than 60 s); with --objective time-to:N also once it has run longer than the best "
        "complete trial's whole time (default: 4; 0: no budget)",
    )
    p.add_argument(
        "--max-failure-rate",
        type=float,
        default=0.8,
        help="stop the search when more than this fraction of (at least 5) trials failed (default: 0.8)",
    )
    p.add_argument(
        "--slow-ratio",
        type=float,
        default=0.5,
        help="prune trials running below this fraction of eager's throughput (default: 0.5)",
    )
    p.add_argument(
        "--confirm",
        type=int,
        help="re-measure the best N trials with both baselines in rotated rounds before choosing "
        "(default: from --effort; 0 to skip)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        help="rotated confirmation rounds before the confirmation may stop (default: from --effort)",
    )
    p.add_argument(
        "--max-rounds",
        type=int,
        help="confirmation rounds at most, added while the leader's interval against plain compile does not decide "
        "(default: from --effort)",
    )
    p.add_argument(
        "--allow-precision-changes",
        action="store_true",
        help="also search settings that change numerics (float32 matmul precision 'high'/'medium', unsafe math); "
        f"such a trial passes the accuracy check within a relative error of {PRECISION_TOLERANCE:g} instead of "
        "the dtype's own tolerance, and the generated code says so",
    )
    p.add_argument(
        "--fresh-batches",
        type=int,
        default=Protocol().fresh_batches,
        help="batches each run has not seen, run once after the steady-state windows: the throughput figure, "
        "recompiles of new shapes included (default: %(default)s; 0: the fixed batches only)",
    )
    p.add_argument(
        "--windows",
        type=int,
        default=Protocol().windows,
        help="steady-state measurement windows per trial (default: 5)",
    )
    p.add_argument(
        "--window-seconds",
        type=float,
        default=Protocol().window_seconds,
        metavar="SECONDS",
        help="each window runs passes over the fixed batches until it lasts this long, at least (default: "
        "%(default)s); longer windows average out more of a busy machine's jitter, shorter ones measure sooner",
    )
    p.add_argument(
        "--fresh-seconds",
        type=float,
        default=Protocol().fresh_seconds,
        metavar="SECONDS",
        help="the fresh batches run again until their stream lasts this long, at least (default: %(default)s): "
        "a fast model's single pass would be too short to time",
    )
    p.add_argument(
        "--no-recipes",
        dest="recipes",
        action="store_false",
        help="do not start a new study with plain torch.compile and the generic expert recipes (mark_dynamic on "
        "declared dynamic inputs, regional, max-autotune-no-cudagraphs, padding to 8, compiled optimizer); they "
        "take at most half of --trials",
    )
    p.add_argument(
        "--no-doctor",
        dest="doctor",
        action="store_false",
        help="skip the first phase, which finds the workload's graph breaks and recompiles (see `autotune doctor`)",
    )
    _no_compile_cache(p, "saving them costs two more runs of the winner")
    p.set_defaults(run=run_search)


def _options(cls: Any, args: argparse.Namespace, **given: Any) -> Any:
    """An options dataclass from the parsed flags: every field that has a flag of the same name, plus `given`."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**values, **given})


def _protocol(args: argparse.Namespace) -> Protocol:
    """The measurement protocol of `autotune search`'s flags; a bad value is named by its flag."""
    from autotune.trial.request import Protocol  # lazy: see the module docstring

    given = {name: getattr(args, name) for name in ("windows", "fresh_batches", "window_seconds", "fresh_seconds")}
    try:
        return Protocol(**given)
    except ConfigError as exc:
        message = str(exc)
        for name in given:
            message = message.replace(f"protocol.{name}:", f"--{name.replace('_', '-')}:")
        raise ConfigError(message) from None


def run_search(args: argparse.Namespace) -> int:
    """`autotune search`."""
    from autotune.study.effort import effort  # lazy: see the module docstring
    from autotune.study.search import SearchOptions, search  # lazy: see the module docstring
    from autotune.study.storage import shown  # lazy: see the module docstring

    level = effort(args.effort)
    for name in ("space", "trials", "confirm"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(level, name))
    if args.rounds is None:
        args.rounds = level.rounds if args.max_rounds is None else min(level.rounds, args.max_rounds)
    if args.max_rounds is None:
        # More --rounds than the level's most: those rounds are what was asked for.
        args.max_rounds = max(level.max_rounds, args.rounds)
    options = _options(SearchOptions, args, protocol=_protocol(args))
    print(
        f"autotune: searching {options.model} on {','.join(options.devices)}: study {options.name!r}, "
        f"up to {options.trials} trial(s) in all, space {options.space!r} (effort {args.effort}), "
        f"storage {shown(options.storage_url)}",
        file=sys.stderr,
    )
    from autotune.study.display import SearchDisplay  # lazy: see the module docstring

    display = SearchDisplay(sys.stderr)
    try:
        result = search(options, progress=display)
    finally:
        display.close()
    if result is not None:  # None: another host's search confirms and exports the shared study
        print_result(result)
    return EXIT_OK


def print_result(result: Any) -> None:
    """The summary report.md opens with and `autotune show` prints: verdict, confirmation, search table."""
    from autotune.study.verdict import render_summary  # lazy: see the module docstring

    print()
    metrics = result.summary.get("metrics") or {}
    print(render_summary(metrics, result.summary))
    if metrics.get("pareto"):
        print()
        print(f"Pareto front ({metrics.get('objectives')}; best.yaml is --pick {metrics.get('pick')}):")
        for point in metrics["pareto"]:
            figures = point["figures"]
            speed = next(iter(figures.items()))
            memory = figures.get("peak_memory_mb")
            print(
                f"  {point['subject']:<10} {speed[0]} {speed[1]:.4g}  compile {figures['compile_seconds']:.3g} s"
                f"{f'  peak {memory:.4g} MiB' if memory is not None else ''}  -> {result.out_dir / point['best']}"
            )
    if result.tuned_path:
        print(
            f"Exported {result.tuned_path} and {result.out_dir / 'apply_compilation.py'} "
            f"(report: {result.out_dir / 'report.md'}, trials: {result.out_dir / 'trials.csv'})."
        )


def _add_spaces(p: argparse.ArgumentParser) -> None:
    p.set_defaults(run=run_spaces)


def run_spaces(args: argparse.Namespace) -> int:
    """`autotune spaces`."""
    from autotune.study.space import bundled_spaces, load_space  # lazy: see the module docstring

    for name, path in bundled_spaces().items():
        space = load_space(str(path))
        print(f"{name:<10} {path}")
        print(f"           {space.description}")
    return EXIT_OK


def _pick(p: argparse.ArgumentParser, default: str | None) -> None:
    said = f"default: {default}" if default else "default: the rule the search was given"
    p.add_argument(
        "--pick",
        default=default,
        metavar="RULE",
        help="multi-objective only: which Pareto point best.yaml gets: fastest (what a throughput search would "
        "export), fastest:Kx or fastest:Ss (the same among points compiling within K times plain torch.compile's "
        f"compile time, or S seconds), least-compile, least-memory, eager, compile or trial:N ({said})",
    )


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage",
        required=True,
        metavar="URL",
        help="Optuna storage URL, e.g. sqlite:///outputs/NAME/study.db or a shared postgresql://USER@HOST/DB",
    )
    p.add_argument("--study-name", required=True, help="the study's name")
    p.add_argument("--out", metavar="DIR", help="output folder (default: outputs/<study-name>)")
    _pick(p, None)
    p.set_defaults(run=run_export)


def run_export(args: argparse.Namespace) -> int:
    """`autotune export`."""
    from autotune.study.export import export_from_storage  # lazy: see the module docstring

    result = export_from_storage(args.storage, args.study_name, args.out, pick=args.pick)
    print_result(result)
    return EXIT_OK


def _add_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a best.yaml, or a recipe file with a `config:` section")
    p.add_argument("--model", metavar="PKG.MOD:ATTR", help="the workload (default: the one recorded in best.yaml)")
    p.add_argument("--device", metavar="cpu|cuda|cuda:N", help="default: cuda when available, else cpu")
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rotated rounds of eager, plain compile and the configuration (default: 3)",
    )
    p.add_argument(
        "--max-rounds",
        type=int,
        default=None,
        help="rounds at most, added while the interval does not decide (default: --repeats)",
    )
    p.add_argument("--trial-timeout", type=float, default=900.0, metavar="SECONDS", help="limit per run (default: 900)")
    p.set_defaults(run=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    """`autotune validate`."""
    from autotune.study.validate import validate  # lazy: see the module docstring

    report = validate(
        args.path,
        model=args.model,
        device=args.device,
        repeats=args.repeats,
        max_rounds=args.max_rounds,
        trial_timeout=args.trial_timeout,
    )
    print(report.render())
    return EXIT_OK if report.ok else 1


_RETUNE_EPILOG = f"""\
exit codes:
  {EXIT_OK}  unchanged (the incumbent stays) or improved (a faster challenger replaced it)
  {EXIT_REGRESSION}  regression: the incumbent fails here, or its ratio to plain torch.compile (or to eager),
     measured in the same rotated rounds, fell by more than --max-regression since it was tuned, with an
     interval that excludes no change; the files change only if a working challenger replaced it
  {EXIT_ERROR}  error: no study, a damaged study or storage, a workload that does not run, bad options
     (nothing was changed)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C): the files are as they were, or as a completed replacement left them

what it writes, beside best.yaml:
  best.yaml, apply_compilation.py, compile_cache.bin   replaced together, the old ones kept as *.prev.*
  history.jsonl         one JSON line per retune: date, environment, figures, decision
  report.md             with the retune history (retune_history.png), trials.csv

examples:
  autotune retune outputs/examples.toy-model/best.yaml
  autotune retune outputs/mymodel/best.yaml --trials 8 --min-gain 0.05 --device cuda:1
"""


def _add_retune(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path", help="the best.yaml of a search (its folder gets the new files, history.jsonl and the report)"
    )
    p.add_argument("--model", metavar="PKG.MOD:ATTR", help="the workload (default: the one recorded in best.yaml)")
    p.add_argument(
        "--trials", type=int, default=4, help="new trials after the incumbent and previous top trials (default: 4)"
    )
    p.add_argument("--top", type=int, default=3, help="previous top trials measured again first (default: 3)")
    p.add_argument(
        "--min-gain",
        type=float,
        default=0.03,
        metavar="FRACTION",
        help="how much faster a challenger must be to replace the incumbent (default: 0.03, i.e. 3%%)",
    )
    p.add_argument(
        "--max-regression",
        type=float,
        default=0.10,
        metavar="FRACTION",
        help="how far the incumbent's ratio to plain compile or eager may fall since tuning (default: 0.10)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="rotated rounds of eager, plain compile, incumbent and challenger before stopping (default: 3)",
    )
    p.add_argument(
        "--max-rounds", type=int, default=6, help="rounds at most, while the intervals do not decide (default: 6)"
    )
    p.add_argument(
        "--device", metavar="cpu|cuda|cuda:N", help="where to measure (default: the device recorded in best.yaml)"
    )
    p.add_argument(
        "--storage", metavar="URL", help="the study's storage (default: as recorded; study.db beside best.yaml)"
    )
    p.add_argument("--space", metavar="NAME|PATH", help="search space of the new trials (default: the study's own)")
    p.add_argument("--trial-timeout", type=float, default=900.0, metavar="SECONDS", help="limit per run (default: 900)")
    _no_compile_cache(p, "compile_cache.bin is then removed")
    p.set_defaults(run=run_retune)


def run_retune(args: argparse.Namespace) -> int:
    """`autotune retune`."""
    from autotune.study.retune import RetuneOptions, retune  # lazy: see the module docstring

    options = _options(RetuneOptions, args)
    from autotune.study.display import SearchDisplay  # lazy: see the module docstring

    display = SearchDisplay(sys.stderr, retune=True)
    try:
        result = retune(options, progress=display)
    finally:
        display.close()
    print(result.render())
    return EXIT_REGRESSION if result.regressed else EXIT_OK


def _add_show(show: argparse.ArgumentParser) -> None:
    show.add_argument("path", help="a best.yaml file")
    show.add_argument("--code", action="store_true", help="also print the generated apply_compilation.py")
    show.add_argument("--raw", action="store_true", help="also print every section of the file, unrounded")
    show.set_defaults(run=run_show)


def run_show(args: argparse.Namespace) -> int:
    """`autotune show PATH`; control characters read from the file are shown escaped, never sent to the terminal."""
    from autotune.runtime import compile_cache, tuned  # lazy: see the module docstring
    from autotune.runtime.limits import printable  # lazy: see the module docstring
    from autotune.study.verdict import render_summary  # lazy: see the module docstring

    def print(*values: Any, end: str = "\n") -> None:  # noqa: A001 - every line read from the file, escaped
        sys.stdout.write(printable(" ".join(map(str, values))) + end)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tuned.EnvironmentMismatchWarning)
        config = tuned.read(args.path)
    print(f"{args.path}  (schema {tuned.SCHEMA_VERSION}, created {config.created}, autotune {config.autotune_version})")
    print(f"workload: {config.workload.spec} ({config.workload.task}, {config.workload.model_class})")
    print(f"configuration: {config.config.describe()}")
    doctor = config.study.get("doctor")
    if isinstance(doctor, Mapping) and doctor.get("verdict"):
        print(f"doctor: {doctor['verdict']}")
    print()
    print(render_summary(config.metrics, config.study))
    print()
    try:
        print(compile_cache.describe(config.compile_cache) if config.compile_cache else "compile cache: none recorded")
    except (KeyError, TypeError, ValueError):
        print("compile cache: recorded, but its section is incomplete (see --raw)")
    if args.raw:
        print()
        print("config:")
        for key, value in config.config.to_dict().items():
            print(f"  {key}: {value}")
        for section in ("metrics", "baselines", "study", "compile_cache", "environment"):
            data = getattr(config, section)
            if data:
                print(f"{section}:")
                for key, value in data.items():
                    print(f"  {key}: {value}")
    changed = config.environment_differences()
    if not config.environment:
        print("environment: not recorded; cannot tell whether it matches this machine.")
    elif changed:
        print(f"environment: DIFFERS from this machine; run `autotune retune {args.path}` to re-measure and retune it:")
        for key, (old, new) in changed.items():
            print(f"  {key}: tuned with {old}, here {new}")
    else:
        print("environment: matches this machine.")
    if args.code:
        print()
        print(config.source, end="")
    return EXIT_OK


_DOCTOR_EPILOG = f"""\
The model is compiled with dynamo's `eager` backend: graph breaks and recompiles are decided by
dynamo before any backend runs, so they are the ones plain torch.compile(model) has, found in
seconds. It runs two passes over the workload's fixed batches, then --fresh-batches new ones.

exit codes:
  {EXIT_OK}  clean: no graph breaks, no recompiles
  {EXIT_FINDINGS}  graph breaks or recompiles were found (each with where, why and a fix where one is known)
  {EXIT_ERROR}  error: the workload cannot be built or does not run
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)

examples:
  autotune doctor --model examples.captioning:captioning_dynamic
  autotune doctor --model mypkg.tune:model --format json > doctor.json
"""


def _add_doctor(p: argparse.ArgumentParser) -> None:
    from autotune.trial.request import Protocol  # lazy: see the module docstring

    p.add_argument("--model", required=True, metavar="PKG.MOD:ATTR", help="the workload, as for `autotune search`")
    p.add_argument("--device", metavar="cpu|cuda|cuda:N", help="default: cuda when available, else cpu")
    p.add_argument("--seed", type=int, default=0, help="seeds the batches drawn (default: 0)")
    p.add_argument(
        "--fresh-batches",
        type=int,
        default=Protocol().fresh_batches,
        help="new batches to run after the fixed ones, where new lengths show their recompiles (default: %(default)s)",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="text for people (default), json for tools"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="kill the analysis after this long (default: 900)",
    )
    p.set_defaults(run=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    """`autotune doctor`."""
    import json  # lazy: see the module docstring

    from autotune.study.doctor import diagnose  # lazy: see the module docstring
    from autotune.trial.request import Protocol, check_device  # lazy: see the module docstring

    if args.fresh_batches < 0:
        raise ConfigError(f"--fresh-batches {args.fresh_batches}: must be >= 0.")
    if args.timeout <= 0:
        raise ConfigError(f"--timeout {args.timeout}: must be a positive number of seconds.")
    device = check_device(args.device)
    if args.format == "text":
        print(f"autotune: doctor: running {args.model} on {device} under dynamo ...", file=sys.stderr)
    diagnosis = diagnose(
        args.model, device, seed=args.seed, protocol=Protocol(fresh_batches=args.fresh_batches), timeout=args.timeout
    )
    if args.format == "json":
        print(json.dumps(diagnosis.to_dict(), indent=2))
    else:
        print(diagnosis.render())
    return EXIT_OK if diagnosis.clean else EXIT_FINDINGS


_COMMANDS: dict[str, tuple[str, str, str | None, Callable[[argparse.ArgumentParser], None]]] = {
    "search": (
        "search the compile-configuration space for a workload and export the winner",
        (
            "Run an Optuna study over torch.compile configurations for a workload. Every trial runs in a "
            "fresh process with its own Inductor/Triton caches and a hard timeout, is checked against eager, "
            "and is measured with the same protocol as the eager and plain torch.compile baselines."
        ),
        _SEARCH_EPILOG,
        _add_search,
    ),
    "doctor": (
        "find the model's graph breaks and recompiles, and say how to fix each",
        (
            "Run the workload under dynamo in a fresh process and report every graph break (where dynamo broke, "
            "the model code that led there, how often, why, and a fix where one is known) and every recompile "
            "(which input's size or which guard changed, and the setting that avoids it), verdict first."
        ),
        _DOCTOR_EPILOG,
        _add_doctor,
    ),
    "spaces": (
        "list the bundled search spaces",
        "List the bundled search spaces and what each is for.",
        None,
        _add_spaces,
    ),
    "export": (
        "re-export best.yaml, apply_compilation.py, trials.csv and report.md from a study",
        "Re-export a study's files from any Optuna storage (e.g. a shared PostgreSQL study).",
        None,
        _add_export,
    ),
    "validate": (
        "re-measure a saved configuration (best.yaml or a recipe) against eager and plain torch.compile",
        (
            "Measure a configuration file against eager and plain torch.compile in fresh processes, in rotated "
            "rounds, and print its ratios to both with their intervals. Exit code 0 when the configuration runs "
            "and matches eager in every round, 1 when it fails."
        ),
        None,
        _add_validate,
    ),
    "retune": (
        "re-measure a tuned configuration, search a little more, and replace it only on a significant win",
        (
            "Check a tuned configuration where it runs today, e.g. nightly: run a short warm-started search in "
            "the same study (the incumbent and the previous top trials first, then --trials new ones), then "
            "measure eager, plain torch.compile, the incumbent and the best challenger in fresh processes, in "
            "rotated rounds (--repeats to --max-rounds), and compare the environment and the model with those "
            "recorded in best.yaml. A challenger replaces the incumbent only if its paired ratio to it has a "
            "median above 1 + --min-gain and an interval wholly above 1."
        ),
        _RETUNE_EPILOG,
        _add_retune,
    ),
    "show": (
        "print a best.yaml: settings, metrics, environment and whether it matches this machine",
        "Print a tuned configuration file and say whether it was tuned on this machine's software and device.",
        None,
        _add_show,
    ),
}
"""Each subcommand: its one-line help, its description, its epilog, and the function that adds its flags."""
