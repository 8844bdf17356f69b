"""The command-line reference page (docs/cli.md), written from the parsers themselves so that it cannot drift.

python -m autotune.cli._reference            # rewrite docs/cli.md
python -m autotune.cli._reference --check    # exit 1 when docs/cli.md differs from the parsers
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from autotune.cli import build_parser

__all__ = ["REGENERATE", "main", "render", "write_page"]

REGENERATE = "python -m autotune.cli._reference"
"""The command that rewrites docs/cli.md; the test that compares it names it."""

_HEADER = f"""\
# Command-line reference

<!-- Written by `{REGENERATE}` from the parsers in autotune/cli/; do not edit by hand. -->

Every command is `autotune COMMAND [options]`, or `python -m autotune COMMAND [options]`.
`autotune COMMAND --help` prints the same text in a terminal.
"""


def render() -> str:
    """The whole page, as Markdown."""
    parser = build_parser()
    commands = _subcommands(parser)
    lines = [_HEADER, _escape(parser.description or ""), ""]
    top = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    lines += [_flag(action) for action in top] + ([""] if top else [])
    lines += ["| Command | What it does |", "| --- | --- |"]
    lines += [f"| [`{name}`](#autotune-{name}) | {_cell(help_text)} |" for name, help_text, _ in commands]
    for name, _, sub in commands:
        lines += ["", *_command(name, sub)]
    return "\n".join(lines).rstrip() + "\n"


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return [(name, helps[name], sub) for name, sub in action.choices.items()]


def _command(name: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"## autotune {name}", "", _escape(parser.description or ""), ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        title = group.title or ""
        lines += [f"**{title[0].upper()}{title[1:]}**" if title else "", ""]
        lines += [_flag(action) for action in actions]
        lines.append("")
    if parser.epilog:
        lines += ["```text", parser.epilog.rstrip(), "```"]
    return lines


def _flag(action: argparse.Action) -> str:
    # One item per flag: its spellings, what it takes, then its help with %(default)s filled in.
    if action.option_strings:
        takes = "" if action.nargs == 0 else f" {_metavar(action)}"
        spelled = ", ".join(f"`{option}{takes}`" for option in action.option_strings)
    else:
        spelled = f"`{_metavar(action)}`"
    help_text = (action.help or "") % {**vars(action), "prog": ""}
    required = " (required)" if action.required and action.option_strings else ""
    return f"- {spelled}: {_escape(help_text)}{required}"


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(str(choice) for choice in action.choices) + "}"
    return action.dest if not action.option_strings else action.dest.upper()


def _escape(text: str) -> str:
    # Markdown's own characters outside `code`; the parsers' text is plain.
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([\\*_\[\]])", r"\\\1", parts[i]).replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _cell(text: str) -> str:
    return _escape(text).replace("|", "&#124;")


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page, or with --check say whether it is current; returns the exit code."""
    return write_page(argv, "docs/cli.md", render(), REGENERATE, "the parsers")


def write_page(argv: list[str] | None, default: str, text: str, regenerate: str, source: str) -> int:
    """A generated page's command: write `text` to the page, or with --check exit 1 when the page differs."""
    cli = argparse.ArgumentParser(prog=regenerate, description=f"Write {default} from {source}.")
    cli.add_argument("path", nargs="?", default=default, type=Path, help=f"the page (default: {default})")
    cli.add_argument("--check", action="store_true", help="do not write; exit 1 when the page differs")
    args = cli.parse_args(argv)
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
        if current != text:
            print(f"{args.path} is out of date with {source}: run `{regenerate}`", file=sys.stderr)
            return 1
        return 0
    args.path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
