"""`-q` and `-v` on every command: fewer lines for a CI log, and every step with its time of day.

The display's own rules (which lines each level keeps) are `tests/study/test_display.py`'s; here,
that every command takes the flags and that validate's per-run lines follow them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune import cli
from autotune.cli import _COMMANDS

pytestmark = pytest.mark.parallel  # times nothing


def _subparser(name: str):
    parser = cli.build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "==SUPPRESS==" and getattr(a, "choices", None)]
    return commands.choices[name]


@pytest.mark.parametrize("name", [command.NAME for command in _COMMANDS])
def test_every_command_takes_q_and_v_but_not_both(name: str, capsys) -> None:
    sub = _subparser(name)
    flags = {flag for action in sub._actions for flag in action.option_strings}
    assert {"-q", "--quiet", "-v", "--verbose"} <= flags
    assert sub.get_default("verbosity") == 0
    with pytest.raises(SystemExit):
        sub.parse_args(["-q", "-v"])
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "lines"), [("-q", 0), ("-v", 1)])
def test_validate_says_each_run_only_without_q_and_stamps_it_with_v(tmp_path: Path, capsys, flag, lines) -> None:
    recipe = tmp_path / "whole.yaml"
    recipe.write_text("description: the whole model\nconfig:\n  scope: whole\n")
    spec = "tests.trial_targets.dynamo_only:wrong_when_compiled"
    argv = [
        "validate",
        str(recipe),
        "--model",
        spec,
        "--device",
        "cpu",
        "--replicates",
        "2",
        "--max-replicates",
        "2",
        flag,
    ]
    assert cli.main(argv) == cli.EXIT_FINDINGS
    said = [line for line in capsys.readouterr().err.splitlines() if "autotune validate:" in line]
    if lines == 0:
        assert said == []
    else:
        assert said and all(re.match(r"^\d\d:\d\d:\d\d autotune validate: ", line) for line in said), said
