"""What several commands share: exit codes, flags that mean the same everywhere, and printing a search's result."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "add_deprecated_alias",
    "add_replicates",
    "EXIT_ERROR",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_TERMINATED",
    "add_inputs",
    "add_no_compile_cache",
    "add_pick",
    "model_with_inputs",
    "options_from",
    "print_result",
    "with_display",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
"""`autotune doctor`: the model has graph breaks or recompiles (the report says which and how to fix them);
`autotune validate`: the configuration fails."""
EXIT_ERROR = 2
EXIT_REGRESSION = 3
"""`autotune retune`: the tuned configuration fails or got slower here (see its report); `autotune validate`: the
configuration works but is decided slower than plain torch.compile."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT): the running trial is recorded as failed ('interrupted') and its worker killed."""
EXIT_TERMINATED = 143
"""SIGTERM (a scheduler stopping the job): as Ctrl-C, the running trial recorded as interrupted and every worker
killed; a second SIGTERM meanwhile is ignored, so that the shutdown the first began finishes."""


def options_from(cls: Any, args: argparse.Namespace, **given: Any) -> Any:
    """An options dataclass from the parsed flags: every field that has a flag of the same name, plus `given`."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**values, **given})


def add_inputs(p: argparse.ArgumentParser | Any) -> None:
    """--inputs and --task: example inputs that make a bare nn.Module a target, for inference."""
    p.add_argument(
        "--inputs",
        metavar="PKG.MOD:ATTR",
        help="example inputs for a bare nn.Module given as --model: a list of batches (each a tensor, a tuple of "
        "tensors or a dict of them), or a function returning one; the dynamic axes are found from their shapes. "
        "Not needed for a module with an example_inputs() method",
    )
    p.add_argument(
        "--task",
        choices=("infer", "train"),
        help="what to tune a bare nn.Module for: infer (the default with --inputs); training needs a Workload "
        "with an optimizer and a loss, or your own step",
    )


def model_with_inputs(args: argparse.Namespace) -> str:
    """The target string of --model with its --inputs; --task checked against what a bare module can do."""
    from autotune.errors import ConfigError  # lazy: see the package docstring
    from autotune.workload.resolve import with_inputs  # lazy: see the package docstring

    if args.task == "train":
        raise ConfigError(
            "--task train: a bare module with example inputs is tuned for inference; for training, return a "
            "Workload with optimizer=... and loss=... (or your own step=...) from a function, and pass that as "
            "--model (docs/workload.md)."
        )
    if args.task is not None and args.inputs is None:
        raise ConfigError(
            f"--task {args.task}: applies to a bare nn.Module given with --inputs; a Workload says its own task."
        )
    return with_inputs(args.model, args.inputs)


class _DeprecatedAlias(argparse.Action):
    """An old spelling of a flag: it still works, for one release, and says which flag replaces it."""

    def __init__(self, option_strings: list[str], dest: str, *, replacement: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        print(
            f"autotune: {option_string} is the old name of {self.replacement}, which means the same; it will be "
            "removed in a later release",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_replicates(
    p: argparse.ArgumentParser | Any,
    *,
    least: tuple[int | None, str],
    most: tuple[int | None, str],
    old_least: str,
) -> None:
    """--replicates and --max-replicates (`least` and `most`: default and help), stored in `replicates` and
    `max_replicates`, with their old spellings `old_least` and --max-rounds as deprecated aliases."""
    default, said = least
    p.add_argument("--replicates", dest="replicates", type=int, default=default, metavar="N", help=said)
    p.add_argument("--max-replicates", dest="max_replicates", type=int, default=most[0], metavar="N", help=most[1])
    add_deprecated_alias(p, old_least, "--replicates", "replicates")
    add_deprecated_alias(p, "--max-rounds", "--max-replicates", "max_replicates")


def add_deprecated_alias(p: argparse.ArgumentParser | Any, old: str, new: str, dest: str) -> None:
    """`old`, a deprecated spelling of the flag `new` (stored in `dest`): it works and warns once used."""
    p.add_argument(
        old,
        dest=dest,
        type=int,
        action=_DeprecatedAlias,
        replacement=new,
        default=argparse.SUPPRESS,
        metavar="N",
        help=f"deprecated: the old name of {new}, kept for one release",
    )


def add_no_compile_cache(p: argparse.ArgumentParser | Any, consequence: str) -> None:
    """--no-compile-cache, saying what skipping it changes for this command."""
    p.add_argument(
        "--no-compile-cache",
        dest="compile_cache",
        action="store_false",
        help=f"do not save the winner's compile artifacts ({consequence})",
    )


def add_pick(p: argparse.ArgumentParser | Any, default: str | None) -> None:
    """--pick: which point of a Pareto front best.yaml gets."""
    said = f"default: {default}" if default else "default: the rule the search was given"
    p.add_argument(
        "--pick",
        default=default,
        metavar="RULE",
        help="multi-objective only: which Pareto point best.yaml gets: fastest (what a throughput search would "
        "export), fastest:Kx or fastest:Ss (the same among points compiling within K times plain torch.compile's "
        f"compile time, or S seconds), least-compile, least-memory, eager, compile or trial:N ({said})",
    )


def print_result(result: Any) -> None:
    """The summary report.md opens with and `autotune show` prints: verdict, confirmation, search table."""
    from autotune.study.report import render_summary  # lazy: see the package docstring

    print()
    metrics = result.summary.get("metrics") or {}
    print(render_summary(metrics, result.summary))
    for line in _pareto_lines(metrics, result.out_dir):
        print(line)
    if result.tuned_path:
        print(
            f"Exported {result.tuned_path} and {result.out_dir / 'apply_compilation.py'} "
            f"(report: {result.out_dir / 'report.md'}, trials: {result.out_dir / 'trials.csv'})."
        )


def _pareto_lines(metrics: dict[str, Any], out_dir: Any) -> list[str]:
    if not metrics.get("pareto"):
        return []
    lines = ["", f"Pareto front ({metrics.get('objectives')}; best.yaml is --pick {metrics.get('pick')}):"]
    for point in metrics["pareto"]:
        figures = point["figures"]
        speed = next(iter(figures.items()))
        memory = figures.get("peak_memory_mb")
        lines.append(
            f"  {point['subject']:<10} {speed[0]} {speed[1]:.4g}  compile {figures['compile_seconds']:.3g} s"
            f"{f'  peak {memory:.4g} MiB' if memory is not None else ''}  -> {out_dir / point['best']}"
        )
    return lines


def with_display(args: argparse.Namespace, work: Callable[[Any], T], *, retune: bool = False) -> T:
    """`work(progress)` with the live display of search and retune on standard error, closed however it ends."""
    from autotune.study.report import SearchDisplay  # lazy: see the package docstring

    display = SearchDisplay(sys.stderr, retune=retune, verbosity=args.verbosity)
    try:
        return work(display)
    finally:
        display.close()
