"""One name for a fresh-process repetition: `--replicates` and `--max-replicates` on search, validate and retune.

The old spellings (search's `--rounds`, validate's and retune's `--repeats`, everyone's `--max-rounds`) keep
working for one release, and say which flag replaces them.
"""

from __future__ import annotations

import pytest

from autotune import cli

pytestmark = pytest.mark.parallel  # parses flags only


@pytest.mark.parametrize(
    ("command", "least", "head"),
    [
        ("search", "replicates", ["search", "--model", "examples.toy:model"]),
        ("validate", "replicates", ["validate", "best.yaml"]),
        ("retune", "replicates", ["retune", "best.yaml"]),
    ],
)
def test_replicates_is_the_one_name_and_the_old_ones_still_work_with_a_warning(
    command: str, least: str, head: list[str], capsys
) -> None:
    parser = cli.build_parser()
    new = parser.parse_args([*head, "--replicates", "4", "--max-replicates", "7"])
    assert (getattr(new, least), new.max_replicates) == (4, 7)
    assert capsys.readouterr().err == "", "the new names warn of nothing"
    old_least = "--rounds" if command == "search" else "--repeats"
    old = parser.parse_args([*head, old_least, "4", "--max-rounds", "7"])
    assert (getattr(old, least), old.max_replicates) == (4, 7)
    err = capsys.readouterr().err
    assert f"autotune: {old_least} is the old name of --replicates, which means the same" in err
    assert "autotune: --max-rounds is the old name of --max-replicates" in err
    default = parser.parse_args(head)
    assert getattr(default, least) == {"search": None, "validate": 3, "retune": 3}[command], "an alias sets no default"
