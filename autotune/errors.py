"""The exceptions autotune raises: one root, a few kinds a caller may want to tell apart.

Every message names what was wrong, the value seen and what is allowed, so that a user
can act on it without reading our code.
"""

from __future__ import annotations

__all__ = [
    "AutotuneError",
    "ConfigError",
    "PublishError",
    "RecordError",
    "RetuneError",
    "SearchError",
    "SpaceError",
    "Terminated",
    "WorkloadError",
]


class AutotuneError(Exception):
    """Root of every error autotune raises on purpose."""


class WorkloadError(AutotuneError):
    """The workload target cannot be resolved, or it does not describe a runnable workload."""


class ConfigError(AutotuneError):
    """A compile configuration or a config file is invalid."""


class SpaceError(AutotuneError):
    """A search-space file is invalid."""


class SearchError(AutotuneError):
    """The search cannot start or cannot go on (bad options, a damaged study, nothing measured)."""


class RetuneError(AutotuneError):
    """A retune cannot start or cannot measure (missing study, bad options, a workload that does not run)."""


class PublishError(AutotuneError):
    """New result files could not replace the old ones (which are then left as they were)."""


class RecordError(AutotuneError):
    """A record from a trial process is of another version, or its fields are not the record's own."""


class Terminated(KeyboardInterrupt):
    """The command was asked to stop by SIGTERM (a scheduler's job that ran over, a shutdown).

    Not an AutotuneError: it is handled as Ctrl-C is, wherever a KeyboardInterrupt is, so that the
    running trial is recorded as interrupted and every worker is killed; the command line then
    exits with its own code.
    """
