"""The `autotune` command line: a thin layer over the library, one module per subcommand.

Each command imports what it runs with when it runs (`# lazy:` in its module), so that
`autotune --help` loads only what the parsers need: torch and Optuna, for the defaults they
read from the options, but not dynamo, Inductor or a workload.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence

from autotune.cli import _doctor, _explain, _export, _retune, _search, _show, _spaces, _studies, _validate
from autotune.cli._common import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_TERMINATED,
)
from autotune.errors import AutotuneError, Terminated

__all__ = [
    "EXIT_ERROR",
    "EXIT_FINDINGS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_TERMINATED",
    "build_parser",
    "main",
]

_COMMANDS = (_search, _doctor, _explain, _spaces, _export, _validate, _retune, _show, _studies)
"""The subcommands in the order `autotune --help` lists them; each module has NAME, HELP, DESCRIPTION, EPILOG, add_flags."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_ERROR
    with _sigterm_stops_as_ctrl_c():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args))
    except AutotuneError as exc:
        print(f"autotune: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Terminated:
        print(
            "autotune: terminated (SIGTERM); what was measured is kept, and the same command resumes", file=sys.stderr
        )
        return EXIT_TERMINATED
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


@contextlib.contextmanager
def _sigterm_stops_as_ctrl_c() -> Iterator[None]:
    """While a command runs, SIGTERM raises `Terminated`, which every layer handles as it handles Ctrl-C.

    A scheduler (cron's job limit, systemd, Kubernetes, SLURM) sends SIGTERM, then SIGKILL after a grace
    period; without this, SIGTERM ended the process at once and left its workers running and its trial
    RUNNING. A second SIGTERM during the shutdown the first began is ignored. Outside the main thread
    (the command run from a library's thread) nothing is installed: only the main thread may handle signals.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated("SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    parser.add_argument(
        "--version",
        action="version",
        version=_version_line(),
        help="print autotune's version and the Python and torch it runs with, then exit",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in _COMMANDS:
        # An epilog keeps its own line breaks (exit codes, examples).
        formatter = argparse.RawDescriptionHelpFormatter if command.EPILOG else argparse.HelpFormatter
        sub = commands.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.DESCRIPTION,
            epilog=command.EPILOG,
            formatter_class=formatter,
        )
        command.add_flags(sub)
        _add_verbosity(sub)
    return parser


def _add_verbosity(sub: argparse.ArgumentParser) -> None:
    """`-q` and `-v`, as every command has them: `args.verbosity` is -1, 0 or 1."""
    said = sub.add_mutually_exclusive_group()
    said.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=-1,
        default=0,
        help="no status or phase lines, and no line per run of validate; search and retune keep one line per "
        "trial result, baseline and warning; the result as usual",
    )
    said.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=1,
        help="every progress step as its own line, even on a terminal, each with the time of day",
    )


def _version_line() -> str:
    """autotune's version, and the Python and torch it runs with: what a bug report needs."""
    import torch  # lazy: see the package docstring

    from autotune.runtime.environment import version  # lazy: see the package docstring

    return f"autotune {version()} (Python {platform.python_version()}, torch {torch.__version__})"
