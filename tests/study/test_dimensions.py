"""The search's dimensions, declared once: each is a field of the space and of the configuration, generates code
of its own, is asked by `suggest` and found again by `params_for`, and is what a space file's key is checked against.

A new dimension fails these tests until every place it needs is there: the checklist in docs/developing.md.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from autotune.errors import SpaceError
from autotune.runtime import codegen
from autotune.runtime.config import CompileConfig
from autotune.study.search import load_space, params_for
from autotune.study.search._dimensions import DIMENSIONS, dimension
from autotune.study.search._space import SearchSpace
from tests.study.summaries import SHARED, TOY_LIKE

pytestmark = pytest.mark.parallel

MARKS = (("attention_mask", 1), ("input_ids", 1), ("labels", 1))

NOT_ASKED = {
    "backend": "always inductor",
    "padding_buckets": "learned from the lengths, how many by the space's bucket_count",
    "options": "the space's options section, one question per Inductor option",
    "module_settings": "per-module modes, asked with module_modes under the modular scope",
    "knobs": "the registered knobs, each asked under its own name (tests/runtime/knobs/test_registry.py)",
}
"""`CompileConfig` fields that are no dimension of their own, and where their value comes from."""

EXAMPLES: dict[str, tuple[dict[str, Any], Any]] = {
    "mode": ({}, "max-autotune-no-cudagraphs"),
    "dynamic": ({}, True),
    "scope": ({}, "regional"),
    "mark_dynamic": ({}, MARKS),
    "padding_alignment": ({}, 8),
    "compile_optimizer": ({}, True),
    "mark_as": ({"mark_dynamic": MARKS}, "unbacked"),
}
"""Each dimension: the settings it needs to change anything, and a value other than its neutral one."""


def code_without_docstrings(source: str) -> str:
    """The generated module without its docstrings (which describe the configuration in words)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined,index]
    return ast.dump(tree)


def _generate(config: CompileConfig) -> str:
    return codegen.generate(config, TOY_LIKE, created="2026-01-02T03:04:05Z", version="0.0.0")


def test_every_dimension_is_a_field_of_the_space_and_of_the_configuration_and_every_field_is_accounted_for() -> None:
    names = [d.name for d in DIMENSIONS]
    assert len(set(names)) == len(names), names
    space_fields = {f.name for f in dataclasses.fields(SearchSpace)}
    config_fields = {f.name for f in dataclasses.fields(CompileConfig)}
    assert set(names) <= space_fields and set(names) <= config_fields
    # A configuration field added without a dimension (or a word here on why it is none) fails this.
    assert config_fields == set(names) | set(NOT_ASKED)
    # The space's neutral choice of each dimension is the configuration's default.
    defaults = CompileConfig()
    for name in names:
        neutral = SearchSpace.__dataclass_fields__[name].default
        if name != "mark_dynamic":  # asked per group as True or False; the configuration holds the pairs
            assert getattr(defaults, name) == neutral[0], name  # type: ignore[index]


@pytest.mark.parametrize("name", [d.name for d in DIMENSIONS])
def test_each_dimension_generates_code_of_its_own(name: str) -> None:
    assert name in EXAMPLES, f"add an example of {name} to EXAMPLES"
    needs, value = EXAMPLES[name]
    base = CompileConfig(**needs)
    changed = CompileConfig(**{**needs, name: value})
    assert code_without_docstrings(_generate(changed)) != code_without_docstrings(_generate(base)), (
        f"{name}={value!r} generates the code of {needs}"
    )


@pytest.mark.parametrize("name", [d.name for d in DIMENSIONS])
def test_each_dimension_is_asked_by_a_space_and_its_answer_found_again(name: str) -> None:
    needs, value = EXAMPLES[name]
    neutral = SearchSpace.__dataclass_fields__[name].default
    choices = (False, True) if name == "mark_dynamic" else (*neutral, value)  # type: ignore[misc]
    # The settings it needs are the space's only choices of theirs: `mark_dynamic` asked True, the optimizer compiled.
    fixed = {k: ((True,) if k == "mark_dynamic" else (v,)) for k, v in needs.items()}
    space = SearchSpace(name="one", description="one dimension", **{**fixed, name: choices}).adapt(
        TOY_LIKE, "cpu", shared_lengths=SHARED, allow_precision_changes=True
    )
    assert name in space.dimensions() or any(k.startswith(f"{name}.") for k in space.dimensions()), space.dropped
    wanted = CompileConfig(**{**needs, name: value})
    params = params_for(space, wanted)
    assert params is not None, f"no answers make the space suggest {wanted.describe()}"


def test_a_space_file_key_is_checked_by_its_dimension_and_the_error_says_what_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("description: a bad one\nmark_as: [dynamic, sometimes]\n")
    with pytest.raises(SpaceError) as exc:
        load_space(str(path))
    assert "'sometimes' is not allowed" in str(exc.value) and dimension("mark_as").allowed in str(exc.value)
    with pytest.raises(KeyError):
        dimension("stance")
