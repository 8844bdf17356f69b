"""autotune: find the fastest torch.compile configuration for your own model, and prove it.

The runtime API (`Workload`, `CompileConfig`, `load`) imports only torch and PyYAML; the
search (`search`, `SearchOptions`) and nightly retuning (`retune`, `RetuneOptions`) pull in
Optuna when first used.

`__all__` is the public API, and the API reference lists exactly these names: the
workload contract, the configuration and its loaded form, the two library entry points,
and every exception autotune raises on purpose that a caller may want to catch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autotune.errors import (
    AutotuneError,
    ConfigError,
    PublishError,
    RetuneError,
    SearchError,
    SpaceError,
    WorkloadError,
)
from autotune.runtime.config import CompileConfig, ModuleSettings
from autotune.runtime.tuned import EnvironmentMismatchWarning, TunedConfig, load
from autotune.workload import Workload, resolve

if TYPE_CHECKING:
    from autotune.study.retune._retune import RetuneOptions, retune
    from autotune.study.search._options import SearchOptions
    from autotune.study.search._session import search

__all__ = [
    "AutotuneError",
    "CompileConfig",
    "ConfigError",
    "EnvironmentMismatchWarning",
    "ModuleSettings",
    "PublishError",
    "RetuneError",
    "RetuneOptions",
    "SearchError",
    "SearchOptions",
    "SpaceError",
    "TunedConfig",
    "Workload",
    "WorkloadError",
    "load",
    "resolve",
    "retune",
    "search",
]


def __getattr__(name: str) -> Any:
    # The search needs Optuna; importing it lazily keeps `import autotune` light for serving code.
    if name == "search":
        from autotune.study.search._session import search

        return search
    if name == "retune":
        from autotune.study.retune._retune import retune

        return retune
    if name == "SearchOptions":
        from autotune.study.search._options import SearchOptions

        return SearchOptions
    if name == "RetuneOptions":
        from autotune.study.retune._retune import RetuneOptions

        return RetuneOptions
    raise AttributeError(f"module 'autotune' has no attribute {name!r}")
