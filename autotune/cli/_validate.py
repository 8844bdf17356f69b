"""`autotune validate`: re-measure a saved configuration against eager and plain torch.compile."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from autotune.cli._common import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, EXIT_REGRESSION, add_replicates

EXIT_SLOWER = EXIT_REGRESSION
"""validate's 3: the configuration works but is decided slower than plain compile (worse, as retune's 3 is)."""

if TYPE_CHECKING:
    from autotune.trial.run_record import RunRecord

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "validate"
HELP = "re-measure a saved configuration (best.yaml or a recipe) against eager and plain torch.compile"
DESCRIPTION = (
    "Measure a configuration file against eager and plain torch.compile: each first alone and cold (compile "
    "time, accuracy), then in replicates where all three live side by side and take turns window by window on "
    "the same batches. Print its ratios to both with their intervals (95%, simultaneous over the campaign's looks), what they decide, and how it was "
    "measured. Exit code 0 when the configuration runs and matches eager, 1 when it fails, 3 when it works but is "
    "decided slower than plain torch.compile."
)
EPILOG = f"""\
exit codes:
  {EXIT_OK}  it runs, matches eager and is not decided slower than plain torch.compile
  {EXIT_FINDINGS}  it fails (compile error, accuracy, crash, timeout)
  {EXIT_ERROR}  error: a file or workload that cannot be read or built, bad options
  {EXIT_SLOWER}  it runs and matches eager, but is decided slower than plain torch.compile (its interval against
     plain compile lies below 1): ship plain torch.compile instead
"""


def add_flags(p: argparse.ArgumentParser) -> None:
    """The file, the workload and device, and how long to measure."""
    p.add_argument("path", help="a best.yaml, or a recipe file with a `config:` section")
    p.add_argument("--model", metavar="PKG.MOD:ATTR", help="the workload (default: the one recorded in best.yaml)")
    p.add_argument("--device", metavar="cpu|cuda|cuda:N", help="default: cuda when available, else cpu")
    add_replicates(
        p,
        least=(3, "replicates before it may stop (default: 3; at least 2)"),
        most=(20, "replicates at most, while the interval is wider (default: 20)"),
        old_least="--repeats",
    )
    p.add_argument(
        "--precision",
        type=float,
        default=0.03,
        metavar="FRACTION",
        help="measure until the interval against plain compile is at most this wide each way (default: 0.03, "
        "i.e. +/-3%%)",
    )
    p.add_argument(
        "--measure-seconds",
        type=float,
        default=180.0,
        metavar="SECONDS",
        help="stop adding replicates after this much measurement, first runs not included (default: 180)",
    )
    p.add_argument(
        "--cold-compiles",
        action="store_true",
        help="before each replicate, compile the configuration and plain compile again, alone and cold, so that "
        "compile time and when it pays back get intervals (each replicate takes their compile times longer; "
        "without it, compile time is one cold compile each, shown with no interval)",
    )
    p.add_argument("--trial-timeout", type=float, default=900.0, metavar="SECONDS", help="limit per run (default: 900)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one machine-readable summary (JSON) on standard output instead of the text; progress stays on "
        "standard error (fields: docs/json.md)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune validate`."""
    from autotune.measure import validate  # lazy: see the package docstring

    report = validate(
        args.path,
        model=args.model,
        device=args.device,
        replicates=args.replicates,
        max_replicates=args.max_replicates,
        precision=args.precision,
        measure_seconds=args.measure_seconds,
        cold_compiles=args.cold_compiles,
        trial_timeout=args.trial_timeout,
        on_run=_said(args.verbosity),
    )
    code = EXIT_FINDINGS if not report.ok else (EXIT_SLOWER if report.slower else EXIT_OK)
    if args.json:
        from autotune.cli._json import emit, validate_summary  # lazy: see the package docstring

        emit("validate", validate_summary(report, code))
    else:
        print(report.render())
    return code


def _said(verbosity: int) -> Callable[[str, int, RunRecord], None] | None:
    """One line on standard error per run as it ends (a validation takes minutes); none with -q, and with -v each
    line starts with the time of day."""
    if verbosity < 0:
        return None
    from autotune.measure.engine import run_text  # lazy: see the package docstring

    def said(name: str, index: int, record: RunRecord) -> None:
        stamp = datetime.now().strftime("%H:%M:%S ") if verbosity > 0 else ""
        print(f"{stamp}autotune validate: {run_text(name, index, record)}", file=sys.stderr, flush=True)

    return said
