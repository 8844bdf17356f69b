"""`autotune show`: print a best.yaml, and whether it was tuned on this machine's software and device."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from autotune.cli._common import EXIT_OK
from autotune.errors import ConfigError

__all__ = ["DESCRIPTION", "EPILOG", "HELP", "NAME", "add_flags", "run"]

NAME = "show"
HELP = "print a best.yaml: settings, metrics, environment and whether it matches this machine"
DESCRIPTION = "Print a tuned configuration file and say whether it was tuned on this machine's software and device."
EPILOG = None

Printer = Callable[..., None]


def add_flags(p: argparse.ArgumentParser) -> None:
    """The file, and how much of it."""
    p.add_argument("path", help="a best.yaml file")
    p.add_argument("--code", action="store_true", help="also print the generated apply_compilation.py")
    p.add_argument("--raw", action="store_true", help="also print every section of the file, unrounded, as YAML")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one machine-readable summary (JSON) on standard output instead of the text; progress stays on "
        "standard error (fields: docs/json.md)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`autotune show PATH`; control characters read from the file are shown escaped, never sent to the terminal."""
    from autotune.runtime import tuned  # lazy: see the package docstring
    from autotune.runtime.limits import printable  # lazy: see the package docstring
    from autotune.study.report import render_summary  # lazy: see the package docstring

    def say(*values: Any, end: str = "\n") -> None:
        sys.stdout.write(printable(" ".join(map(str, values))) + end)

    if args.json:
        if args.code or args.raw:
            raise ConfigError("--json prints the summary alone; leave out --code and --raw (or --json).")
        from autotune.cli._json import emit, tuned_summary  # lazy: see the package docstring

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tuned.EnvironmentMismatchWarning)
            emit("show", tuned_summary(Path(args.path)))
        return EXIT_OK

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tuned.EnvironmentMismatchWarning)
        config = tuned.read(args.path)
    say(f"{args.path}  (schema {tuned.SCHEMA_VERSION}, created {config.created}, autotune {config.autotune_version})")
    say(f"workload: {config.workload.spec} ({config.workload.task}, {config.workload.model_class})")
    say(f"configuration: {config.config.describe()}")
    doctor = config.study.get("doctor")
    if isinstance(doctor, Mapping) and doctor.get("verdict"):
        say(f"doctor: {doctor['verdict']}")
    say()
    say(render_summary(config.metrics, config.study))
    say()
    _compile_cache(say, config)
    if args.raw:
        _raw(say, config)
    _environment(say, config, args.path)
    if args.code:
        say()
        say(config.source, end="")
    return EXIT_OK


def _compile_cache(say: Printer, config: Any) -> None:
    from autotune.runtime import compile_cache  # lazy: see the package docstring

    try:
        say(compile_cache.describe(config.compile_cache) if config.compile_cache else "compile cache: none recorded")
    except (KeyError, TypeError, ValueError):
        say("compile cache: recorded, but its section is incomplete (see --raw)")


def _raw(say: Printer, config: Any) -> None:
    """Every section as YAML, the way the file holds it (no Python reprs)."""
    import yaml  # lazy: see the package docstring

    sections = {"config": config.config.to_dict()}
    for name in ("metrics", "baselines", "study", "compile_cache", "environment"):
        data = getattr(config, name)
        if data:
            sections[name] = _plain(data)
    say()
    say(yaml.safe_dump(sections, sort_keys=False, allow_unicode=True, width=110), end="")


def _plain(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists, so that YAML writes them without tags."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _environment(say: Printer, config: Any, path: str) -> None:
    changed = config.environment_differences()
    if not config.environment:
        say("environment: not recorded; cannot tell whether it matches this machine.")
    elif changed:
        say(f"environment: DIFFERS from this machine; run `autotune retune {path}` to re-measure and retune it:")
        for key, (old, new) in changed.items():
            say(f"  {key}: tuned with {old}, here {new}")
    else:
        say("environment: matches this machine.")
