"""A search-space file: found by a bundled space's name or a path, read (YAML through safe_load) and validated into a
`SearchSpace`, with its recipes."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.errors import ConfigError, SpaceError
from autotune.measure.tasks import Recipe, read_recipe, recipe_from
from autotune.runtime.buckets import MAX_BUCKETS
from autotune.runtime.config import CompileConfig, available_modes, checked_mapping, inductor_option_defaults
from autotune.runtime.knobs import registered
from autotune.runtime.limits import printable, quote, read_yaml_file
from autotune.study.search._dimensions import DIMENSIONS
from autotune.study.search._known import KNOWN_MODES, KNOWN_OPTIONS
from autotune.study.search._space import SearchSpace

__all__ = ["BUNDLED_DIR", "MAX_CHOICES", "bundled_spaces", "load_space", "resolve_space_path"]

_MAX_SPACE_BYTES = 256 * 1024
_MAX_SPACE_VALUES = 10_000
MAX_CHOICES = 64
"""Choices one dimension may list; a longer list is a mistake or an attack, never a search."""

BUNDLED_DIR = Path(__file__).resolve().parents[2] / "search_spaces"

_DIMENSIONS = tuple(d.name for d in DIMENSIONS)
_KEYS = ("description", "options", "module_modes", "group_mark_dynamic", "bucket_count", "recipes", *_DIMENSIONS)
_MAX_RECIPES = 16
"""Recipes one space may name: they are the study's first trials, so a few are what a search can afford."""


def bundled_spaces() -> dict[str, Path]:
    """The search spaces that ship with autotune, by name."""
    return {path.stem: path for path in sorted(BUNDLED_DIR.glob("*.yaml"))}


def resolve_space_path(name_or_path: str) -> Path:
    """A bundled space's name (e.g. 'quick') or a path to a YAML file."""
    bundled = bundled_spaces()
    if name_or_path in bundled:
        return bundled[name_or_path]
    path = Path(name_or_path)
    if not path.is_file():
        raise SpaceError(
            f"--space {quote(name_or_path)}: no such file, and not a bundled space; bundled: {sorted(bundled)}."
        )
    return path


@functools.lru_cache(maxsize=32)
def load_space(name_or_path: str) -> SearchSpace:
    """Read and validate a search-space file (YAML through safe_load)."""
    path = resolve_space_path(name_or_path)
    origin = str(path)
    try:
        data = read_yaml_file(path, "a search space", max_bytes=_MAX_SPACE_BYTES, max_nodes=_MAX_SPACE_VALUES)
    except ConfigError as exc:
        raise SpaceError(str(exc)) from None
    data = checked_mapping(data, (*_KEYS, *registered()), origin, SpaceError)
    if not isinstance(data.get("description"), str) or not data["description"].strip():
        raise SpaceError(f"{origin}: 'description' must say what the space is for.")
    values: dict[str, Any] = {"name": path.stem, "description": data["description"].strip()}
    modes = (*KNOWN_MODES, *(m for m in available_modes() if m not in KNOWN_MODES))
    for entry in DIMENSIONS:
        if entry.name in data:
            check = functools.partial(entry.check, modes=modes)
            values[entry.name] = _choices(origin, entry.name, data[entry.name], check, entry.allowed_text(modes))
    if "bucket_count" in data:
        values["bucket_count"] = _choices(
            origin,
            "bucket_count",
            data["bucket_count"],
            lambda v: type(v) is int and 1 <= v <= MAX_BUCKETS,
            f"an integer from 1 to {MAX_BUCKETS}",
        )
    for flag in ("module_modes", "group_mark_dynamic"):
        if flag in data:
            if not isinstance(data[flag], bool):
                raise SpaceError(f"{origin}: {flag}: {quote(data[flag])} must be true or false.")
            values[flag] = data[flag]
    values["options"] = _option_choices(origin, data.get("options") or {})
    values["knobs"] = _knob_choices(origin, data, bundled=path.parent == BUNDLED_DIR)
    values["recipes"] = _recipes(origin, data.get("recipes") or {}, path.parent)
    return SearchSpace(**values)


def _recipes(origin: str, raw: object, folder: Path) -> tuple[Recipe, ...]:
    """The `recipes:` section: name -> a recipe (`autotune.measure.tasks.Recipe`), in the file's order.

    A recipe is written as answers to questions the space file may ask (`scope: regional`, with an optional
    `description`), as a whole configuration in a recipe file's form (`description` and `config`), or as the path
    of a recipe file, relative to the space file's folder. Whether a recipe is among the space's choices is decided
    when the study is seeded, on the space adapted to the workload and device: one it cannot express is skipped with
    the reason.
    """
    if not isinstance(raw, dict):
        raise SpaceError(f"{origin}: recipes: {quote(raw)} must map recipe names to recipes.")
    if len(raw) > _MAX_RECIPES:
        raise SpaceError(f"{origin}: recipes: {len(raw)} recipes; a space may name at most {_MAX_RECIPES}.")
    recipes: list[Recipe] = []
    for name, given in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise SpaceError(f"{origin}: recipes: {quote(name)} is not a recipe name (a non-empty string).")
        where = f"{origin}: recipes.{printable(name)}"
        try:
            if isinstance(given, str):
                recipes.append(replace(read_recipe(_recipe_path(where, folder, given)), name=name))
            elif isinstance(given, dict) and "config" in given:
                recipes.append(recipe_from(given, where, name))
            elif isinstance(given, dict):
                recipes.append(_answered(where, name, given))
            else:
                raise SpaceError(
                    f"{where}: {quote(given)} must map questions to answers (e.g. {{mode: reduce-overhead}}; {{}} is "
                    "plain torch.compile), give a `description` and a `config` as a recipe file does, or name a "
                    "recipe file."
                )
        except ConfigError as exc:
            raise SpaceError(str(exc) if str(exc).startswith(origin) else f"{where}: {exc}") from None
    return tuple(recipes)


def _recipe_path(where: str, folder: Path, given: str) -> Path:
    """A recipe file a space names: a .yaml or .yml file, relative to the space file's folder."""
    path = folder / given
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise SpaceError(
            f"{where}: {quote(given)} is not a recipe file (.yaml or .yml) relative to the space file's folder."
        )
    return path


def _answered(where: str, name: str, given: Mapping[Any, Any]) -> Recipe:
    """A recipe written as answers to the space's questions, with an optional description."""
    questions = (*_DIMENSIONS, "bucket_count", *registered())
    answers = {k: v for k, v in given.items() if k != "description"}
    for key in answers:
        if not isinstance(key, str) or not (key in questions or key.startswith("options.")):
            raise SpaceError(
                f"{where}: {quote(key)} is not a question a space asks; allowed: {', '.join(questions)}, "
                "options.NAME, or description."
            )
    description = given.get("description")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise SpaceError(f"{where}: description: {quote(description)} must be a non-empty string.")
    shown = ", ".join(f"{k}={v!r}" for k, v in answers.items()) or "plain torch.compile(model)"
    return Recipe(
        name=name, description=description.strip() if description else f"the space's recipe: {shown}", answers=answers
    )


def _knob_choices(origin: str, data: Mapping[str, Any], bundled: bool) -> dict[str, tuple[Any, ...]]:
    """The registered knobs the file lists, each checked; a bundled space also gets what each knob offers it."""
    choices: dict[str, tuple[Any, ...]] = {}
    stem = Path(origin).stem
    for name, entry in registered().items():
        if name in data:
            choices[name] = _choices(origin, name, data[name], entry.allows, entry.allowed_text())
        elif bundled and stem in entry.offered:
            choices[name] = tuple(entry.offered[stem])
    return choices


def _choices(origin: str, name: str, raw: object, check: Any, allowed: str) -> tuple[Any, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpaceError(f"{origin}: {name}: expected a non-empty list of choices, got {quote(raw)}.")
    _few_enough(origin, name, raw)
    for value in raw:
        if not check(value):
            raise SpaceError(f"{origin}: {name}: {quote(value)} is not allowed; use {allowed}.")
    if len(set(map(repr, raw))) != len(raw):
        raise SpaceError(f"{origin}: {name}: {quote(raw)} lists a choice twice.")
    return tuple(raw)


def _few_enough(origin: str, name: str, choices: list[Any]) -> None:
    if len(choices) > MAX_CHOICES:
        raise SpaceError(f"{origin}: {name}: {len(choices)} choices; a dimension may list at most {MAX_CHOICES}.")


def _option_choices(origin: str, raw: object) -> dict[str, tuple[Any, ...]]:
    if not isinstance(raw, Mapping):
        raise SpaceError(f"{origin}: options: expected a mapping of Inductor option to choices, got {quote(raw)}.")
    result: dict[str, tuple[Any, ...]] = {}
    if len(raw) > MAX_CHOICES:
        raise SpaceError(f"{origin}: options: {len(raw)} Inductor options; a space may search at most {MAX_CHOICES}.")
    for name, choices in raw.items():
        name = printable(str(name))[:80]
        if not isinstance(choices, list) or not choices:
            raise SpaceError(f"{origin}: options.{name}: expected a non-empty list of choices, got {quote(choices)}.")
        _few_enough(origin, f"options.{name}", choices)
        if name in KNOWN_OPTIONS and name not in inductor_option_defaults():
            # Known to autotune but not to this torch: `adapt` drops it with a note.
            result[str(name)] = tuple(choices)
            continue
        for value in choices:
            try:
                CompileConfig(mode=None, options={name: value})
            except ConfigError as exc:
                raise SpaceError(f"{origin}: options.{name}: {quote(value)}: {exc}") from None
        result[str(name)] = tuple(choices)
    return result
