"""`autotune explain`: narrow a failed trial to the settings and the compiler stage that cause it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autotune.cli._common import EXIT_OK

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "explain"
HELP = "narrow a failed trial to the settings and the compiler stage that cause it, and write a reproduction"
DESCRIPTION = (
    "Narrow a trial that failed for a reason a setting can cause (compile error, accuracy, recompile limit, out of "
    "memory, graph break) to the smallest set of its settings that still fails, by short runs in fresh processes "
    "with settings removed; name the first compiler stage that fails (PyTorch's own bisector); and write "
    "OUT_DIR/failures/trial-N/repro.py, a script that needs only torch and your module, with a README of the versions."
)
EPILOG = (
    "The explanation goes into the study and report.md's Failures section (autotune export writes it again), and a "
    "search resumed on the study does not sample the culprit settings again. "
    "Example: autotune explain outputs/mypkg.tune-model 7"
)


def add_flags(p: argparse.ArgumentParser) -> None:
    """The study's folder, the trial, and the budget."""
    p.add_argument("out", metavar="OUT_DIR", help="the folder a search wrote into (it holds study.db)")
    p.add_argument("trial", type=int, metavar="TRIAL", help="the number of a failed trial")
    p.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="the most seconds narrowing and bisecting may take (default: four times the trial's own run); when "
        "it runs out, what was found so far is reported",
    )
    p.add_argument("--study-name", help="the study, where study.db holds several")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune explain OUT_DIR TRIAL`."""
    from autotune.study.explain import explain_in_folder  # lazy: see the package docstring
    from autotune.study.search import known_option_needs  # lazy: see the package docstring

    def note(text: str) -> None:
        print(text, file=sys.stderr)

    explanation = explain_in_folder(
        Path(args.out),
        args.trial,
        study_name=args.study_name,
        budget=args.budget,
        option_needs=known_option_needs(),
        note=note,
    )
    print(f"trial {explanation.trial}: {explanation.reason}")
    print(f"  caused by: {explanation.culprit_text} (against {explanation.against})")
    print(f"  failing stage: {explanation.stage_text}")
    print(
        f"  narrowed in {explanation.seconds:.1f} s, {explanation.probes} short runs (budget {explanation.budget:.0f} s)"
    )
    print(f"  reproduction: {Path(args.out) / explanation.repro}")
    return EXIT_OK
