"""`autotune validate`: re-measure a saved configuration against eager and plain torch.compile."""

from __future__ import annotations

import argparse

from autotune.cli._common import EXIT_OK

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "validate"
HELP = "re-measure a saved configuration (best.yaml or a recipe) against eager and plain torch.compile"
DESCRIPTION = (
    "Measure a configuration file against eager and plain torch.compile in fresh processes, in rotated "
    "rounds, and print its ratios to both with their intervals. Exit code 0 when the configuration runs "
    "and matches eager in every round, 1 when it fails."
)
EPILOG = None


def add_flags(p: argparse.ArgumentParser) -> None:
    """The file, the workload and device, and how long to measure."""
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
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune validate`."""
    from autotune.measure import validate  # lazy: see the package docstring

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
