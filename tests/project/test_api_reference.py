"""The API reference (docs/api.md) documents exactly the public names: `autotune.__all__` and the integrations'."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import autotune
from autotune.integrations import lightning as lightning_integration
from autotune.integrations import transformers as hf_integration

pytestmark = pytest.mark.parallel

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
# A mkdocstrings block: `::: dotted.path`, optionally followed by an indented `heading: "public.name"`.
BLOCK = re.compile(r'^::: (?P<path>[\w.]+)\n(?:(?:[ ]+.*\n)*?[ ]+heading: "(?P<heading>[\w.]+)"\n)?', re.MULTILINE)


def _documented() -> dict[str, str]:
    """Public name -> the path mkdocstrings documents it from."""
    documented: dict[str, str] = {}
    for match in BLOCK.finditer(PAGE.read_text(encoding="utf-8")):
        name = match["heading"] or match["path"]
        assert name not in documented, f"{name} is documented twice in docs/api.md"
        documented[name] = match["path"]
    return documented


def _object(path: str) -> object:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise AssertionError(f"{path} does not import")


def test_the_reference_lists_exactly_the_public_api() -> None:
    documented = set(_documented())
    public = {f"autotune.{name}" for name in autotune.__all__}
    integrations = {f"autotune.integrations.transformers.{name}" for name in hf_integration.__all__} | {
        f"autotune.integrations.lightning.{name}" for name in lightning_integration.__all__
    }
    assert documented - public - integrations == set(), "docs/api.md documents names that are not public"
    assert public - documented == set(), "autotune.__all__ has names docs/api.md does not document"
    assert integrations - documented == set(), "the integrations have names docs/api.md lacks"


def test_each_entry_documents_the_object_its_public_name_gives() -> None:
    for name, path in _documented().items():
        assert _object(path) is _object(name), f"docs/api.md documents {name} from {path}, another object"


def test_every_public_name_imports() -> None:
    for name in autotune.__all__:
        assert getattr(autotune, name) is not None
