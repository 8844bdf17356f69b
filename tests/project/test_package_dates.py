"""The package's text says what the code does now: no file under `autotune/` carries a calendar date.

The story of a change, with its dates and the timings that moved it, belongs in CHANGELOG.md and
`outputs/benchmarks/`; a docstring that says "since 2026-11-30" or "measured on ..." goes stale
the day the code moves on. A constant whose value was measured names the file under
`outputs/benchmarks/` that records the measurement instead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel

PACKAGE = Path(__file__).resolve().parents[2] / "autotune"

DATE = re.compile(r"(?<![\w.-])(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?![\w.-])")
"""A date as YYYY-MM-DD. Only digits match: a format string such as `%Y-%m-%d`, which code may need to
write a date, is not a date and is left alone."""


def _files() -> list[Path]:
    # Followed links too: `autotune/search_spaces` links to the bundled spaces the package installs.
    found: list[Path] = []
    for folder, _, names in os.walk(PACKAGE, followlinks=True):
        found.extend(Path(folder) / name for name in names if not name.endswith((".pyc", ".pyo")))
    return sorted(found)


def dates_in(text: str) -> list[str]:
    return [match.group() for match in DATE.finditer(text)]


def test_no_file_of_the_package_carries_a_date() -> None:
    files = _files()
    assert any(path.suffix == ".py" for path in files), "no Python file found: the scan is broken"
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {date}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        for date in dates_in(line)
    ]
    assert found == [], "dates in the package's text: say what the code does now, and keep the history elsewhere"


def test_the_pattern_finds_dates_and_leaves_formats_alone() -> None:
    assert dates_in('x = 1  # "blocks" before 2026-11-30') == ["2026-11-30"]
    assert dates_in("Version 2 (2026-11-30) names") == ["2026-11-30"]
    assert dates_in('stamp = time.strftime("%Y-%m-%d")') == []
    assert dates_in("torch 2.13.0, commit 2b80a3e, port 2026-2030") == []
