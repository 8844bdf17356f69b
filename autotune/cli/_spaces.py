"""`autotune spaces`: list the bundled search spaces."""

from __future__ import annotations

import argparse

from autotune.cli._common import EXIT_OK

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "spaces"
HELP = "list the bundled search spaces"
DESCRIPTION = "List the bundled search spaces and what each is for."
EPILOG = None


def add_flags(p: argparse.ArgumentParser) -> None:
    """No flags."""
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune spaces`."""
    from autotune.study.search import bundled_spaces, load_space  # lazy: see the package docstring

    for name, path in bundled_spaces().items():
        space = load_space(str(path))
        print(f"{name:<10} {path}")
        print(f"           {space.description}")
    return EXIT_OK
