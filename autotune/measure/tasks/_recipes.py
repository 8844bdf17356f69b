"""Recipes: a named starting configuration, and why an expert would choose it.

A recipe is written one of two ways. As a whole configuration, a YAML file with a
description and a `CompileConfig`, e.g. the files in `examples/recipes/`:

    description: Static shapes, max-autotune, compiled optimizer.
    config:
      mode: max-autotune
      fullgraph: true
      compile_optimizer: true

`config` takes the keys of `CompileConfig.to_dict()`; omitted ones keep their defaults. Or as
answers to a search space's questions (`scope: regional`, `options.max_autotune: true`), every
question it does not answer taking its neutral choice: how autotune's built-in recipes and a
space file's `recipes:` section write them, where a space may also give a recipe in the file's
form or name a recipe file. `autotune validate` measures a recipe file; a search starts a new
study with recipes, each where its space can express it.

Files are read through the one guarded reader (`read_yaml_file`: size and aliases counted before
anything is built), and every error names the file and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autotune.errors import ConfigError
from autotune.runtime.config import (
    CUDA_GRAPH_OPTIONS,
    CompileConfig,
    ModuleSettings,
    available_modes,
    checked_mapping,
    mode_options,
)
from autotune.runtime.limits import read_yaml_file

__all__ = ["Recipe", "read_recipe", "read_recipes", "recipe_from", "without_cuda_graphs"]

_KEYS = ("description", "config")


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A named starting configuration, described: a whole `config`, or `answers` to a search space's questions."""

    name: str
    """How trials, notes and reports call it: a file's stem (static.yaml is 'static'), or the name a space or
    autotune gives it."""
    description: str
    """What the recipe does and why an expert would choose it."""
    config: CompileConfig | None = None
    """The whole configuration, validated (a recipe file's `config:`)."""
    answers: Mapping[str, Any] = field(default_factory=dict)
    """Or answers to a space's questions, question -> answer (`mark_dynamic: true` answers every mark question);
    every other question takes its neutral choice. Empty without `config`: plain torch.compile."""

    def __post_init__(self) -> None:
        if self.config is not None and self.answers:
            raise ConfigError(
                f"recipe {self.name!r}: a recipe is a whole configuration or answers to a space's questions, not both."
            )

    def whole(self) -> CompileConfig:
        """The whole configuration, for what measures a recipe as it is (`autotune validate`); ConfigError for a
        recipe of answers, which only a search space can turn into one."""
        if self.config is None:
            raise ConfigError(
                f"recipe {self.name!r} answers a search space's questions ({dict(self.answers) or 'none'}): only a "
                "search can seed it; give a whole configuration (`description` and `config`) to measure it as it is."
            )
        return self.config


def recipe_from(data: object, where: str, name: str) -> Recipe:
    """A recipe in the file's form (`description` and `config`), from `data` read at `where` (a file, or a space
    file's `recipes.NAME`); ConfigError naming `where` and the offending key."""
    data = checked_mapping(data, _KEYS, where)
    missing = [key for key in _KEYS if key not in data]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {missing}.")
    description = data["description"]
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"{where}: description: expected a non-empty string, got {description!r}.")
    try:
        config = CompileConfig.from_dict(data["config"])
    except ConfigError as exc:
        # CompileConfig's messages start with the key at fault ("mode: ...") or with "config".
        message = str(exc)
        raise ConfigError(f"{where}: {message if message.startswith('config') else 'config.' + message}") from None
    except TypeError as exc:
        raise ConfigError(f"{where}: config: {exc}") from None
    return Recipe(name=name, description=description.strip(), config=config)


def read_recipe(path: str | Path) -> Recipe:
    """Read and validate one recipe file; raise ConfigError naming the file and the offending key."""
    path = Path(path)
    data = read_yaml_file(path, "a recipe")  # sizes and aliases counted before anything is built
    return recipe_from(data, str(path), path.stem)


def read_recipes(folder: str | Path) -> list[Recipe]:
    """Every `*.yaml` recipe in `folder`, sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder of recipes.")
    return [read_recipe(path) for path in sorted(folder.glob("*.yaml"))]


def without_cuda_graphs(config: CompileConfig) -> CompileConfig:
    """`config` with CUDA graphs turned off everywhere, for devices that have none (e.g. the CPU).

    Everything else is kept: 'max-autotune' becomes 'max-autotune-no-cudagraphs' and
    'reduce-overhead' (CUDA graphs alone) becomes 'default'; explicit options lose
    `triton.cudagraphs`. A config that uses no CUDA graphs is returned unchanged.
    """
    if not config.uses_cuda_graphs:
        return config
    mode, options = _no_graphs(config.mode, config.options)
    settings = {}
    for path, module in config.module_settings.items():
        module_mode, module_options = _no_graphs(module.mode, module.options)
        settings[path] = ModuleSettings(mode=module_mode, options=module_options)
    return replace(config, mode=mode, options=options, module_settings=settings)


def _no_graphs(mode: str | None, options: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The (mode, options) pair with the same Inductor settings as the given one, minus CUDA graphs."""
    wanted = {k: v for k, v in {**mode_options(mode), **options}.items() if k not in CUDA_GRAPH_OPTIONS}
    if not options:
        for candidate in available_modes():
            if mode_options(candidate) == wanted:
                return candidate, {}
    return None, wanted
