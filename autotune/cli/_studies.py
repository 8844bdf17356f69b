"""`autotune studies`: the studies in an output folder or a storage, with their verdicts."""

from __future__ import annotations

import argparse
import sys

from autotune.cli._common import EXIT_OK

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "studies"
HELP = "list the studies in an output folder or a storage, with their trials and verdicts"
DESCRIPTION = (
    "List every study in FOLDER (its study.db and those of the folders in it, as `autotune search --out` leaves "
    "them), or in --storage: its name, the model, the device, its trials by state and the verdict of the "
    "best.yaml beside it."
)
EPILOG = None


def add_flags(p: argparse.ArgumentParser) -> None:
    """FOLDER or --storage."""
    p.add_argument(
        "folder", nargs="?", default="outputs", help="an output folder, or a folder of them (default: outputs)"
    )
    p.add_argument(
        "--storage",
        metavar="URL",
        help="list the studies in this Optuna storage instead (sqlite:///..., postgresql://..., journal:///...)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune studies`."""
    from pathlib import Path  # lazy: see the package docstring

    from autotune.study.report import studies_in, studies_in_storage  # lazy: see the package docstring

    rows = studies_in_storage(args.storage) if args.storage else studies_in(Path(args.folder))
    if not rows:
        print(f"autotune: no study in {args.storage or args.folder}", file=sys.stderr)
        return EXIT_OK
    for row in rows:
        trials = ", ".join(f"{count} {state}" for state, count in sorted(row.trials.items())) or "no trials"
        print(f"{row.name}  ({row.storage})")
        print(f"  model {row.model} on {row.device}; {trials}")
        print(f"  {row.verdict}")
    return EXIT_OK
