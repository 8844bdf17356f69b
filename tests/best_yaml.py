"""best.yaml files for tests: a workload's summary, a configuration, and the sections a test is about.

What a test does not name is what a search on this machine's CPU would have written: the running
environment's fingerprint (so that reading the file back warns of nothing) and a fixed creation time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotune import CompileConfig, TunedConfig
from autotune.runtime import environment as environments
from autotune.runtime.summary import WorkloadSummary

CREATED = "2026-11-25T00:00:00+00:00"


def tuned_config(
    workload: WorkloadSummary,
    config: CompileConfig | None = None,
    *,
    created: str = CREATED,
    environment: Mapping[str, Any] | None = None,
    **sections: Mapping[str, Any],
) -> TunedConfig:
    """The content of a best.yaml: `workload` tuned to `config` (plain compile where None).

    `environment` is this machine's CPU fingerprint where None (`{}` writes none); `sections` are the file's other
    sections by name (`metrics`, `baselines`, `study`, `compile_cache`).
    """
    return TunedConfig(
        workload=workload,
        config=CompileConfig() if config is None else config,
        created=created,
        environment=environments.fingerprint("cpu") if environment is None else environment,
        **sections,
    )


def write_best(
    path: str | os.PathLike[str],
    workload: WorkloadSummary,
    config: CompileConfig | None = None,
    **fields: Any,
) -> Path:
    """Write the best.yaml of `tuned_config(workload, config, **fields)` to `path`; returns the path written."""
    return tuned_config(workload, config, **fields).write(path)
