"""Hand-written compile recipes: a YAML file with a description and a `CompileConfig`.

A recipe is what an expert would configure by hand, e.g. the files in `examples/recipes/`:

    description: Static shapes, max-autotune, compiled optimizer.
    config:
      mode: max-autotune
      fullgraph: true
      compile_optimizer: true

`config` takes the keys of `CompileConfig.to_dict()`; omitted ones keep their defaults.
Files are read through the one guarded reader (`read_yaml_file`: size and aliases counted before
anything is built), and every error names the file and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
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

__all__ = ["Recipe", "read_recipe", "read_recipes", "without_cuda_graphs"]

_KEYS = ("description", "config")


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A named, described compile configuration written by hand."""

    name: str
    """The file's stem, e.g. 'static' for static.yaml."""
    description: str
    """What the recipe does and why an expert would choose it."""
    config: CompileConfig
    """The configuration, validated."""


def read_recipe(path: str | Path) -> Recipe:
    """Read and validate one recipe file; raise ConfigError naming the file and the offending key."""
    path = Path(path)
    data = read_yaml_file(path, "a recipe")  # sizes and aliases counted before anything is built
    data = checked_mapping(data, _KEYS, str(path))
    missing = [key for key in _KEYS if key not in data]
    if missing:
        raise ConfigError(f"{path}: missing key(s) {missing}.")
    description = data["description"]
    if not isinstance(description, str) or not description.strip():
        raise ConfigError(f"{path}: description: expected a non-empty string, got {description!r}.")
    try:
        config = CompileConfig.from_dict(data["config"])
    except ConfigError as exc:
        # CompileConfig's messages start with the key at fault ("mode: ...") or with "config".
        message = str(exc)
        raise ConfigError(f"{path}: {message if message.startswith('config') else 'config.' + message}") from None
    except TypeError as exc:
        raise ConfigError(f"{path}: config: {exc}") from None
    return Recipe(name=path.stem, description=description.strip(), config=config)


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
