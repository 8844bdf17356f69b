"""docs/cli.md is what the parsers say: a flag added, renamed or re-described without regenerating the page fails."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from autotune.cli import _reference

pytestmark = pytest.mark.parallel

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_committed_reference_matches_the_parsers() -> None:
    committed = PAGE.read_text(encoding="utf-8")
    assert committed == _reference.render(), (
        f"docs/cli.md differs from the parsers in autotune/cli/: run `{_reference.REGENERATE}` and commit the result"
    )


def test_every_command_and_flag_is_on_the_page() -> None:
    text = _reference.render()
    parser = _reference.build_parser()
    for name, _, sub in _reference._subcommands(parser):
        assert f"## autotune {name}" in text
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                for option in action.option_strings:
                    assert f"`{option}" in text, option


def test_check_fails_on_a_stale_page_and_says_how_to_regenerate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "cli.md"
    assert _reference.main([str(page)]) == 0
    assert _reference.main([str(page), "--check"]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("--trial-timeout", "--trial-limit"), encoding="utf-8")
    assert _reference.main([str(page), "--check"]) == 1
    assert _reference.REGENERATE in capsys.readouterr().err
