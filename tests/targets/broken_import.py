"""A target module whose own import fails, as when a dependency is not installed."""

import autotune_missing_dependency_xyz  # noqa: F401
