"""best.yaml: a tuned configuration with the workload it is for, its measurements and where they were taken.

`load(path)` reads one with `yaml.safe_load`, validates every section, warns when it was
tuned in another environment, and applies it by executing the generated source.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autotune.errors import ConfigError
from autotune.runtime import codegen, environment
from autotune.runtime.config import CompileConfig, checked_mapping
from autotune.runtime.limits import quote, read_yaml_file
from autotune.runtime.summary import WorkloadSummary

__all__ = ["SCHEMA_VERSION", "EnvironmentMismatchWarning", "TunedConfig", "load", "read", "write_atomic"]

SCHEMA_VERSION = 1
_FREE_SECTIONS = ("metrics", "baselines", "environment", "study", "compile_cache")
# A best.yaml is a few kilobytes; these bounds only stop hostile files.
_MAX_NODES = 100_000
_MAX_DEPTH = 64
_TOP_LEVEL = ("schema_version", "created", "autotune_version", "workload", "config", *_FREE_SECTIONS)


class EnvironmentMismatchWarning(UserWarning):
    """The configuration was tuned with another torch, CUDA or device than the running one."""


@dataclass(frozen=True, kw_only=True)
class TunedConfig:
    """The content of a best.yaml file."""

    workload: WorkloadSummary
    """The workload the configuration was tuned for."""
    config: CompileConfig
    """The configuration itself."""
    created: str
    """When it was made (UTC, ISO 8601); part of the generated file's header."""
    autotune_version: str = field(default_factory=environment.version)
    """The autotune version that generated it."""
    metrics: Mapping[str, Any] = field(default_factory=dict)
    """The configuration's own measurements (throughput, compile time, memory...)."""
    baselines: Mapping[str, Any] = field(default_factory=dict)
    """Eager and plain torch.compile measured with the same protocol."""
    environment: Mapping[str, Any] = field(default_factory=dict)
    """`environment.fingerprint()` of the machine it was measured on."""
    study: Mapping[str, Any] = field(default_factory=dict)
    """The search that found it: study name, storage, trial counts, pruning savings."""
    compile_cache: Mapping[str, Any] = field(default_factory=dict)
    """The saved compile artifacts beside it: file, fingerprint, cold and cached compile seconds."""

    def __post_init__(self) -> None:
        for name in _FREE_SECTIONS:
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name}: expected a mapping, got {quote(value)}.")
            _check_plain(value, name)
        if not isinstance(self.created, str) or not isinstance(self.autotune_version, str):
            raise ConfigError(
                f"created/autotune_version: expected strings, got {quote(self.created)}, {quote(self.autotune_version)}."
            )

    @functools.cached_property
    def source(self) -> str:
        """The generated `apply_compilation.py`; the same bytes every time for the same file."""
        return codegen.generate(self.config, self.workload, created=self.created, version=self.autotune_version)

    @functools.cached_property
    def module(self) -> types.ModuleType:
        """The generated source, executed as a module."""
        return codegen.load_module(self.source)

    def apply(self, model: Any, optimizer: Any = None) -> tuple[Any, Any]:
        """Compile `model` (and `optimizer.step`, if configured) in place; returns (model, optimizer)."""
        return self.module.apply_compilation(model, optimizer)

    def prepare_batch(self, batch: Any) -> Any:
        """Pad and mark a batch as the configuration says."""
        return self.module.prepare_batch(batch)

    def load_compile_cache(self, path: str | os.PathLike[str]) -> dict[str, int]:
        """Load the compile artifacts saved with this configuration (e.g. outputs/<study>/compile_cache.bin).

        Runs the generated `load_compile_cache`: nothing is loaded, with a warning, when the
        file was made with another torch, Triton, CUDA, Python or device, or does not belong to
        this configuration. Returns the number of artifacts torch loaded of each kind (an empty
        dict when nothing was loaded); call it before the first compiled step.
        """
        fingerprint = self.compile_cache.get("fingerprint")
        return dict(self.module.load_compile_cache(os.fspath(path), dict(fingerprint) if fingerprint else None))

    def to_dict(self) -> dict[str, Any]:
        """Plain data in the best.yaml layout."""
        return {
            "schema_version": SCHEMA_VERSION,
            "created": self.created,
            "autotune_version": self.autotune_version,
            "workload": self.workload.to_dict(),
            "config": self.config.to_dict(),
            **{name: dict(getattr(self, name)) for name in _FREE_SECTIONS if name != "compile_cache"},
            # Optional: only a search or retune that saved compile artifacts writes it.
            **({"compile_cache": dict(self.compile_cache)} if self.compile_cache else {}),
        }

    @classmethod
    def from_dict(cls, data: object, origin: str = "best.yaml") -> TunedConfig:
        """Validate and build from best.yaml content."""
        data = checked_mapping(data, _TOP_LEVEL, origin)
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ConfigError(
                f"{origin}: schema_version {quote(data.get('schema_version'))} is not supported; expected {SCHEMA_VERSION}."
            )
        for name in ("workload", "config", "created"):
            if name not in data:
                raise ConfigError(f"{origin}: the required key {quote(name)} is missing.")
        try:
            return cls(
                workload=WorkloadSummary.from_dict(data["workload"]),
                config=CompileConfig.from_dict(data["config"]),
                created=data["created"],
                autotune_version=data.get("autotune_version", "0+unknown"),
                **{name: data.get(name) or {} for name in _FREE_SECTIONS},
            )
        except ConfigError as exc:
            raise ConfigError(f"{origin}: {exc}") from None

    def to_yaml(self) -> str:
        """The best.yaml text."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False, width=100)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write best.yaml atomically (a reader never sees half a file)."""
        return write_atomic(path, self.to_yaml())

    def environment_differences(self) -> dict[str, tuple[Any, Any]]:
        """Fields of `environment.KEYS_THAT_MATTER` that differ from the running machine."""
        if not self.environment:
            return {}
        current = environment.fingerprint(str(self.environment.get("device", "cpu")))
        return environment.differences(self.environment, current, environment.KEYS_THAT_MATTER)


def read(path: str | os.PathLike[str]) -> TunedConfig:
    """Read and validate a best.yaml file (plain YAML only: tags such as !!python/object are refused)."""
    data = read_yaml_file(path, "a best.yaml file")
    if isinstance(data, Mapping):
        # Bound every section first: error messages below quote values, and a quoted alias bomb never ends.
        for key, value in data.items():
            try:
                _check_plain(value, str(key))
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
    return TunedConfig.from_dict(data, origin=str(path))


def load(path: str | os.PathLike[str]) -> TunedConfig:
    """Read a best.yaml file and warn if it was tuned in another environment than this one."""
    tuned = read(path)
    changed = tuned.environment_differences()
    if changed:
        what = ", ".join(f"{k}: {old} -> {new}" for k, (old, new) in changed.items())
        warnings.warn(
            f"{path} was tuned in another environment ({what}); its settings may no longer be the fastest, "
            f"or may no longer work. Run `autotune retune {path}` to re-measure and retune it here.",
            EnvironmentMismatchWarning,
            stacklevel=2,
        )
    return tuned


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` through a temporary file and a rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        # mkstemp makes the file 0600; give it the mode any other new file would get.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _check_plain(value: object, where: str) -> None:
    """Only plain data (what YAML and JSON both carry) may sit in the free-form sections.

    YAML aliases can make a small file describe a cyclic or exponentially large structure
    (a "billion laughs" file); both are refused before anything walks or prints them.
    """
    stack: list[tuple[object, str, tuple[int, ...]]] = [(value, where, ())]
    visited = 0
    while stack:
        item, at, parents = stack.pop()
        visited += 1
        if visited > _MAX_NODES or len(parents) > _MAX_DEPTH:
            raise ConfigError(
                f"{where}: more than {_MAX_NODES} values or {_MAX_DEPTH} levels of nesting; not a best.yaml section."
            )
        if isinstance(item, (Mapping, list)):
            if id(item) in parents:
                raise ConfigError(f"{at}: refers to itself (a cyclic YAML alias).")
            inner = (*parents, id(item))
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if not isinstance(key, (str, int)):
                        raise ConfigError(f"{at}: key {quote(key)} must be a string.")
                    stack.append((child, f"{at}.{key}", inner))
            else:
                stack.extend((child, f"{at}[{index}]", inner) for index, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"{at}: {quote(item)} is not a finite number.")
        elif not isinstance(item, (str, int, float, bool, type(None))):
            raise ConfigError(
                f"{at}: {type(item).__name__} values are not allowed; use plain numbers, strings, lists and mappings."
            )
