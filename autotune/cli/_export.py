"""`autotune export`: write a study's files again from any Optuna storage."""

from __future__ import annotations

import argparse

from autotune.cli._common import EXIT_OK, add_pick, print_result

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "export"
HELP = "re-export best.yaml, apply_compilation.py, trials.csv and report.md from a study"
DESCRIPTION = "Re-export a study's files from any Optuna storage (e.g. a shared PostgreSQL study)."
EPILOG = None


def add_flags(p: argparse.ArgumentParser) -> None:
    """Which study, and where its files go."""
    p.add_argument(
        "--storage",
        required=True,
        metavar="URL",
        help="Optuna storage URL, e.g. sqlite:///outputs/NAME/study.db, a shared postgresql://USER@HOST/DB or journal:///PATH",
    )
    p.add_argument("--study-name", required=True, help="the study's name")
    p.add_argument("--out", metavar="DIR", help="output folder (default: outputs/<study-name>)")
    add_pick(p, None)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune export`."""
    from autotune.study.report import export_from_storage  # lazy: see the package docstring

    result = export_from_storage(args.storage, args.study_name, args.out, pick=args.pick)
    print_result(result)
    return EXIT_OK
