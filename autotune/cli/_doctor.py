"""`autotune doctor`: find the model's graph breaks and recompiles, and say how to fix each."""

from __future__ import annotations

import argparse
import sys

from autotune.cli._common import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    add_inputs,
    model_with_inputs,
)
from autotune.errors import ConfigError

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "doctor"
HELP = "find the model's graph breaks and recompiles, and say how to fix each"
DESCRIPTION = (
    "Run the workload under dynamo in a fresh process and report every graph break (where dynamo broke, "
    "the model code that led there, how often, why, and a fix where one is known) and every recompile "
    "(which input's size or which guard changed, and the setting that avoids it), verdict first."
)
EPILOG = f"""\
The model is compiled with dynamo's `eager` backend: graph breaks and recompiles are decided by
dynamo before any backend runs, so they are the ones plain torch.compile(model) has, found in
seconds. It runs two passes over the workload's fixed batches, then --fresh-batches new ones.
Then it compiles the model with plain torch.compile (Inductor) over the fixed batches and says
where that compile time went (dynamo tracing, AOTAutograd, Inductor, autotuning, CUDA graphs,
from torch's own compilation metrics) and what would shorten it; --no-compile-time skips that
compile, which takes as long as the model takes to compile.

exit codes:
  {EXIT_OK}  clean: no graph breaks, no recompiles
  {EXIT_FINDINGS}  graph breaks or recompiles were found (each with where, why and a fix where one is known)
  {EXIT_ERROR}  error: the workload cannot be built or does not run
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_TERMINATED}  stopped by SIGTERM

examples:
  autotune doctor --model examples.captioning:captioning_dynamic
  autotune doctor --model mypkg.tune:model --format json > doctor.json
"""


def add_flags(p: argparse.ArgumentParser) -> None:
    """The workload, where it runs, and how the findings are printed."""
    from autotune.trial.request import RunProtocol  # lazy: see the package docstring

    p.add_argument("--model", required=True, metavar="PKG.MOD:ATTR", help="the workload, as for `autotune search`")
    add_inputs(p)
    p.add_argument("--device", metavar="cpu|cuda|cuda:N", help="default: cuda when available, else cpu")
    p.add_argument("--seed", type=int, default=0, help="seeds the batches drawn (default: 0)")
    p.add_argument(
        "--fresh-batches",
        type=int,
        default=RunProtocol().fresh_batches,
        help="new batches to run after the fixed ones, where new lengths show their recompiles (default: %(default)s)",
    )
    p.add_argument(
        "--no-compile-time",
        dest="compile_time",
        action="store_false",
        help="skip the plain torch.compile that splits where compile time goes",
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
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune doctor`."""
    import json  # lazy: see the package docstring

    from autotune.study.doctor import diagnose  # lazy: see the package docstring
    from autotune.trial.request import RunProtocol, check_device  # lazy: see the package docstring

    if args.fresh_batches < 0:
        raise ConfigError(f"--fresh-batches {args.fresh_batches}: must be >= 0.")
    if args.timeout <= 0:
        raise ConfigError(f"--timeout {args.timeout}: must be a positive number of seconds.")
    device = check_device(args.device)
    args.model = model_with_inputs(args)
    if args.format == "text" and args.verbosity >= 0:
        print(f"autotune: doctor: running {args.model} on {device} under dynamo ...", file=sys.stderr)
    diagnosis = diagnose(
        args.model,
        device,
        seed=args.seed,
        protocol=RunProtocol(fresh_batches=args.fresh_batches),
        timeout=args.timeout,
        measure_compile=args.compile_time,
    )
    if args.format == "json":
        print(json.dumps(diagnosis.to_dict(), indent=2))
    else:
        print(diagnosis.render())
    return EXIT_OK if diagnosis.clean else EXIT_FINDINGS
