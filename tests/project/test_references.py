"""Every `autotune.…` name a user can read resolves: in messages and docstrings, in the README and the guides.

A module that moves leaves its old dotted name behind in text that nothing imports, so no
other test notices; this one collects each name and imports it.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bautotune(?:\.[A-Za-z_]\w*)+")

# Names that read like modules but are not meant to import. Keep each with its reason.
ALLOWED: frozenset[str] = frozenset()


def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute reached from the longest importable prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def _strings(path: Path) -> list[tuple[int, str]]:
    # Docstrings, messages and every other string constant (f-strings' literal parts included).
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def _texts() -> list[Path]:
    # The changelog is left out on purpose: it may name what was removed.
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _stale(found: list[tuple[str, int, str]]) -> list[str]:
    return [
        f"{where}:{line}: {name}"
        for where, line, name in found
        if name not in ALLOWED and not resolves(name.rstrip("."))
    ]


def test_package_strings_name_only_what_exists() -> None:
    found = [
        (str(path.relative_to(ROOT)), line, match.group())
        for path in sorted((ROOT / "autotune").rglob("*.py"))
        for line, text in _strings(path)
        for match in NAME.finditer(text)
    ]
    assert found, "no `autotune.` names found at all: the scan is broken"
    assert _stale(found) == [], "docstrings or messages name modules or attributes that do not exist"


def test_readme_and_guides_name_only_what_exists() -> None:
    found = [
        (str(path.relative_to(ROOT)), number, match.group())
        for path in _texts()
        if path.exists()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in NAME.finditer(line)
    ]
    assert _stale(found) == [], "the README or the guides name modules or attributes that do not exist"


def test_a_moved_module_is_caught() -> None:
    assert resolves("autotune.runtime.config.mode_options")
    assert resolves("autotune.load")
    assert not resolves("autotune.config.mode_options")
    assert not resolves("autotune.study.pareto")
