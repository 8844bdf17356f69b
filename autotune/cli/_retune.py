"""`autotune retune`: re-measure a tuned configuration, search a little more, replace it only on a significant win."""

from __future__ import annotations

import argparse

from autotune.cli._common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_TERMINATED,
    add_no_compile_cache,
    add_replicates,
    options_from,
    with_display,
)

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "retune"
HELP = "re-measure a tuned configuration, search a little more, and replace it only on a significant win"
DESCRIPTION = (
    "Check a tuned configuration where it runs today, e.g. nightly: run a short warm-started search in "
    "the same study (the incumbent and the previous top trials first, then --trials new ones), then "
    "measure eager, plain torch.compile, the incumbent and the best challenger in replicates of paired "
    "windows, each subject a new process warm from its own cache (--replicates to --max-replicates), and compare "
    "the environment and the model with those recorded in best.yaml. A challenger replaces the incumbent "
    "only if its paired ratio to it has a median above 1 + --min-gain and an interval whose lower end "
    "clears 1.015, the margin every gain must clear."
)
EPILOG = f"""\
exit codes:
  {EXIT_OK}  unchanged (the incumbent stays) or improved (a faster challenger replaced it)
  {EXIT_REGRESSION}  regression: the incumbent fails here, again after one failed replicate, or its ratio to
     plain torch.compile (to eager where it is plain compile), measured in the same replicates, fell by more
     than --max-regression since it was tuned, with an interval that excludes no change; the files change
     only if a challenger decided faster than plain torch.compile replaced it
  {EXIT_ERROR}  error: no study, a damaged study or storage, a workload that does not run, bad options
     (nothing was changed)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C): the files are as they were, or as a completed replacement left them
  {EXIT_TERMINATED}  stopped by SIGTERM: as Ctrl-C

what it writes, beside best.yaml:
  best.yaml, apply_compilation.py, compile_cache.bin   replaced together, the old ones kept as *.prev.*
  history.jsonl         one JSON line per retune: date, environment, figures, decision
  report.md             with the retune history (retune_history.png), trials.csv

examples:
  autotune retune outputs/examples.toy-model/best.yaml
  autotune retune outputs/mymodel/best.yaml --trials 8 --min-gain 0.05 --device cuda:1
"""


def add_flags(p: argparse.ArgumentParser) -> None:
    """The tuned file, how much to search, the decision's thresholds, and how long to measure."""
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
        help="how far the incumbent's ratio to plain compile (to eager, where it is plain compile) may fall since "
        "tuning (default: 0.10)",
    )
    add_replicates(
        p,
        least=(
            3,
            "replicates of eager, plain compile, incumbent and challenger before it may stop (default: 3)",
        ),
        most=(6, "replicates at most, while the intervals do not decide (default: 6; at least 2)"),
        old_least="--repeats",
    )
    p.add_argument(
        "--device", metavar="cpu|cuda|cuda:N", help="where to measure (default: the device recorded in best.yaml)"
    )
    p.add_argument(
        "--storage", metavar="URL", help="the study's storage (default: as recorded; study.db beside best.yaml)"
    )
    p.add_argument("--space", metavar="NAME|PATH", help="search space of the new trials (default: the study's own)")
    p.add_argument("--trial-timeout", type=float, default=900.0, metavar="SECONDS", help="limit per run (default: 900)")
    add_no_compile_cache(p, "compile_cache.bin is then removed")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one machine-readable summary (JSON) on standard output instead of the text; progress stays on "
        "standard error (fields: docs/json.md)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune retune`."""
    from autotune.study.retune import RetuneOptions, retune  # lazy: see the package docstring

    options = options_from(RetuneOptions, args)
    result = with_display(args, lambda progress: retune(options, progress=progress), retune=True)
    code = EXIT_REGRESSION if result.regressed else EXIT_OK
    if args.json:
        from autotune.cli._json import emit, retune_summary  # lazy: see the package docstring

        emit("retune", retune_summary(result, code))
    else:
        print(result.render())
    return code
